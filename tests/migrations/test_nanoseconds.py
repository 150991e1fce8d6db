"""Migration 0023: a store whose spans hold float seconds gets integer nanoseconds, each the nanosecond
nearest the value the float held (not `round(x * 1e9)`, which a double rounds to a multiple of 256 first),
on SQLite and PostgreSQL; what is no time becomes -1, unreadable; an open span stays open."""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from agentdesk.store.persistence.database import open_store
from agentdesk.store.text.times import UNREADABLE_NS, ns_of_seconds, readable_ns
from tests.conftest import PgCluster
from tests.migrations.building import SqliteBuilder, postgres_builder, upgrade

BEFORE = "0022_bigint_tokens"


def floats() -> list[float]:
    """Times a store may hold: whole, a fraction, a fraction a hair below the next second, 1970, random."""
    rng = random.Random(22)
    made = [1_733_480_000.0, 1_733_480_000.123456789, 1_733_480_000.9999999997, 0.0, 1.5e-9, 8_999_999_999.5]
    made += [rng.uniform(0, 7.2e9) for _ in range(200)]
    made += [rng.uniform(1.7e9, 1.8e9) for _ in range(200)]
    return made


NEAREST = Fraction(1, 2) + Fraction(1, 10**6)
"""How far (ns) a conversion may be from the float's exact value: the nearest nanosecond, but for a value
within a millionth of a nanosecond of a half, which the fraction's product may round either way."""


def nearest(ns: int, seconds: float) -> bool:
    """`ns` is the nanosecond nearest the float's own value (exact rational arithmetic)."""
    return abs(ns - Fraction(seconds) * 10**9) <= NEAREST


@given(st.floats(0, 9e9))
def test_ns_of_seconds_is_the_nanosecond_nearest_the_float(seconds: float) -> None:
    assert nearest(ns_of_seconds(seconds), seconds)


def _fill(engine: Engine, values: list[float], junk: list[object], *, postgres: bool) -> None:
    with engine.begin() as conn:
        if postgres:  # spans alone: no run, project... (the foreign keys' triggers sleep for this session)
            conn.exec_driver_sql("SET session_replication_role = replica")
        rows = [{"id": f"s{n}", "start": value, "end": value + 0.25 if n % 2 else None}
                for n, value in enumerate([*values, *junk])]
        conn.execute(text("INSERT INTO spans (id, run_id, kind, name, status, started_at, ended_at, input_tokens, "
                          "output_tokens, cost_usd, attributes) VALUES (:id, 'r', 'tool', 'x', 'ok', :start, :end, "
                          "0, 0, 0, '{}')"), rows)


def _check(engine: Engine, values: list[float], junk: list[object]) -> None:
    with engine.connect() as conn:
        got = {i: (s, e) for i, s, e in conn.exec_driver_sql("SELECT id, started_at, ended_at FROM spans")}
    for n, value in enumerate(values):
        start, end = got[f"s{n}"]
        assert type(start) is int and start == ns_of_seconds(value), value
        assert end == (ns_of_seconds(value + 0.25) if n % 2 else None), value
    for n in range(len(values), len(values) + len(junk)):
        assert got[f"s{n}"][0] == UNREADABLE_NS and readable_ns(got[f"s{n}"][0]) is None
    assert all(nearest(got[f"s{n}"][0], v) for n, v in enumerate(values))


def test_a_sqlite_store_with_float_times_gets_exact_nanoseconds(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    engine = SqliteBuilder(tmp_path).engine(path)
    upgrade(engine, BEFORE)
    values, junk = floats(), [-5.0, 1e300, -1e300, 9.2e18, "soon"]
    _fill(engine, values, junk, postgres=False)
    engine.dispose()
    open_store(str(path)).close()
    _check(engine, values, junk)
    with engine.connect() as conn:  # the run index is back, on the new column
        plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN SELECT id FROM spans WHERE run_id = 'r' "
                                    "ORDER BY started_at").all()
        assert any("spans_by_run" in str(row) for row in plan)
    engine.dispose()


@pytest.mark.slow
def test_a_postgres_store_with_float_times_gets_exact_nanoseconds(pg_cluster: PgCluster) -> None:
    with postgres_builder(pg_cluster) as builder:
        url = builder.new_database()
        engine = builder.engine(url)
        upgrade(engine, BEFORE)
        values, junk = floats(), [-5.0, 1e300, -1e300, 9.2e18, float("nan"), float("inf")]
        _fill(engine, values, junk, postgres=True)
        engine.dispose()
        open_store(url).close()
        _check(engine, values, junk)
        engine.dispose()
