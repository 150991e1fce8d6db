"""The import marks its new spans for the search index without the per-row trigger (`search_marks`).

The same writes, once with the trigger and once with it dropped and the marks made per batch, must leave the
same marks (dirty spans, kept and lost index rows); the trigger is back, byte for byte, when the transaction
ends, and no other connection ever sees the schema without it.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, Engine

from agentdesk.store.ingest import importer, search_marks
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from agentdesk.store.persistence.sqlite import create_sqlite_engine
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search.indexer import drain
from agentdesk.store.search.run_search import search_run
from agentdesk.store.uow import UnitOfWork
from tests.conftest import prebuilt
from tests.store.ingest.test_staged_import import big_trace

pytestmark = pytest.mark.sqlite_only

TRIGGER_SQL = "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'span_search_insert'"
MARKS = ("SELECT span_id FROM span_search_dirty ORDER BY span_id",
         "SELECT rowid, name, input_text, output_text, attributes, lost FROM span_search_stale ORDER BY rowid",
         "SELECT id, name FROM spans ORDER BY id")


def _trigger(path: Path) -> str | None:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(TRIGGER_SQL).fetchone()
        return None if row is None else str(row[0])
    finally:
        conn.close()


def _marks(conn: Connection) -> list[list[tuple[object, ...]]]:
    return [[tuple(r) for r in conn.exec_driver_sql(sql)] for sql in MARKS]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A store whose index holds s1..s4, then s2 deleted (its values kept), s3 replaced and s4 deleted without
    the delete trigger (nothing kept: an insert of s4 marks its index row lost): the states an insert's marks
    depend on."""
    path = prebuilt(tmp_path_factory.mktemp("marks") / "base.sqlite")
    store = open_store(str(path))
    try:
        rt = AgentRuntime(store)
        pid = rt.create_project("P")
        run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(pid, "T"), "S"), "coder", "m"), "r")
        with store.write_engine.begin() as conn:
            for n in range(1, 5):
                _insert(conn, run, f"s{n}", f"name {n}")
        drain(store.write_engine)
        with store.write_engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM spans WHERE id = 's2'")
            _insert(conn, run, "s3", "replaced", replace=True)
            delete = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'span_search_delete'").scalar()
            conn.exec_driver_sql("DROP TRIGGER span_search_delete")  # as a program without it: nothing kept
            conn.exec_driver_sql("DELETE FROM spans WHERE id = 's4'")
            conn.exec_driver_sql(delete)
    finally:
        store.close()
    yield path, run


def _insert(conn: Connection, run: str, span: str, name: str, *, replace: bool = False) -> None:
    conn.exec_driver_sql(
        f"INSERT {'OR REPLACE ' if replace else ''}INTO spans (id, run_id, kind, name, status, input_tokens, "
        "output_tokens, cost_usd, attributes, input_text, started_at) VALUES (?, ?, 'tool', ?, 'ok', 0, 0, 0, "
        "'{}', ?, 1)", (span, run, name, f"words of {name}"))


def _engine(path: Path) -> Engine:
    """An engine as the store makes them: its transactions begin with BEGIN, so DDL is inside them."""
    return create_sqlite_engine(path, read_only=False, busy_timeout_s=5.0)


ids = st.sampled_from([f"s{n}" for n in range(1, 9)])
# Plain inserts only, as the import makes: an INSERT OR REPLACE imposes its REPLACE on the statements of the
# triggers it fires (SQLite's rule), so its marks differ from those the same statements make on their own.
operations = st.lists(st.one_of(
    st.tuples(st.just("insert"), st.lists(ids, min_size=1, max_size=4, unique=True)),
    st.tuples(st.just("update"), ids, st.sampled_from(("name", "input_text", "status"))),
    st.tuples(st.just("delete"), ids),
), min_size=1, max_size=10)


def _apply(conn: Connection, run: str, ops: list[tuple[object, ...]], step: int) -> None:
    for n, op in enumerate(ops):
        kind = op[0]
        if kind == "insert":
            present = {r[0] for r in conn.exec_driver_sql("SELECT id FROM spans")}
            new = [str(span) for span in op[1] if span not in present]  # type: ignore[union-attr]
            for span in new:
                _insert(conn, run, span, f"new {step}.{n}")
            search_marks.catch_up(conn, new)  # as the import's bulk insert does after each batch
        elif kind == "update":
            conn.exec_driver_sql(f"UPDATE spans SET {op[2]} = ? WHERE id = ?", (f"changed {step}.{n}", op[1]))
        else:
            conn.exec_driver_sql("DELETE FROM spans WHERE id = ?", (op[1],))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(transactions=st.lists(operations, min_size=1, max_size=3))
def test_the_marks_made_per_batch_are_the_triggers_marks(base: tuple[Path, str], tmp_path: Path,
                                                        transactions: list[list[tuple[object, ...]]]) -> None:
    source, run = base
    stored = _trigger(source)
    results = []
    for deferring in (False, True):
        path = tmp_path / f"{deferring}.sqlite"
        path.unlink(missing_ok=True)
        shutil.copy(source, path)
        engine = _engine(path)
        try:
            for step, ops in enumerate(transactions):
                with engine.begin() as conn:
                    if deferring:
                        with search_marks.deferred(conn) as dropped:
                            assert dropped
                            assert conn.exec_driver_sql(TRIGGER_SQL).first() is None
                            _apply(conn, run, ops, step)
                    else:
                        _apply(conn, run, ops, step)
            with engine.connect() as conn:
                results.append(_marks(conn))
        finally:
            engine.dispose()
        assert _trigger(path) == stored
    assert results[0] == results[1]


