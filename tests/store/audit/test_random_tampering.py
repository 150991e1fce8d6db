"""Random tamper operations on the audit table: whatever changed, verify says tampered, and never raises."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.audit import Verdict
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime
from tests.store.audit.helpers import verify

COLUMNS = ("seq", "at", "actor", "action", "entity", "entity_id", "payload", "prev_hash", "hash", "mac")
values = st.one_of(st.text(max_size=80), st.binary(max_size=40), st.integers(-2**40, 2**40),
                   st.floats(allow_nan=False), st.none(), st.just("0" * 64))
operations = st.lists(st.one_of(
    st.tuples(st.just("set"), st.integers(0, 40), st.sampled_from(COLUMNS), values),
    st.tuples(st.just("delete"), st.integers(0, 40)),
    st.tuples(st.just("delete_tail"), st.integers(1, 40)),
    st.tuples(st.just("swap"), st.integers(0, 40), st.integers(0, 40), st.sampled_from(COLUMNS[1:])),
    st.tuples(st.just("copy_to_end"), st.integers(0, 40)),
), min_size=1, max_size=4)


def _build(path: Path) -> None:
    store = open_store(str(path))
    try:
        rt, source = AgentRuntime(store), NativeSource(store)
        pid = rt.create_project("p")
        sid = rt.create_session(rt.create_task(pid, "t"), "s")
        run = rt.start_run(rt.create_agent(sid, "a", "m"), "r")
        for n in range(4):
            approval = rt.request_approval(run, "shell", {"n": n})
            if n % 2:
                source.decide(approval, approve=True, actor="alice")
    finally:
        store.close()


def _apply(conn: sqlite3.Connection, op: tuple[Any, ...]) -> None:
    seqs = [r[0] for r in conn.execute("SELECT seq FROM audit_log ORDER BY seq")]
    if not seqs:
        return
    kind = op[0]
    if kind == "set":
        conn.execute(f"UPDATE audit_log SET {op[2]} = ? WHERE seq = ?", (op[3], seqs[op[1] % len(seqs)]))
    elif kind == "delete":
        conn.execute("DELETE FROM audit_log WHERE seq = ?", (seqs[op[1] % len(seqs)],))
    elif kind == "delete_tail":
        conn.execute("DELETE FROM audit_log WHERE seq > ?", (seqs[-min(op[1], len(seqs))] - 1,))
    elif kind == "swap":
        a, b, column = seqs[op[1] % len(seqs)], seqs[op[2] % len(seqs)], op[3]
        va = conn.execute(f"SELECT {column} FROM audit_log WHERE seq = ?", (a,)).fetchone()[0]
        vb = conn.execute(f"SELECT {column} FROM audit_log WHERE seq = ?", (b,)).fetchone()[0]
        conn.execute(f"UPDATE audit_log SET {column} = ? WHERE seq = ?", (vb, a))
        conn.execute(f"UPDATE audit_log SET {column} = ? WHERE seq = ?", (va, b))
    elif kind == "copy_to_end":
        names = ", ".join(COLUMNS[1:])
        conn.execute(f"INSERT INTO audit_log (seq, {names}) SELECT ?, {names} FROM audit_log WHERE seq = ?",
                     (seqs[-1] + 1, seqs[op[1] % len(seqs)]))


def _snapshot(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute("SELECT * FROM audit_log ORDER BY seq"))
    finally:
        conn.close()


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """The pristine bytes of a store at `store.sqlite`; each example restores them into that same path,
    so the anchor lines (compared per location) apply to what is tampered."""
    path = tmp_path / "store.sqlite"
    _build(path)
    pristine = tmp_path / "pristine.sqlite"
    shutil.copyfile(path, pristine)
    return pristine


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_any_change_to_the_audit_table_is_reported(template: Path, tmp_path: Path,
                                                   ops: list[tuple[Any, ...]]) -> None:
    path = tmp_path / "store.sqlite"
    shutil.copyfile(template, path)
    conn = sqlite3.connect(path)
    for op in ops:
        with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL, a duplicate seq: refused by SQLite itself
            _apply(conn, op)
    conn.commit()
    conn.close()
    changed = _snapshot(path) != _snapshot(template)
    store = open_store(str(path), read_only=True)
    try:
        report = verify(store)  # must not raise, whatever the columns now hold
    finally:
        store.close()
    if changed:
        assert report.verdict == Verdict.TAMPERED, (ops, report)
        assert report.reason and report.reason.endswith(".")
    else:
        assert report.verdict == Verdict.INTACT, (ops, report)
