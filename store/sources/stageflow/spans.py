"""stageflow's native spans (`agent_spans`) for the timeline, and its transcript for the context view.

Spans are written once, complete (`insertSpan` is the only writer), so none is in flight. A span
with no `ended_at` but a `duration_ms` ends at start + duration; with neither it has no end.
Spans carry tokens but no cost: cost is per turn (`rm.Run.usage`), and is not spread over spans.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import text

from agentdesk.store import readmodel as rm
from agentdesk.store.source import SpanTable
from agentdesk.store.sources.stageflow.common import (
    SPAN_KINDS,
    SPAN_STATUSES,
    StageflowBase,
    epoch_of,
    json_obj,
    parse_time,
    time_of,
)
from agentdesk.store.validation import estimate_tokens

SPAN_COLUMNS = ("span_id, parent_span_id, kind, name, status, started_at, ended_at, duration_ms, "
                "input_tokens, output_tokens")


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
        return epoch_of(started_at) + duration_ms / 1000
    return None


class SpanMixin(StageflowBase):
    def span_table(self, run_id: str) -> SpanTable:
        rows = self.rows(f"SELECT {SPAN_COLUMNS} FROM agent_spans WHERE turn_id = :tid"
                         " ORDER BY started_at, span_id", tid=run_id)
        present = {r["span_id"] for r in rows}
        return SpanTable(
            ids=[r["span_id"] for r in rows],
            # A parent that is not in this turn (not written, or another turn's) would leave the waterfall
            # with a dangling edge: such spans are drawn as roots.
            parent_ids=[r["parent_span_id"] if r["parent_span_id"] in present else None for r in rows],
            kinds=[span_kind(r["kind"]) for r in rows],
            names=[r["name"] for r in rows],
            statuses=[span_status(r["status"]) for r in rows],
            starts=[epoch_of(r["started_at"]) for r in rows],
            ends=[span_end(r["started_at"], r["ended_at"], r["duration_ms"]) for r in rows],
            input_tokens=[int(r["input_tokens"] or 0) for r in rows],
            output_tokens=[int(r["output_tokens"] or 0) for r in rows],
            costs=[0.0] * len(rows),
        )

    def span(self, span_id: str) -> rm.Span:
        rows = self.rows("SELECT * FROM agent_spans WHERE span_id = :sid", sid=span_id)
        if not rows:
            self._missing("span", span_id)
        r = rows[0]
        attributes: dict[str, Any] = json_obj(r["attributes_json"])
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

    def sent_context(self, span_id: str) -> list[rm.SentItem]:
        """stageflow does not record what a model call was sent (capture mode keeps only span bodies)."""
        return []

    def context(self, agent_id: str) -> rm.AgentContext:
        """The session transcript, read-only: one group per turn, one item per message.

        `context_revision` is the number of messages, so it moves whenever the transcript grows.
        """
        ses = self._agent_session(agent_id)
        with self.reading() as conn:
            turns = conn.execute(text("SELECT turn_id, seq, started_at FROM agent_turns"
                                      " WHERE session_id = :sid ORDER BY seq"),
                                 {"sid": ses["session_id"]}).all()
            messages = conn.execute(text("SELECT * FROM agent_messages WHERE session_id = :sid ORDER BY seq"),
                                    {"sid": ses["session_id"]}).mappings().all()
        groups = [rm.ContextGroup(t.turn_id, agent_id, int(t.seq), "turn", 0, time_of(t.started_at))
                  for t in turns]
        known = {t.turn_id for t in turns}
        loose = f"{ses['session_id']}/no-turn"
        if any(m["turn_id"] not in known for m in messages):
            created = time_of(messages[0]["created_at"])
            groups.insert(0, rm.ContextGroup(loose, agent_id, 0, "messages without a turn", 0, created))
        items = [rm.ContextItem(m["message_id"], agent_id, m["turn_id"] if m["turn_id"] in known else loose,
                                int(m["seq"]), "message", m["role"], m["text"], True, False, 0,
                                estimate_tokens(m["text"]), None, None, time_of(m["created_at"]))
                 for m in messages]
        return rm.AgentContext(agent_id, len(items), 0, tuple(groups), tuple(items))