def test_an_error_leaves_the_trigger_and_writes_nothing(base: tuple[Path, str], tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    shutil.copy(base[0], path)
    engine = _engine(path)
    try:
        with pytest.raises(RuntimeError), engine.begin() as conn, search_marks.deferred(conn) as dropped:
            assert dropped and conn.exec_driver_sql(TRIGGER_SQL).first() is None
            _insert(conn, base[1], "s9", "lost")
            raise RuntimeError("the import failed")
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM spans WHERE id = 's9'").scalar() == 0
    finally:
        engine.dispose()
    assert _trigger(path) == _trigger(base[0])


def test_a_trigger_another_migration_changed_is_left_to_do_its_work(base: tuple[Path, str], tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    shutil.copy(base[0], path)
    changed = ("CREATE TRIGGER span_search_insert AFTER INSERT ON spans BEGIN "
               "INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id); END")
    conn0 = sqlite3.connect(path)
    with conn0:
        conn0.execute("DROP TRIGGER span_search_insert")
        conn0.execute(changed)
        conn0.execute("DELETE FROM span_search_dirty")
    conn0.close()
    engine = _engine(path)
    try:
        with engine.begin() as conn, search_marks.deferred(conn) as dropped:
            assert not dropped
            assert conn.exec_driver_sql(TRIGGER_SQL).scalar() == changed
            _insert(conn, base[1], "s9", "marked by the trigger")
        with engine.connect() as conn:
            assert [r[0] for r in conn.exec_driver_sql("SELECT span_id FROM span_search_dirty")] == ["s9"]
    finally:
        engine.dispose()
    assert _trigger(path) == changed


def test_an_import_marks_every_span_and_no_reader_sees_the_trigger_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = prebuilt(tmp_path / "store.sqlite")
    stored = _trigger(path)
    assert stored is not None
    seen: list[tuple[bool, str | None]] = []
    catch_up = search_marks.catch_up

    def watched(conn: Connection, span_ids: Sequence[str]) -> None:
        if not seen:  # mid-import: dropped for the import's own connection, in place for everyone else
            seen.append((conn.exec_driver_sql(TRIGGER_SQL).first() is None, _trigger(path)))
        catch_up(conn, span_ids)

    monkeypatch.setattr(search_marks, "catch_up", watched)
    store = open_store(str(path))
    try:
        result = import_files(store, [big_trace(tmp_path / "big.json", spans=2_500)], helper=False)
        assert result.report.spans_written == 2_500
        assert seen == [(True, stored)]
        with store.engine.connect() as conn:
            spans = {r[0] for r in conn.exec_driver_sql("SELECT id FROM spans")}
            dirty = {r[0] for r in conn.exec_driver_sql("SELECT span_id FROM span_search_dirty")}
            run = conn.exec_driver_sql("SELECT run_id FROM spans LIMIT 1").scalar()
            named = {r[0] for r in conn.exec_driver_sql("SELECT id FROM spans WHERE name LIKE 'execute_tool 42%'")}
        assert len(spans) == 2_500 and dirty == spans
        assert drain(store.write_engine) == 2_500
        found = search_run(NativeSource(store), str(run), '"execute_tool 42"')  # 42, 420, 422, ... (a prefix)
        assert not found.scanned and set(found.span_ids) == named and len(named) == 6
    finally:
        store.close()
    assert _trigger(path) == stored


def test_another_writer_between_the_imports_transactions_keeps_the_trigger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program writing a span between the transactions of a staged import finds the trigger in place: its
    span is marked, as every imported one is."""
    path = prebuilt(tmp_path / "store.sqlite")
    store = open_store(str(path))
    rt = AgentRuntime(store)
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("P"), "T"), "S"),
                                       "coder", "m"), "r")
    windows: list[bool] = []
    wanted, landed = threading.Event(), threading.Event()
    deferred = search_marks.deferred

    @contextmanager
    def first_then_the_program(conn: Connection) -> Iterator[bool]:
        with deferred(conn) as dropped:
            yield dropped
        windows.append(dropped)
        wanted.set()  # the program may write once this transaction has committed

    class AfterTheProgram(UnitOfWork):
        """The import's next transaction begins only once the program's write has landed."""

        def __enter__(self) -> UnitOfWork:
            if wanted.is_set():
                assert landed.wait(30)
            return super().__enter__()

    def program() -> None:
        if not wanted.wait(30):
            return
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            conn.execute("INSERT INTO spans (id, run_id, kind, name, status, input_tokens, output_tokens, "
                         "cost_usd, attributes, started_at) VALUES ('program', ?, 'tool', 'x', 'ok', 0, 0, 0, "
                         "'{}', 1)", (run,))
        finally:
            conn.close()
            landed.set()

    monkeypatch.setattr(search_marks, "deferred", first_then_the_program)
    monkeypatch.setattr(importer, "UnitOfWork", AfterTheProgram)
    monkeypatch.setattr(importer, "STAGED_SLICE_S", 0.01)  # several transactions
    monkeypatch.setattr(importer, "UNSIGNALLED_SLICE_S", 0.01)
    thread = threading.Thread(target=program)
    thread.start()
    try:
        result = import_files(store, [big_trace(tmp_path / "big.json", spans=4_000)], helper=False)
    finally:
        wanted.set()
        thread.join()
    try:
        assert result.report.spans_written == 4_000
        assert len(windows) > 1 and all(windows)  # the program wrote between two of the import's transactions
        with store.engine.connect() as conn:
            spans = {r[0] for r in conn.exec_driver_sql("SELECT id FROM spans")}
            dirty = {r[0] for r in conn.exec_driver_sql("SELECT span_id FROM span_search_dirty")}
        assert "program" in spans and len(spans) == 4_001 and dirty == spans
    finally:
        store.close()
    assert _trigger(path) is not None
