"""Search one run's spans: in the store's full-text index when it has one, else by scanning the source.

Native SQLite stores (migration 0006 and later) answer in SQL: words through
FTS5 (`span_fts`), kind/status/duration as column tests on the run's index, an
attribute term as an FTS phrase over the attribute words checked exactly against
the key's value in the span row (`attributes`). No payload leaves the database. Everything else (a
foreign runtime's database, agentdesk on PostgreSQL) is scanned through the
`Source` seam: the span table's columns decide kind, status, duration and
name, and only spans still undecided after that are read one by one
(`source.span`) for their texts and attributes, so a query with a column term
(`kind:tool payments`) reads far fewer payloads than bare words.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, text

from agentdesk.store.errors import NotFound
from agentdesk.store.ingest.staging import STAGED_SQL
from agentdesk.store.persistence.convert import json_dict
from agentdesk.store.persistence.database import own_store
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.search import fts, pg_index
from agentdesk.store.search.attributes import attribute_tests, register_checks
from agentdesk.store.search.indexer import drain_for_search
from agentdesk.store.search.marks import marked_targets
from agentdesk.store.search.query import Query, fts_phrase, matches_text, parse, words_of
from agentdesk.store.source import Source
from agentdesk.store.text.times import NS_PER_S, ns_column


@dataclass(frozen=True)
class SearchResult:
    """The matching span ids, ordered by start, and how many there are."""

    span_ids: list[str]
    total: int
    scanned: bool = False
    """True when the source had no index and the run was scanned (slower on large runs)."""


_INDEXED: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()
"""Whether each open engine's database has the index, asked once per engine."""


def indexed_engine(source: Source) -> Engine | None:
    """The SQLite engine of a native store carrying the span index, or None (scan instead)."""
    store = own_store(source)
    if store is None:
        return None
    engine = store.engine
    known = _INDEXED.get(engine)
    if known is None:
        known = _INDEXED[engine] = fts.has_index(engine)
    return engine if known else None


def search_run(source: Source, run_id: str, query: str) -> SearchResult:
    """The spans of `run_id` that `query` matches; `QueryError` for a bad query, `NotFound` for no run."""
    parsed = parse(query)
    if parsed.marked:
        return _marked(source, parsed, run_id)
    return _search(source, parsed, run_id)


def _search(source: Source, parsed: Query, run_id: str) -> SearchResult:
    engine = indexed_engine(source)
    store = own_store(source)
    if engine is not None and store is not None:
        drain_for_search(store, run_id)
        return _search_sql(engine, parsed, run_id)
    if store is not None and store.is_postgres and pg_index.has_index(store.engine):
        return _search_pg(store.engine, parsed, run_id)
    source.run(run_id)  # NotFound for an unknown run, like the indexed path
    return _scan(source, parsed, source.span_table(run_id))


def _marked(source: Source, parsed: Query, run_id: str) -> SearchResult:
    """The run's spans operators marked as `label:`/`note:` ask, narrowed by the query's other terms."""
    source.run(run_id)
    spans = [span for span, run in marked_targets(source, parsed).get("span", {}).items() if run == run_id]
    if not spans:
        return SearchResult([], 0)
    if parsed.only_marks:
        table = source.span_table(run_id, spans)
        order = sorted(range(len(table)), key=lambda i: table.starts[i])
        return SearchResult([table.ids[i] for i in order], len(order))
    found = _search(source, parsed, run_id)
    wanted = set(spans)
    kept = [span for span in found.span_ids if span in wanted]
    return SearchResult(kept, len(kept), found.scanned)


# -- PostgreSQL: the GIN index for candidates, the query's patterns for the answer ----------------------
def pg_statement(q: Query, params: dict[str, Any], where: Sequence[str], columns: str) -> str:
    """SELECT `columns` (then the attributes when an attribute term must be tested in Python) of the spans
    passing `where`, the query's column terms and its word terms (`pg_index.text_tests`)."""
    index, text_terms = pg_index.text_tests(q, params)
    extra = ", s.attributes" if q.attributes else ""
    return pg_index.statement(index, where, [*column_tests(q, params), *text_terms], columns + extra)


