"""Joining log records (GenAI events and any other log) to their span, whichever arrives first.

A log record tied to a stored span is appended to that span's events (`otel.events`, shown in the span
details and exported back as span events), and a model span's messages, input/output text and "what
the model saw" are mapped again from its events (`semconv.classify`, the same mapping as for spans that
carry their events inline). A record whose span has not arrived is kept durably in `agentdesk_meta`
(one row per span, `otel.events:<trace><span>`) in the same transaction, and the write that brings the
span applies and deletes it (`adopt_pending`, called by `TraceWriter.finish`). Applying is idempotent:
an event already on the span (same name, time and attributes) is not added twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from agentdesk.store.ingest import agent_context
from agentdesk.store.ingest import messages as msgs
from agentdesk.store.ingest.logs import OtelLog
from agentdesk.store.ingest.messages import PLAIN
from agentdesk.store.ingest.prepare import AGENT_KEY, EXTRA_KEYS, digest, item_id
from agentdesk.store.ingest.semconv import classify
from agentdesk.store.ingest.spans import OtelSpan, span_row_id, split_span_row_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.validation import estimate_tokens

PENDING_PREFIX = "otel.events:"
EVENTS_KEY = "otel.events"


def by_span(logs: Sequence[OtelLog]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for log in logs:
        if log.trace_id and log.span_id:
            out.setdefault((log.trace_id, log.span_id), []).append(log.event)
    return out


def attach(conn: Connection, logs: Sequence[OtelLog], touched: set[str], *,
           rebuild: bool = True) -> tuple[int, int, set[str]]:
    """Join `logs` to their spans: (records applied to stored spans, records kept waiting for their span,
    runs whose spans changed); agents whose context grew are added to `touched`."""
    applied = waiting = 0
    runs: set[str] = set()
    for (trace, span), events in by_span(logs).items():
        run = apply(conn, span_row_id(trace, span), events, touched, rebuild=rebuild)
        if run is not None:
            applied += len(events)
            runs.add(run)
            continue
        key = PENDING_PREFIX + trace + span
        stored = conn.execute(select(sc.MetaRow.value).where(sc.MetaRow.key == key)).scalar()
        kept = json.loads(stored) if stored else []
        kept.extend(e for e in events if e not in kept)
        if stored is None:
            conn.execute(insert(sc.MetaRow).values(key=key, value=PLAIN.encode(kept)))
        else:
            conn.execute(update(sc.MetaRow).where(sc.MetaRow.key == key).values(value=PLAIN.encode(kept)))
        waiting += len(events)
    return applied, waiting, runs


def adopt_pending(conn: Connection, trace_id: str, touched: set[str], *, rebuild: bool = True) -> int:
    """Apply the events that arrived before their spans (of this trace) to the spans now stored."""
    prefix = PENDING_PREFIX + trace_id
    rows = conn.execute(select(sc.MetaRow.key, sc.MetaRow.value).where(sc.MetaRow.key.startswith(prefix))).all()
    done = 0
    for key, value in rows:
        span = key[len(prefix):]
        if apply(conn, span_row_id(trace_id, span), json.loads(value), touched, rebuild=rebuild) is not None:
            conn.execute(delete(sc.MetaRow).where(sc.MetaRow.key == key))
            done += 1
    return done


def apply(conn: Connection, row_id: str, events: list[dict[str, Any]],
          touched: set[str] | None = None, *, rebuild: bool = True) -> str | None:
    """Add `events` to the stored span `row_id` and map it again; its run, or None when it is not stored.
    Agents given new context items are added to `touched` (the caller bumps their context revision).
    `rebuild`: the login may rewrite imported context (`agent_context`), so a call's messages are numbered in
    time order among its agent's calls whatever came first (else they are appended)."""
    row = conn.execute(select(sc.SpanRow.kind, sc.SpanRow.attributes, sc.SpanRow.run_id, sc.SpanRow.started_at)
                       .where(sc.SpanRow.id == row_id)).first()
    if row is None:
        return None
    attrs: dict[str, Any] = json.loads(row.attributes or "{}")
    stored = attrs.get(EVENTS_KEY)
    had: list[dict[str, Any]] = stored if isinstance(stored, list) else []
    new = [e for e in events if e not in had]
    if not new:
        return row.run_id
    merged = sorted([*had, *new], key=lambda e: int(e.get("time_ns") or 0))
    attrs[EVENTS_KEY] = merged
    values: dict[str, Any] = {}
    if row.kind == "model":
        ids = split_span_row_id(row_id)
        assert ids is not None
        span = OtelSpan(ids[0], ids[1], None, "", 0, 1, 2,
                        {k: v for k, v in attrs.items() if k not in EXTRA_KEYS}, merged)
        c = classify(span)
        if c.input_messages or c.output_messages:
            values.update(input_text=c.input_text, output_text=c.output_text,
                          context_revision=1 if c.input_messages else None)
            if AGENT_KEY not in attrs:
                attrs[AGENT_KEY] = conn.execute(select(sc.RunRow.agent_id)
                                                .where(sc.RunRow.id == row.run_id)).scalar() or ""
            if attrs[AGENT_KEY]:
                messages = [(str(m.get("role") or "user"), text, msgs.item_kind(m)) for m, text in zip(
                    c.input_messages + c.output_messages, c.input_rendered + c.output_rendered, strict=True)]
                agent = str(attrs[AGENT_KEY])
                latest = agent_context.latest_turn(conn, agent) if rebuild else None
                if latest is not None and row.started_at / 1e9 <= latest:  # a call before the agent's last turn
                    session = conn.execute(select(sc.RunRow.session_id).where(sc.RunRow.id == row.run_id)).scalar()
                    conn.execute(update(sc.SpanRow).where(sc.SpanRow.id == row_id).values(
                        attributes=PLAIN.encode(attrs), **values))
                    agent_context.rebuild(conn, str(session), [agent])
                    if touched is not None:
                        touched.add(agent)
                    return str(row.run_id)
                _context(conn, agent, row_id, messages, row.started_at / 1e9, touched)  # spans keep ns
    values["attributes"] = PLAIN.encode(attrs)
    conn.execute(update(sc.SpanRow).where(sc.SpanRow.id == row_id).values(**values))
    return str(row.run_id)


