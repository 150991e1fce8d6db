"""The span index keeps no copy of its text (migration 0025): removing a changed span's row stays exact.

A contentless FTS5 row must be removed with the very values it was indexed with, else the index is
corrupt; the triggers keep those values at a span's first change (`fts.STALE_TABLE`) and the source view
gives them back. Checked by FTS5's 'integrity-check', by comparing the index entry by entry with one built
afresh from the view, and by comparing every search with the scan, after random writes (through a plain
sqlite3 connection, which has none of agentdesk's SQL functions), reindexing and searches.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from alembic import command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import alembic_config, open_store
from agentdesk.store.persistence.payloads import pack, register
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search import fts, run_search, store_search
from agentdesk.store.search.indexer import dirty_count, drain, index_chunk
from agentdesk.store.search.query import parse
from agentdesk.store.search.run_search import search_run
from agentdesk.store.search.store_search import HitKind, search_store
from tests.conftest import prebuilt

WORDS = ("alpha", "beta", "gamma", "read", "file", "alp", "x1", "42", "true", "null")
KEYS = ("path", "gen_ai.tool.name", "tool.name", "k.x", 'q"k', "clé")
SEPARATORS = (" ", "_", ".", "\n", "/", ": ")


def _run(rt: AgentRuntime) -> str:
    pid = rt.create_project("P")
    sid = rt.create_session(rt.create_task(pid, "T"), "S")
    return rt.start_run(rt.create_agent(sid, "coder", "m"), "r")


@contextmanager
def plain(path: Path) -> Iterator[sqlite3.Connection]:
    """A sqlite3 connection with nothing of agentdesk's registered: what a shell or another tool has."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def integrity(source: NativeSource) -> None:
    """FTS5's own check, then the index compared entry by entry with one built afresh from its content.

    Rows marked lost (their span row overwritten without its delete trigger) are left out: their values are
    gone, and the indexer empties the whole index when it meets one.

    FTS5 does not know the view (the table is contentless: FTS5 could not read a view calling json_each), so
    its check covers the index's own structure, and the comparison with the content is done here, through
    `fts5vocab` instance tables (term, row, column, offset)."""
    path = source.store.path
    assert path is not None
    conn = sqlite3.connect(path)
    try:
        register(conn)
        conn.execute(f"INSERT INTO {fts.FTS_TABLE}({fts.FTS_TABLE}) VALUES ('integrity-check')")
        conn.execute(f"CREATE VIRTUAL TABLE temp.fresh USING fts5(name, input_text, output_text, attrs, "
                     f"tokenize=\"{fts.TOKENIZER}\")")
        conn.execute(f"INSERT INTO temp.fresh(rowid, name, input_text, output_text, attrs) "
                     f"SELECT rowid, name, input_text, output_text, attrs FROM {fts.SOURCE_VIEW}")
        conn.execute(f"CREATE VIRTUAL TABLE temp.held USING fts5vocab('main', '{fts.FTS_TABLE}', 'instance')")
        conn.execute("CREATE VIRTUAL TABLE temp.wanted USING fts5vocab('temp', 'fresh', 'instance')")
        lost = f"SELECT rowid FROM {fts.STALE_TABLE} WHERE lost"
        held, wanted = (sorted(conn.execute(f"SELECT * FROM temp.{name} WHERE doc NOT IN ({lost})").fetchall())
                        for name in ("held", "wanted"))
    finally:
        conn.close()
    assert held == wanted


def scanned(source: NativeSource, run: str, query: str) -> list[str]:
    """The scan's answer (no index): the reference every indexed search must equal."""
    return sorted(run_search._scan(source, parse(query), source.span_table(run)).span_ids)


def insert(path: Path, run: str, span: str, kind: str, name: str, input_text: str, attributes: str,
           packed: bool = False) -> None:
    with plain(path) as conn:
        conn.execute("INSERT INTO spans (id, run_id, kind, name, status, input_tokens, output_tokens, cost_usd, "
                     "attributes, input_text, started_at) VALUES (?, ?, ?, ?, 'ok', 0, 0, 0, ?, ?, ?)",
                     (span, run, kind, name, pack(attributes) if packed else attributes, input_text,
                      1_700_000_000_000_000_000 + int(span[1:])))


texts = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=5).map(
    lambda parts: "".join(w + s for w, s in parts).strip())
