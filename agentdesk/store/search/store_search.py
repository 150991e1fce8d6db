"""Search the whole store: spans, approvals and context items of every run, grouped by run.

Spans use the same query as one run's search (`run_search`), over every run:
in SQL through the FTS index on a native SQLite store (spans written since
they were last indexed are scanned from their current values, in the same snapshot), else run by run through
the `Source` seam (stopping at `limit` hits). Approvals and context items have
no kind, status or duration: they are searched only by a query's plain words
(and `name:` against an approval's tool), through the seam for every source,
since their number is small next to spans'. A context item belongs to an agent,
not a run: it is listed under that agent's newest run, without a span.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import Engine, text

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.ingest.staging import STAGED_SQL
from agentdesk.store.persistence.database import own_store
from agentdesk.store.search import fts, pg_index
from agentdesk.store.search.attributes import attribute_tests, register_checks
from agentdesk.store.search.indexer import drain_for_search
from agentdesk.store.search.marks import Marked, marked_targets
from agentdesk.store.search.query import Query, matches_text, parse
from agentdesk.store.search.run_search import (
    column_tests,
    dirty_matches,
    dirty_rows,
    fresh,
    indexed_engine,
    match_expression,
    pg_attributes_match,
    pg_statement,
    search_run,
)
from agentdesk.store.source import Source
from agentdesk.store.text.times import UNREADABLE_SECONDS, readable_ns

MAX_MARKED = 10_000
"""Marked spans a mixed query narrows to in one SQL statement (SQLite allows 32,766 parameters)."""
DEFAULT_LIMIT = 500
"""Hits listed per kind (spans, approvals, context items); the counts say how many matched in all."""


class HitKind(StrEnum):
    SPAN = "span"
    APPROVAL = "approval"
    CONTEXT = "context"
    RUN = "run"
    """A run an operator labelled or noted (only for `label:`/`note:` queries)."""


@dataclass(frozen=True)
class Hit:
    kind: HitKind
    id: str
    run_id: str
    span_id: str | None
    label: str
    """Agent text (a span name, a tool, an item's first words): show it through `store.text`."""
    started: float = 0.0


@dataclass
class RunHits:
    run_id: str
    title: str = ""
    agent: str = ""
    hits: list[Hit] = field(default_factory=list)


@dataclass(frozen=True)
class StoreSearchResult:
    groups: tuple[RunHits, ...]
    totals: dict[HitKind, int]
    scanned: bool
    """True when spans were searched run by run (no index), which is slow on big stores."""

    @property
    def total(self) -> int:
        return sum(self.totals.values())


def search_store(source: Source, query: str, limit: int = DEFAULT_LIMIT) -> StoreSearchResult:
    """Every match of `query` in the store, grouped by run; `QueryError` for a bad query."""
    parsed = parse(query)
    marked = marked_targets(source, parsed) if parsed.marked else None
    engine = indexed_engine(source)
    store = own_store(source)
    if marked is not None and parsed.only_marks:
        spans, span_total = _marked_spans(source, marked, limit)
    elif engine is not None and store is not None:
        drain_for_search(store, None)
        spans, span_total = _spans_sql(engine, parsed, limit, marked)
    elif store is not None and store.is_postgres and marked is None and pg_index.has_index(store.engine):
        engine = store.engine  # (words mixed with label:/note: terms are scanned: the marks narrow them)
        spans, span_total = _spans_pg(engine, parsed, limit)
    else:
        spans, span_total = _spans_scan(source, parsed, limit)
    approvals, approval_total = _approvals(source, parsed, limit, marked)
    items, item_total = _context_items(source, parsed, limit) if marked is None else ([], 0)
    runs = _marked_runs(source, parsed, marked, limit)
    groups: dict[str, RunHits] = {}
    for hit in [*runs, *spans, *approvals, *items]:
        groups.setdefault(hit.run_id, RunHits(hit.run_id)).hits.append(hit)
    for group in groups.values():
        _describe(source, group)
    ordered = sorted(groups.values(), key=lambda g: (-len(g.hits), g.run_id))
    totals = {HitKind.SPAN: span_total, HitKind.APPROVAL: approval_total, HitKind.CONTEXT: item_total}
    if marked is not None:
        totals = {HitKind.RUN: len(runs), HitKind.SPAN: span_total, HitKind.APPROVAL: approval_total}
    return StoreSearchResult(tuple(ordered), totals, scanned=engine is None and marked is None)


def _describe(source: Source, group: RunHits) -> None:
    try:
        run = source.run(group.run_id)
        group.title = run.title
        group.agent = source.agent(run.agent_id).name
    except NotFound:
        pass


def _spans_sql(engine: Engine, q: Query, limit: int, marked: Marked | None = None) -> tuple[list[Hit], int]:
    params: dict[str, Any] = {"limit": limit}
    tests = [*column_tests(q, params), f"s.run_id NOT IN ({STAGED_SQL})"]  # no half-imported trace
    if marked is not None:
        ids = list(marked.get("span", {}))[:MAX_MARKED]
        params |= {f"marked{n}": span for n, span in enumerate(ids)}
        tests.append(f"s.id IN ({', '.join(f':marked{n}' for n in range(len(ids)))})" if ids else "0")
    match = match_expression(q)
    if match is None:  # columns only: the span rows themselves, never stale
        base = f"FROM spans s WHERE {' AND '.join(tests)}"
    else:  # the index for spans not written since they were indexed; the dirty ones are scanned below
        where = " AND ".join([*tests, fresh("r"), *attribute_tests(q, params)])
        params["match"] = match
        base = (f"FROM {fts.FTS_TABLE} f CROSS JOIN {fts.ROWS_TABLE} r ON r.rowid = f.rowid "
                f"CROSS JOIN spans s ON s.id = r.span_id WHERE f.{fts.FTS_TABLE} MATCH :match AND {where}")
    with engine.begin() as conn:  # one read transaction: the index and the dirty set from one snapshot
        raw = conn.connection.driver_connection
        assert raw is not None
        register_checks(raw)
        total = conn.execute(text(f"SELECT count(*) {base}"), params).scalar_one()
        rows = conn.execute(text(f"SELECT s.id, s.run_id, s.name, s.started_at {base} LIMIT :limit"),
                            params).all()
        dirty = [] if match is None else [
            row for row in conn.execute(text(dirty_rows(tests, ", s.run_id")), params)
            if dirty_matches(q, row)]
    hits = [Hit(HitKind.SPAN, r[0], r[1], r[0], r[2], _started(r[3])) for r in rows]
    hits += [Hit(HitKind.SPAN, r[0], r[7], r[0], r[3] or "", _started(r[1]))
             for r in dirty[: max(0, limit - len(hits))]]
    hits.sort(key=lambda h: (h.run_id, h.started))
    return hits, int(total) + len(dirty)


def _spans_pg(engine: Engine, q: Query, limit: int) -> tuple[list[Hit], int]:
    """Every run's matching spans on PostgreSQL (`run_search.pg_statement`): counted all, `limit` listed."""
    params: dict[str, Any] = {}
    sql = pg_statement(q, params, [f"s.run_id NOT IN ({STAGED_SQL})"], "s.id, s.run_id, s.name, s.started_at")
    hits: list[Hit] = []
    total = 0
    with engine.begin() as conn:
        for row in conn.execute(text(sql), params):
            if q.attributes and not pg_attributes_match(q, row[4]):
                continue
            total += 1
            if len(hits) < limit:
                hits.append(Hit(HitKind.SPAN, row[0], row[1], row[0], row[2], _started(row[3])))
    hits.sort(key=lambda h: (h.run_id, h.started))
    return hits, total


def _started(value: object) -> float:
    """A stored span start (integer nanoseconds) as seconds; an unreadable one (negative, text, ±1e300) sorts
    as the foreign readers' epoch."""
    seconds = readable_ns(value)
    return UNREADABLE_SECONDS if seconds is None else seconds


def every_run(source: Source) -> Iterator[rm.Run]:
    for project in source.projects():
        for task in source.tasks(project.id):
            for session in source.sessions(task.id):
                for agent in source.agents(session.id):
                    offset = 0
                    while True:
                        page = source.runs(agent.id, offset=offset)
                        yield from page.items
                        if not page.has_more:
                            break
                        offset += len(page.items)


def _spans_scan(source: Source, q: Query, limit: int) -> tuple[list[Hit], int]:
    hits: list[Hit] = []
    total = 0
    for run in every_run(source):
        if len(hits) >= limit:
            break
        found = search_run(source, run.id, q.source)
        total += found.total
        if found.span_ids:
            table = source.span_table(run.id, found.span_ids[: limit - len(hits)])
            hits += [Hit(HitKind.SPAN, i, run.id, i, name, start)
                     for i, name, start in zip(table.ids, table.names, table.starts, strict=True)]
    return hits, total


def _plain_words(q: Query) -> bool:
    return not (q.kinds or q.statuses or q.durations or q.attributes)


def _approvals(source: Source, q: Query, limit: int, marked: Marked | None = None) -> tuple[list[Hit], int]:
    if not _plain_words(q):
        return [], 0
    hits: list[Hit] = []
    total = 0
    wanted = None if marked is None else marked.get("approval", {})
    for approval in source.approvals(status=None, limit=100_000):
        if wanted is not None and approval.id not in wanted:
            continue
        if not all(matches_text(words, approval.tool_name) for words in q.names):
            continue
        texts = (approval.tool_name, approval.arguments, approval.reason, approval.edited_arguments)
        if all(matches_text(words, *texts) for words in q.text):
            total += 1
            if len(hits) < limit:
                hits.append(Hit(HitKind.APPROVAL, approval.id, approval.run_id, approval.span_id,
                                approval.tool_name, approval.created_at.timestamp()))
    return hits, total


def _marked_spans(source: Source, marked: Marked, limit: int) -> tuple[list[Hit], int]:
    """Spans found by `label:`/`note:` alone: read per run, in start order."""
    by_run: dict[str, list[str]] = {}
    for span, run in marked.get("span", {}).items():
        by_run.setdefault(run, []).append(span)
    hits: list[Hit] = []
    for run, spans in sorted(by_run.items()):
        try:
            table = source.span_table(run, spans)
        except NotFound:
            continue
        hits += [Hit(HitKind.SPAN, i, run, i, name, start)
                 for i, name, start in zip(table.ids, table.names, table.starts, strict=True)]
    hits.sort(key=lambda h: (h.run_id, h.started))
    return hits[:limit], len(hits)


def _marked_runs(source: Source, q: Query, marked: Marked | None, limit: int) -> list[Hit]:
    """Runs themselves labelled or noted, for a query that asks nothing a run cannot answer."""
    if marked is None or not q.only_marks:
        return []
    hits = []
    for run_id in sorted(marked.get("run", {}))[:limit]:
        try:
            run = source.run(run_id)
        except NotFound:
            continue
        hits.append(Hit(HitKind.RUN, run_id, run_id, None, run.title, run.started_at.timestamp()))
    return hits


def _context_items(source: Source, q: Query, limit: int) -> tuple[list[Hit], int]:
    if not _plain_words(q) or q.names or not q.text:
        return [], 0
    hits: list[Hit] = []
    total = 0
    for project in source.projects():
        for task in source.tasks(project.id):
            for session in source.sessions(task.id):
                for agent in source.agents(session.id):
                    total += _agent_items(source, agent, q, hits, limit)
    return hits, total


def _agent_items(source: Source, agent: rm.Agent, q: Query, hits: list[Hit], limit: int) -> int:
    found = [item for item in source.context(agent.id).items
             if all(matches_text(words, item.content) for words in q.text)]
    if not found:
        return 0
    newest = source.runs(agent.id, limit=1).items
    if not newest:
        return len(found)
    for item in found[: max(0, limit - len(hits))]:
        hits.append(Hit(HitKind.CONTEXT, item.id, newest[0].id, None, item.content[:120]))
    return len(found)
