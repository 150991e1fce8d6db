"""stageflow's native spans (`agent_spans`) for the timeline, and its transcript for the context view.

Spans are written once, complete (`insertSpan` is the only writer), so none is in flight. A span
with no `ended_at` but a `duration_ms` ends at start + duration; with neither it has no end.
Spans carry tokens but no cost: cost is per turn (`rm.Run.usage`), and is not spread over spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.sources.parsing import epoch, json_object, parse_time, time_of
from agentdesk.store.sources.sql import Row, marks, one, rows
from agentdesk.store.sources.stageflow.common import SPAN_KINDS, SPAN_STATUSES, agent_session, missing
from agentdesk.store.validation import estimate_tokens

SPANS_SQL = """SELECT s.span_id, s.kind, s.name, s.status, s.started_at, s.ended_at, s.duration_ms, s.input_tokens,
       s.output_tokens,
       CASE WHEN EXISTS (SELECT 1 FROM agent_spans p WHERE p.span_id = s.parent_span_id AND p.turn_id = s.turn_id)
            THEN s.parent_span_id END AS parent_span_id
  FROM agent_spans s"""
"""A turn's span columns; a parent outside the turn reads as NULL (the span is drawn as a root)."""


def span_kind(native: str) -> str:
    return native if native in SPAN_KINDS else "internal"


def span_status(native: str) -> str:
    """stageflow's SpanStatus is ok|error|cancelled; anything else is shown as an error, native kept."""
    return native if native in SPAN_STATUSES else "error"


def span_end(started_at: object, ended_at: object, duration_ms: object) -> float | None:
    end = parse_time(ended_at)
    if end is not None:
        return end.timestamp()
    if isinstance(duration_ms, int | float):
        return epoch(started_at) + duration_ms / 1000
    return None


def span_table(conn: Connection, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
    """The turn's spans; with `span_ids` only those, read by primary key (a live timeline's changed rows).

    A parent that is not in this turn (not written, or another turn's) would leave the waterfall with a
    dangling edge: such spans are drawn as roots, decided in SQL so a subset needs no other row.
    """
    found: list[Row] = []
    if span_ids is None:
        found = rows(conn, f"{SPANS_SQL} WHERE s.turn_id = :tid ORDER BY s.started_at, s.span_id", tid=run_id)
    else:
        wanted = list(dict.fromkeys(span_ids))
        for n in range(0, len(wanted), 500):
            placeholders, bound = marks("s", wanted[n:n + 500])
            found += rows(conn, f"{SPANS_SQL} WHERE s.turn_id = :tid AND s.span_id IN ({placeholders})",
                          tid=run_id, **bound)
        found.sort(key=lambda r: (r["started_at"], r["span_id"]))
    return SpanTable(
        ids=[r["span_id"] for r in found],
        parent_ids=[r["parent_span_id"] for r in found],
        kinds=[span_kind(r["kind"]) for r in found],
        names=[r["name"] for r in found],
        statuses=[span_status(r["status"]) for r in found],
        starts=[epoch(r["started_at"]) for r in found],
        ends=[span_end(r["started_at"], r["ended_at"], r["duration_ms"]) for r in found],
        input_tokens=[int(r["input_tokens"] or 0) for r in found],
        output_tokens=[int(r["output_tokens"] or 0) for r in found],
        costs=[0.0] * len(found),
    )


def span(conn: Connection, span_id: str) -> rm.Span:
    r = one(conn, "SELECT * FROM agent_spans WHERE span_id = :sid", sid=span_id)
    if r is None:
        missing("span", span_id)
    attributes: dict[str, Any] = json_object(r["attributes_json"])
    if span_kind(r["kind"]) != r["kind"]:
        attributes["native_kind"] = r["kind"]
    if span_status(r["status"]) != r["status"]:
        attributes["native_status"] = r["status"]
    started = time_of(r["started_at"])
    ended = parse_time(r["ended_at"])
    if ended is None and isinstance(r["duration_ms"], int | float):
        ended = started + timedelta(milliseconds=r["duration_ms"])
    error = None
    if r["status"] == "error":
        found = attributes.get("error") or attributes.get("error_message") or attributes.get("error_code")
        error = found if isinstance(found, str) else None
    usage = rm.Usage(int(r["input_tokens"] or 0), int(r["output_tokens"] or 0), 0.0)
    return rm.Span(r["span_id"], r["turn_id"], r["parent_span_id"], span_kind(r["kind"]), r["name"],
                   span_status(r["status"]), started, ended, usage, attributes, r["input_text"],
                   r["output_text"], error)


def context(conn: Connection, agent_id: str) -> rm.AgentContext:
    """The session transcript, read-only: one group per turn, one item per message.

    `context_revision` is the number of messages, so it moves whenever the transcript grows.
    stageflow does not record what a model call was sent, so no span has a sent context.
    """
    ses = agent_session(conn, agent_id)
    turns = rows(conn, "SELECT turn_id, seq, started_at FROM agent_turns WHERE session_id = :sid ORDER BY seq",
                 sid=ses["session_id"])
    messages = rows(conn, "SELECT * FROM agent_messages WHERE session_id = :sid ORDER BY seq",
                    sid=ses["session_id"])
    groups = [rm.ContextGroup(t["turn_id"], agent_id, int(t["seq"]), "turn", 0, time_of(t["started_at"]))
              for t in turns]
    known = {t["turn_id"] for t in turns}
    loose = f"{ses['session_id']}/no-turn"
    if any(m["turn_id"] not in known for m in messages):
        created = time_of(messages[0]["created_at"])
        groups.insert(0, rm.ContextGroup(loose, agent_id, 0, "messages without a turn", 0, created))
    items = [rm.ContextItem(m["message_id"], agent_id, m["turn_id"] if m["turn_id"] in known else loose,
                            int(m["seq"]), "message", m["role"], m["text"], True, False, 0,
                            estimate_tokens(m["text"]), None, None, time_of(m["created_at"]))
             for m in messages]
    return rm.AgentContext(agent_id, len(items), 0, tuple(groups), tuple(items))