values = st.one_of(texts, st.integers(-5, 50), st.booleans(), st.none(), st.lists(texts, max_size=2))
attribute_maps = st.dictionaries(st.sampled_from(KEYS), values, max_size=4)
phrases = st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(" ".join)
queries = st.one_of(
    phrases.map(lambda p: f'"{p}"'),
    phrases.map(lambda p: f'name:"{p}"'),
    st.tuples(st.sampled_from(KEYS), phrases).map(lambda kv: f"'{kv[0]}:{kv[1]}'" if '"' in kv[0]
                                                  else f'"{kv[0]}:{kv[1]}"'),
    st.tuples(st.sampled_from(("kind:tool", "kind:model")), st.sampled_from(KEYS), phrases).map(
        lambda t: f"{t[0]} '{t[1]}:{t[2]}'" if '"' in t[1] else f'{t[0]} "{t[1]}:{t[2]}"'),
)
operations = st.lists(st.one_of(
    st.tuples(st.just("insert"), texts, texts, attribute_maps, st.booleans()),
    st.tuples(st.just("update"), st.integers(0, 9), st.sampled_from(("name", "input_text", "attributes")),
              texts, attribute_maps, st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 9)),
    st.tuples(st.just("rekey"), st.integers(0, 9)),
    st.tuples(st.just("replace"), st.integers(0, 9), texts),
    st.tuples(st.just("index"), st.integers(1, 4)),
    st.tuples(st.just("search"), queries),
), min_size=1, max_size=14)


def _apply(op: tuple[object, ...], path: Path, source: NativeSource, run: str, spans: list[str],
           made: list[int]) -> None:
    kind = op[0]
    if kind == "insert":
        _, name, input_text, attributes, packed = op
        made[0] += 1
        span = f"s{made[0]}"
        insert(path, run, span, "tool" if made[0] % 2 else "model", str(name), str(input_text),
               json.dumps(attributes), bool(packed))
        spans.append(span)
    elif kind in ("update", "delete", "rekey", "replace") and spans:
        span = spans[int(op[1]) % len(spans)]  # type: ignore[call-overload]
        with plain(path) as conn:
            if kind == "update":
                _, _, column, words, attributes, packed = op
                value = json.dumps(attributes) if column == "attributes" else words
                value = pack(str(value)) if column == "attributes" and packed else value
                conn.execute(f"UPDATE spans SET {column} = ? WHERE id = ?", (value, span))
            elif kind == "delete":
                conn.execute("DELETE FROM spans WHERE id = ?", (span,))
                spans.remove(span)
            elif kind == "rekey":
                made[0] += 1
                conn.execute("UPDATE spans SET id = ? WHERE id = ?", (f"s{made[0]}", span))
                spans[spans.index(span)] = f"s{made[0]}"
            else:  # the old row goes without its delete trigger (recursive triggers are off)
                conn.execute("INSERT OR REPLACE INTO spans (id, run_id, kind, name, status, input_tokens, "
                             "output_tokens, cost_usd, attributes, started_at) "
                             "VALUES (?, ?, 'tool', ?, 'ok', 0, 0, 0, '{}', 1)", (span, run, op[2]))
    elif kind == "index":
        index_chunk(source.store.write_engine, int(op[1]))  # type: ignore[call-overload]
    elif kind == "search":
        same_as_scan(source, run, str(op[1]))