def pg_attributes_match(q: Query, attributes: Any) -> bool:
    """The attribute terms tested on a candidate's attributes, as the scan tests them."""
    found = json_dict(attributes)
    return all(attribute_matches(found, a.key, a.words) for a in q.attributes)


def _search_pg(engine: Engine, q: Query, run_id: str) -> SearchResult:
    params: dict[str, Any] = {"run": run_id}
    sql = pg_statement(q, params, ["s.run_id = :run"], "s.id, s.started_at")
    with engine.begin() as conn:
        shown = text(f"SELECT 1 FROM runs WHERE id = :run AND id NOT IN ({STAGED_SQL})")  # not half-imported
        if conn.execute(shown, params).first() is None:
            raise NotFound(f"No run {run_id!r} in this store.")
        rows = [row for row in conn.execute(text(sql), params)
                if not q.attributes or pg_attributes_match(q, row[2])]
    return SearchResult(*_by_start(rows))


# -- the indexed path -------------------------------------------------------------------------------
def match_expression(q: Query) -> str | None:
    """The FTS5 MATCH text for a query's word terms (None when it has none)."""
    parts = [f"{{name input_text output_text}} : {fts_phrase(words)}" for words in q.text]
    parts += [f"name : {fts_phrase(words)}" for words in q.names]
    for a in q.attributes:  # the key's words and the value's words, each somewhere in the attribute text
        key_words = words_of(a.key)
        parts += [f'attrs : "{" ".join(key_words)}"'] if key_words else []
        parts += [f"attrs : {fts_phrase(a.words)}"]
    return " AND ".join(parts) if parts else None


def column_tests(q: Query, params: dict[str, Any], table: str = "s") -> list[str]:
    """SQL conditions on span columns for kind, status and duration."""
    tests: list[str] = []
    if q.kinds:
        params["kind"] = next(iter(q.kinds))
        tests.append(f"{table}.kind = :kind")
    if q.statuses:
        params["status"] = next(iter(q.statuses))
        tests.append(f"{table}.status = :status")
    for n, d in enumerate(q.durations):
        params[f"dur{n}"] = round(d.seconds * NS_PER_S)  # span times are integer nanoseconds
        tests.append(f"({table}.ended_at IS NOT NULL AND {table}.ended_at - {table}.started_at {d.op} :dur{n})")
    return tests


def _search_sql(engine: Engine, q: Query, run_id: str) -> SearchResult:
    params: dict[str, Any] = {"run": run_id}
    column_terms = column_tests(q, params)
    attribute_terms = attribute_tests(q, params)  # on the span row: the index keeps no copy of the attributes
    match = match_expression(q)
    if match is None:  # columns only: the span rows themselves, never stale
        sql = (f"SELECT s.id, s.started_at FROM spans s INDEXED BY {fts.COLUMNS_INDEX} "
               f"WHERE {' AND '.join(['s.run_id = :run', *column_terms])}")
    else:  # the index for spans indexed since their last write, UNION the run's dirty spans as they are now
        params["match"] = match
        join = " CROSS JOIN spans s ON s.id = r.span_id" if column_terms or attribute_terms else ""
        tests = ["r.run_id = :run", *column_terms, fresh("r"), *attribute_terms]  # the check last: fresh rows only
        sql = (f"SELECT r.span_id, r.started_at, 0, NULL, NULL, NULL, NULL FROM {fts.FTS_TABLE} f "
               f"CROSS JOIN {fts.ROWS_TABLE} r ON r.rowid = f.rowid{join} "
               f"WHERE f.{fts.FTS_TABLE} MATCH :match AND {' AND '.join(tests)} "
               f"UNION ALL {dirty_rows(['s.run_id = :run', *column_terms])}")
    with engine.connect() as conn:
        shown = text(f"SELECT 1 FROM runs WHERE id = :run AND id NOT IN ({STAGED_SQL})")  # not half-imported
        if conn.execute(shown, params).first() is None:
            raise NotFound(f"No run {run_id!r} in this store.")
        raw = conn.connection.driver_connection  # the sqlite3 cursor: a million rows without ORM row objects
        assert raw is not None
        register_checks(raw)
        # one statement, one snapshot of the index and the dirty set; dirty rows tested as they stream by
        rows = [row for row in raw.execute(sql, params) if match is None or not row[2] or dirty_matches(q, row)]
    return SearchResult(*_by_start(rows))