def _context(conn: Connection, agent: str, row_id: str, messages: list[tuple[str, str, str]], at: float,
             touched: set[str] | None) -> None:
    """The call's messages as its agent's context items (the Context tab), as the writer adds a span's inline
    messages: the same item ids (a message already there is that item), new ones after the agent's last."""
    if conn.execute(select(sc.AgentRow.id).where(sc.AgentRow.id == agent)).first() is None:
        return
    repeats: dict[tuple[str, str], int] = {}
    wanted = []
    for role, content, kind in messages:
        k = repeats[(role, content)] = repeats.get((role, content), -1) + 1
        wanted.append((item_id(agent, role, content, k), role, content, kind))
    stored = set(conn.execute(select(sc.ContextItemRow.id).where(
        sc.ContextItemRow.id.in_([w[0] for w in wanted]))).scalars())
    new = [w for w in wanted if w[0] not in stored]
    if not new:
        return
    group = "otg_" + digest(row_id)
    position = conn.execute(select(func.coalesce(func.max(sc.ContextItemRow.position), 0))
                            .where(sc.ContextItemRow.agent_id == agent)).scalar_one()
    if conn.execute(select(sc.ContextGroupRow.id).where(sc.ContextGroupRow.id == group)).first() is None:
        ordinal = conn.execute(select(func.coalesce(func.max(sc.ContextGroupRow.ordinal), 0))
                               .where(sc.ContextGroupRow.agent_id == agent)).scalar_one()
        conn.execute(insert(sc.ContextGroupRow).values(id=group, agent_id=agent, ordinal=ordinal + 1, kind="turn",
                                                       revision=1, created_at=at))
    for n, (item, role, content, kind) in enumerate(new, 1):
        tokens = estimate_tokens(content)
        conn.execute(insert(sc.ContextItemRow).values(
            id=item, agent_id=agent, group_id=group, position=position + n, kind=kind, role=role, content=content,
            visible=True, locked=False, revision=1, token_estimate=tokens, compaction_id=None, summary_of=None,
            removed=False, created_at=at))
        conn.execute(insert(sc.ContextItemRevisionRow).values(item_id=item, revision=1, content=content,
                                                              token_estimate=tokens, created_at=at))
    if touched is not None:
        touched.add(agent)
