"""Hypothesis over the JSON columns of the foreign runtimes' databases: reading never crashes.

For each runtime (maka, stageflow, vgxness, lensagent) the test builds its fixture once,
finds every TEXT column that holds JSON (objects or arrays) in it, and per example
replaces that column of one row with something a broken or newer runtime could leave
there: other JSON, malformed JSON, deep nesting, lone surrogate escapes, huge numbers,
a blob. Then it reads everything a window or the CLI reads (info, the whole tree, every
run's spans, every agent's context, all approvals).

Asserted: no exception other than the store's documented `StoreError`s (each one sentence),
and reading leaves the database file byte for byte as it was (data intact).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.errors import StoreError
from agentdesk.store.source import Source
from agentdesk.store.sources import open_source
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture
from tests.store.sources.fixtures_maka import build_maka_fixture
from tests.store.sources.fixtures_stageflow import build_stageflow_fixture
from tests.store.sources.fixtures_vgxness import build_vgxness_fixture

BUILDERS: dict[str, Callable[[Path], object]] = {
    "maka": build_maka_fixture,
    "stageflow": build_stageflow_fixture,
    "vgxness": build_vgxness_fixture,
    "lensagent": lambda path: build_lensagent_fixture(path, volume=False),
}

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
                      st.floats(allow_nan=False), st.text(max_size=20))
ANY_JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=10)


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


BAD_TEXT = st.one_of(
    ANY_JSON.map(lambda v: json.dumps(v)),                      # valid JSON of any shape
    st.text(max_size=40),                                       # not JSON at all
    ANY_JSON.map(lambda v: json.dumps(v)[:-1] if json.dumps(v) else "{"),  # cut short
    st.sampled_from(['"\\ud800"', '{"content": "\\udfff lone"}', '{"a": 1e999}', "NaN", "-Infinity",
                     '{"a": 123456789012345678901234567890}', "{" * 3 + "}" * 3, '"\\u0000\\u202e"']),
    st.integers(min_value=2, max_value=400).map(deep),          # nesting; 50,000 levels: see below
)
VALUE = st.one_of(BAD_TEXT, st.binary(max_size=20), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.none())
"""SQLite stores integers in 64 bits: a bigger one cannot be written by any runtime."""


@dataclass(frozen=True)
class Fixture:
    kind: str
    path: Path
    columns: tuple[tuple[str, str], ...]
    """(table, column) pairs that hold JSON in the fixture."""


def json_columns(path: Path) -> tuple[tuple[str, str], ...]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    found = []
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                             "AND name NOT LIKE 'sqlite_%'")]
        for table in tables:
            for _cid, column, *_rest in conn.execute(f'PRAGMA table_info("{table}")'):
                rows = conn.execute(f'SELECT "{column}" FROM "{table}" WHERE typeof("{column}") = \'text\' '
                                    f'AND substr(trim("{column}"), 1, 1) IN (\'{{\', \'[\') LIMIT 5').fetchall()
                if any(_is_json(r[0]) for r in rows):
                    found.append((table, column))
    finally:
        conn.close()
    return tuple(found)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Fixture]:
    built = {}
    for kind, build in BUILDERS.items():
        path = tmp_path_factory.mktemp(kind) / f"{kind}.sqlite"
        build(path)
        conn = sqlite3.connect(path)  # fold the WAL in, so one file is the whole database
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        built[kind] = Fixture(kind, path, json_columns(path))
        assert built[kind].columns, f"no JSON column found in the {kind} fixture"
    return built


def attempt(read: Callable[..., Any], *args: Any) -> Any:
    """One read, allowed to refuse with a StoreError that says one sentence."""
    try:
        return read(*args)
    except StoreError as exc:
        assert str(exc).strip(), "an error without a sentence"
        return None


def read_everything(source: Source) -> None:
    """What the window and the CLI read."""
    attempt(source.info)
    attempt(source.approvals, None)
    for project in attempt(source.projects) or []:
        for task in attempt(source.tasks, project.id) or []:
            for session in attempt(source.sessions, task.id) or []:
                for agent in attempt(source.agents, session.id) or []:
                    attempt(source.context, agent.id)
                    page = attempt(source.runs, agent.id)
                    for run in page.items if page else ():
                        attempt(source.run, run.id)
                        table = attempt(source.span_table, run.id)
                        for span_id in (table.ids[:3] if table else ()):
                            attempt(source.span, span_id)
                            attempt(source.sent_context, span_id)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def spoil_and_read(fixture: Fixture, tmp: Path, pick: int, row_pick: int, value: object) -> None:
    table, column = fixture.columns[pick % len(fixture.columns)]
    path = tmp / f"{fixture.kind}.sqlite"
    shutil.copyfile(fixture.path, path)
    conn = sqlite3.connect(path)
    try:
        rowids = [r[0] for r in conn.execute(f'SELECT rowid FROM "{table}" ORDER BY rowid')]
        if not rowids:
            return
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?', (value, rowids[row_pick % len(rowids)]))
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.IntegrityError:
        return  # a CHECK or NOT NULL constraint refuses this value: the runtime could not have written it
    finally:
        conn.close()
    before = digest(path)
    try:
        source = open_source(str(path))
    except StoreError:
        return
    try:
        read_everything(source)
    finally:
        source.close()
    assert digest(path) == before, f"reading changed the {fixture.kind} database"


FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


@pytest.mark.parametrize("kind", sorted(BUILDERS))
@given(pick=st.integers(min_value=0, max_value=10_000), row_pick=st.integers(min_value=0, max_value=10_000),
       data=st.data())
@FUZZ
def test_a_spoilt_json_column_never_crashes_a_read(kind: str, fixtures: dict[str, Fixture], tmp_path: Path,
                                                   pick: int, row_pick: int, data: st.DataObject) -> None:
    spoil_and_read(fixtures[kind], tmp_path, pick, row_pick, data.draw(VALUE))


@pytest.mark.parametrize("kind", ["maka", "lensagent", "stageflow", "vgxness"])
def test_malformed_json_in_every_column(kind: str, fixtures: dict[str, Fixture], tmp_path: Path) -> None:
    fixture = fixtures[kind]
    for pick in range(len(fixture.columns)):
        for bad in ("", "{", '{"unterminated": '):
            spoil_and_read(fixture, tmp_path, pick, 0, bad)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_deeply_nested_json_in_every_column(kind: str, fixtures: dict[str, Fixture], tmp_path: Path) -> None:
    """50,000 levels of nesting (the issue's case) in each JSON column in turn, first and last row."""
    fixture = fixtures[kind]
    for pick in range(len(fixture.columns)):
        for row_pick in (0, -1):
            spoil_and_read(fixture, tmp_path, pick, row_pick, deep(50_000))