def fresh(rows: str) -> str:
    """SQL: the index row's span has not been written since it was indexed (else it is scanned instead)."""
    return f"NOT EXISTS (SELECT 1 FROM {fts.DIRTY_TABLE} d WHERE d.span_id = {rows}.span_id)"


def dirty_rows(tests: Sequence[str], extra: str = "") -> str:
    """SQL for the dirty spans passing `tests` (column terms), with what a text test needs.

    Columns: id, start, 1 (the dirty marker; 0 in the index half), name, input text,
    output text, attributes (then `extra`). A dirty id with no span row (deleted) yields nothing.
    """
    return (f"SELECT s.id, s.started_at, 1, s.name, s.input_text, s.output_text, s.attributes{extra} "
            f"FROM {fts.DIRTY_TABLE} d CROSS JOIN spans s ON s.id = d.span_id WHERE {' AND '.join(tests)}")


def dirty_matches(q: Query, row: Sequence[Any]) -> bool:
    """Whether a dirty span (a `dirty_rows` row) matches the query's words and attributes, as the scan does."""
    name, input_text, output_text = row[3] or "", row[4], row[5]
    if not all(matches_text(words, name) for words in q.names):
        return False
    if not all(matches_text(words, name, input_text, output_text) for words in q.text):
        return False
    if not q.attributes:
        return True
    attributes = json_dict(row[6])
    return all(attribute_matches(attributes, a.key, a.words) for a in q.attributes)


def _by_start(rows: Sequence[Any]) -> tuple[list[str], int]:
    """Ids ordered by start time, in numpy (SQLite's ORDER BY on a big match set is a slow sort)."""
    if not rows:
        return [], 0
    try:
        starts = np.fromiter((row[1] for row in rows), dtype=np.float64, count=len(rows))
    except (TypeError, ValueError):  # a word where a time belongs: it sorts as an unreadable time
        starts = np.array(ns_column(row[1] for row in rows), dtype=np.float64)
    order = np.argsort(starts, kind="stable").tolist()
    return [rows[i][0] for i in order], len(rows)


# -- the scan fallback ------------------------------------------------------------------------------
def _scan(source: Source, q: Query, table: SpanTable) -> SearchResult:
    found: list[str] = []
    for i in _column_candidates(q, table):
        name = table.names[i]
        if not all(matches_text(words, name) for words in q.names):
            continue
        open_terms = [words for words in q.text if not matches_text(words, name)]
        if not open_terms and not q.attributes:
            found.append(table.ids[i])
            continue
        span = source.span(table.ids[i])
        if all(matches_text(words, span.input_text, span.output_text) for words in open_terms) \
                and all(attribute_matches(span.attributes, a.key, a.words) for a in q.attributes):
            found.append(table.ids[i])
    return SearchResult(found, len(found), scanned=True)


def _column_candidates(q: Query, table: SpanTable) -> Iterable[int]:
    """Indices (already in start order: span tables come sorted) passing kind, status and duration."""
    for i in range(len(table)):
        if q.kinds and table.kinds[i] not in q.kinds:
            continue
        if q.statuses and table.statuses[i] not in q.statuses:
            continue
        if q.durations:
            end = table.ends[i]
            seconds = None if end is None else end - table.starts[i]
            if not all(d.accepts(seconds) for d in q.durations):
                continue
        yield i


def attribute_matches(attributes: dict[str, Any], key: str, words: tuple[str, ...]) -> bool:
    """Whether attribute `key` exists and its value (as text) holds the words, as plain text terms do."""
    if key not in attributes or attributes[key] is None:
        return False
    value = attributes[key]
    return matches_text(words, value if isinstance(value, str) else json.dumps(value))