def same_as_scan(source: NativeSource, run: str, query: str) -> None:
    """One run's search and the store's (its span hits) answer as the scan does."""
    wanted = scanned(source, run, query)
    assert sorted(search_run(source, run, query).span_ids) == wanted, query
    found = search_store(source, query)
    assert sorted(h.id for g in found.groups for h in g.hits if h.kind == HitKind.SPAN) == wanted, query
    assert found.totals[HitKind.SPAN] == len(wanted), query


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations, finals=st.lists(queries, min_size=1, max_size=4))
def test_random_writes_reindexing_and_searches_keep_the_index_exact(
        steps: list[tuple[object, ...]], finals: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (run_search, store_search):  # searches that do not index first: dirty spans are scanned
        monkeypatch.setattr(module, "drain_for_search", lambda store, run_id: 0)
    with tempfile.TemporaryDirectory() as folder:
        path = prebuilt(Path(folder) / "store.sqlite")
        store = open_store(str(path))
        try:
            source = NativeSource(store)
            run = _run(AgentRuntime(store))
            spans: list[str] = []
            made = [0]
            for op in steps:
                _apply(op, path, source, run, spans, made)
                integrity(source)
            drain(store.write_engine)
            integrity(source)
            for query in finals:
                same_as_scan(source, run, query)
            with store.engine.connect() as conn:
                kept = conn.exec_driver_sql(f"SELECT count(*) FROM {fts.STALE_TABLE}").scalar_one()
            assert kept == 0 and dirty_count(store.engine) == 0
        finally:
            store.close()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return prebuilt(tmp_path / "store.sqlite")


@pytest.fixture
def indexed(path: Path) -> Iterator[tuple[NativeSource, str]]:
    store = open_store(str(path))
    source = NativeSource(store)
    run = _run(AgentRuntime(store))
    insert(path, run, "s1", "tool", "first name", "first words", json.dumps({"path": "first.py"}), packed=True)
    insert(path, run, "s2", "tool", "other", "kept words", json.dumps({"path": "kept.py"}))
    drain(store.write_engine)
    yield source, run
    store.close()


def test_a_span_changed_twice_before_indexing_loses_its_first_words(
        path: Path, indexed: tuple[NativeSource, str]) -> None:
    source, run = indexed
    with plain(path) as conn:  # no agentdesk_text here: the triggers must not need it
        conn.execute("UPDATE spans SET input_text = 'second words', attributes = ? WHERE id = 's1'",
                     (pack(json.dumps({"path": "second.py" + " pad" * 300})),))
        conn.execute("UPDATE spans SET input_text = 'third words', name = 'third' WHERE id = 's1'")
    with source.store.engine.connect() as conn:  # the copy kept is the one the index holds: the first
        kept = conn.exec_driver_sql(f"SELECT input_text FROM {fts.STALE_TABLE}").scalars().all()
    assert kept == ["first words"]
    integrity(source)
    drain(source.store.write_engine)
    integrity(source)
    assert search_run(source, run, "first").span_ids == []
    assert search_run(source, run, "second").span_ids == []
    assert search_run(source, run, "third").span_ids == ["s1"]
    assert search_run(source, run, "path:second").span_ids == ["s1"]
    assert search_run(source, run, "path:first").span_ids == []


def test_a_span_removed_from_a_plain_connection_leaves_the_index(
        path: Path, indexed: tuple[NativeSource, str]) -> None:
    source, run = indexed
    with plain(path) as conn:
        conn.execute("DELETE FROM spans WHERE id = 's1'")
    drain(source.store.write_engine)
    integrity(source)
    assert search_run(source, run, "words").span_ids == ["s2"]
    with source.store.engine.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {fts.STALE_TABLE}").scalar_one() == 0


def test_a_span_row_replaced_without_its_trigger_restarts_the_index(
        path: Path, indexed: tuple[NativeSource, str], caplog: pytest.LogCaptureFixture) -> None:
    source, run = indexed
    with plain(path) as conn:  # REPLACE deletes the old row without firing its delete trigger
        conn.execute("INSERT OR REPLACE INTO spans (id, run_id, kind, name, status, input_tokens, output_tokens, "
                     "cost_usd, attributes, started_at) VALUES ('s1', ?, 'tool', 'fresh', 'ok', 0, 0, 0, '{}', 1)",
                     (run,))
    assert search_run(source, run, "fresh").span_ids == ["s1"]  # dirty: scanned, right already
    drain(source.store.write_engine)
    assert "re-indexing all" in caplog.text
    integrity(source)
    assert search_run(source, run, "fresh").span_ids == ["s1"]
    assert search_run(source, run, "first").span_ids == []
    assert search_run(source, run, "kept").span_ids == ["s2"]


def test_the_index_keeps_no_text_and_no_attributes(indexed: tuple[NativeSource, str]) -> None:
    source, _ = indexed
    with source.store.engine.connect() as conn:
        names = set(conn.exec_driver_sql("SELECT name FROM sqlite_master").scalars())
        columns = {row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({fts.ROWS_TABLE})")}
    assert f"{fts.FTS_TABLE}_content" not in names and fts.SOURCE_VIEW in names
    assert columns == {"rowid", "span_id", "run_id", "started_at"}


def test_a_store_indexed_before_0025_is_reindexed_from_nothing(path: Path) -> None:
    store = open_store(str(path))
    run = _run(AgentRuntime(store))
    insert(path, run, "s1", "tool", "older", "indexed words", json.dumps({"path": "a.py"}))
    with store.write_engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0024_rule_applier")
    store.close()
    with plain(path) as conn:  # 0024's index holds its own copy of the text
        assert conn.execute(f"SELECT count(*) FROM {fts.FTS_TABLE}_content").fetchone() == (0,)
        assert conn.execute(f"SELECT count(*) FROM {fts.DIRTY_TABLE}").fetchone() == (1,)
    store = open_store(str(path))  # upgrades: index made again, every span dirty
    try:
        source = NativeSource(store)
        assert dirty_count(store.engine) == 1
        drain(store.write_engine)
        integrity(source)
        assert search_run(source, run, "path:a").span_ids == ["s1"]
    finally:
        store.close()


def test_an_index_built_by_another_sqlite_is_built_again(
        path: Path, indexed: tuple[NativeSource, str], caplog: pytest.LogCaptureFixture) -> None:
    source, run = indexed
    with plain(path) as conn:  # as if an older library had built it, and a span changed since
        conn.execute(f"UPDATE {fts.META_TABLE} SET value = '3.0.0' WHERE key = 'sqlite_version'")
        conn.execute("UPDATE spans SET input_text = 'changed words' WHERE id = 's1'")
    caplog.set_level("INFO")
    drain(source.store.write_engine)
    assert "another SQLite version" in caplog.text
    integrity(source)
    assert search_run(source, run, "words").span_ids == ["s1", "s2"]
    assert search_run(source, run, '"first words"').span_ids == []
    with plain(path) as conn:
        version = conn.execute(f"SELECT value FROM {fts.META_TABLE}").fetchone()[0]
    assert version == sqlite3.sqlite_version
