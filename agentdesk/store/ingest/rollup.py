"""A run's roll-up after a write: its totals over its spans, and the run, agents and session they update.

Why apart from the writer: the roll-up is the same for a trace written at once and for a staged one
(whose facts are read outside the write lock), and on PostgreSQL it is the statement that decides the
round trips: a new run's facts are summed from the rows the writer inserts (`Totals`: nothing to read),
the others are read in one statement with the root span's facts, and the updates are one statement queued
in the `outbox`. SQLite runs them one by one (no UPDATE inside WITH).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection

from agentdesk.store.ingest.outbox import is_postgres, run
from agentdesk.store.ingest.rows import IN_CHUNK, SPAN_COLUMNS

_SPAN_AT = {name: n for n, name in enumerate(SPAN_COLUMNS)}

_ROLL_UP_COLUMNS = (
    "SELECT count(*), count(*) FILTER (WHERE ended_at IS NULL), min(started_at), max(ended_at), "
    "coalesce(sum(input_tokens) FILTER (WHERE kind = 'model'), 0), "
    "coalesce(sum(output_tokens) FILTER (WHERE kind = 'model'), 0), "
    "coalesce(sum(cost_usd) FILTER (WHERE kind = 'model'), 0.0)")
ROLL_UP_SQL = _ROLL_UP_COLUMNS + " FROM spans WHERE run_id = :run"
"""A run's totals over its spans (the run's slice of `spans_by_run`)."""
ROLL_UP_ROOT_SQL = (_ROLL_UP_COLUMNS + "".join(f", (SELECT {c} FROM spans WHERE id = :root)"
                                               for c in ("id", "status", "name", "error", "attributes"))
                    + " FROM spans WHERE run_id = :run")
"""The totals and the root span's facts (primary-key lookups), in one statement."""

_RUN_SQL = ("UPDATE runs SET status = :status, started_at = :started_at, ended_at = :ended_at, "
            "input_tokens = :input_tokens, output_tokens = :output_tokens, cost_usd = :cost_usd, error = :error, "
            "title = coalesce(:title, title), revision = revision + 1 WHERE id = :run")
_SESSION_SQL = ("UPDATE sessions SET status = :session_status, ended_at = :ended_at, revision = revision + 1 "
                "WHERE id = :session")
_AGENTS_SQL = "UPDATE agents SET status = :agent_status, revision = revision + 1 WHERE id {ids}"
_MODEL_SQL = "UPDATE agents SET model = :model WHERE id {ids} AND model = ''"
_MODEL_WHOLE_SQL = "UPDATE agents SET model = :model WHERE id {ids} AND model <> :model"
"""A stored trace seen whole again (a later request of it): its agents' model is set from the whole trace."""
_UNSET_SQL = "UPDATE agents SET model = '' WHERE id {ids} AND model <> ''"
"""Agents whose calls all moved to other agents (`TraceWriter._retype`): they name no model now."""


def store_roll_up(conn: Connection, params: dict[str, Any], agents: list[str],
                  by_model: dict[str, list[str]], *, whole: bool = False, unset: Sequence[str] = ()) -> None:
    """The run, its agents and its session updated from the roll-up. PostgreSQL: one statement (the
    agents' and session's updates as data-modifying WITH queries: the same privileges, policies and
    triggers apply as to each alone), queued in the `outbox`, ids as one array; SQLite (no UPDATE inside
    WITH): one by one, ids `IN_CHUNK` at a time. The models after the status: a row once per statement.
    `whole`: a stored trace seen whole, whose agents' models are set again (`_MODEL_WHOLE_SQL`); `unset`: the
    agents left with no model."""
    model_sql = _MODEL_WHOLE_SQL if whole else _MODEL_SQL
    if is_postgres(conn):
        run(conn, f"WITH agents_done AS ({_AGENTS_SQL.format(ids='= ANY(:agents)')} RETURNING 1), "
                  f"session_done AS ({_SESSION_SQL} RETURNING 1) {_RUN_SQL}", {**params, "agents": agents})
        if unset:
            run(conn, _UNSET_SQL.format(ids="= ANY(:agents)"), {"agents": list(unset)})
        for model_name, ids in by_model.items():
            run(conn, model_sql.format(ids="= ANY(:agents)"), {"model": model_name, "agents": ids})
        return
    run(conn, _RUN_SQL, params)
    for n in range(0, len(agents), IN_CHUNK):
        run(conn, _AGENTS_SQL.format(ids="IN (SELECT value FROM json_each(:agents))"),
            {**params, "agents": json.dumps(agents[n:n + IN_CHUNK])})
    run(conn, _SESSION_SQL, params)
    for n in range(0, len(unset), IN_CHUNK):
        run(conn, _UNSET_SQL.format(ids="IN (SELECT value FROM json_each(:agents))"),
            {"agents": json.dumps(list(unset[n:n + IN_CHUNK]))})
    for model_name, ids in by_model.items():
        run(conn, model_sql.format(ids="IN (SELECT value FROM json_each(:agents))"),
            {"model": model_name, "agents": json.dumps(ids)})


@dataclass(slots=True)
class Totals:
    """What `ROLL_UP_ROOT_SQL` would read of a new run, from its rows as they are inserted (`SPAN_COLUMNS`
    tuples; the values are compared and summed, never converted): count, open, first start, last end, the
    model calls' tokens and cost, then the root span's (id, status, name, error, attributes) or Nones."""

    count: int = 0
    open: int = 0
    first: Any = None
    last: Any = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Any = 0.0
    root: tuple[Any, ...] = (None, None, None, None, None)

    def add(self, rows: Sequence[tuple[Any, ...]], root_row: str | None) -> None:
        at = _SPAN_AT
        for row in rows:
            self.count += 1
            start, end = row[at["started_at"]], row[at["ended_at"]]
            if self.first is None or start < self.first:
                self.first = start
            if end is None:
                self.open += 1
            elif self.last is None or end > self.last:
                self.last = end
            if row[at["kind"]] == "model":
                self.tokens_in += row[at["input_tokens"]] or 0
                self.tokens_out += row[at["output_tokens"]] or 0
                self.cost += row[at["cost_usd"]] or 0
            if row[0] == root_row:
                self.root = tuple(row[at[c]] for c in ("id", "status", "name", "error", "attributes"))

    def facts(self) -> tuple[Any, ...]:
        return (self.count, self.open, self.first, self.last, self.tokens_in, self.tokens_out, self.cost,
                *self.root)


class Root(NamedTuple):
    """The root span's facts the roll-up needs."""

    status: str
    name: str
    error: str | None
    attributes: str | None
