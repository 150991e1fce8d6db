"""Row → read-model conversions shared by the native source's queries."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agentdesk.store import readmodel as rm
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.payloads import unpack
from agentdesk.store.text.jsonsafe import DISPLAY_CHARS, loads_bounded, truncated
from agentdesk.store.text.times import moment, moment_ns


def ts(value: float) -> datetime:
    """A stored Unix time; one no datetime can hold (±1e300, 9.2e18, a word) is `UNREADABLE_TIME`, shown as
    "unreadable time", as the foreign readers do."""
    return moment(value)


def ts_opt(value: float | None) -> datetime | None:
    return None if value is None else ts(value)


def json_dict(stored: str | bytes | None) -> dict[str, Any]:
    """A stored JSON object column as a dict; a raw driver value compressed on SQLite (payloads.py) is read too."""
    text = unpack(stored)
    if not text:
        return {}
    try:
        value = loads_bounded(text)
    except ValueError:
        return {"_raw": text if len(text) <= DISPLAY_CHARS else truncated(text)}
    return value if isinstance(value, dict) else {"_value": value}


def project(row: sc.ProjectRow, status: str, pending: int, tasks: int) -> rm.Project:
    return rm.Project(row.id, row.name, status, ts(row.created_at), row.revision, pending, tasks)


def task(row: sc.TaskRow, status: str, pending: int) -> rm.Task:
    return rm.Task(row.id, row.project_id, row.title, status, ts(row.created_at), row.revision, pending)


def session(row: sc.SessionRow, pending: int) -> rm.Session:
    return rm.Session(row.id, row.project_id, row.task_id, row.title, row.status, ts(row.created_at),
                      ts_opt(row.ended_at), row.revision, pending)


def agent(row: sc.AgentRow, pending: int, runs: int) -> rm.Agent:
    return rm.Agent(row.id, row.project_id, row.task_id, row.session_id, row.parent_agent_id, row.name,
                    row.model, row.status, row.context_revision, row.context_budget, ts(row.created_at),
                    row.revision, pending, runs)


def run(row: sc.RunRow, pending: int, control: str = "running", control_note: str = "") -> rm.Run:
    return rm.Run(row.id, row.project_id, row.task_id, row.session_id, row.agent_id, row.title, row.status,
                  ts(row.started_at), ts_opt(row.ended_at), row.error,
                  rm.Usage(row.input_tokens, row.output_tokens, row.cost_usd), row.revision, pending,
                  control, control_note)


def span(row: sc.SpanRow) -> rm.Span:
    return rm.Span(row.id, row.run_id, row.parent_span_id, row.kind, row.name, row.status,
                   moment_ns(row.started_at), None if row.ended_at is None else moment_ns(row.ended_at),
                   rm.Usage(row.input_tokens, row.output_tokens, row.cost_usd), json_dict(row.attributes),
                   row.input_text, row.output_text, row.error, row.context_revision)


def approval(row: sc.ApprovalRow, agent_name: str = "", project_name: str = "") -> rm.Approval:
    return rm.Approval(row.id, row.tool_call_id, row.project_id, row.task_id, row.session_id, row.agent_id,
                       row.run_id, row.span_id, row.tool_name, row.arguments, row.payload_hash,
                       rm.ApprovalStatus(row.status),
                       ts(row.created_at), ts_opt(row.expires_at), ts_opt(row.decided_at), row.decided_by,
                       row.reason, row.edited_arguments, row.edited_hash, agent_name, project_name,
                       row.context_revision, row.decided_by_rule, ts_opt(row.requester_heartbeat_at),
                       row.decided_login, row.requested_login)


def group(row: sc.ContextGroupRow) -> rm.ContextGroup:
    return rm.ContextGroup(row.id, row.agent_id, row.ordinal, row.kind, row.revision, ts(row.created_at))


def item(row: sc.ContextItemRow) -> rm.ContextItem:
    return rm.ContextItem(row.id, row.agent_id, row.group_id, row.position, row.kind, row.role, row.content,
                          bool(row.visible), bool(row.locked), row.revision, row.token_estimate,
                          row.compaction_id, row.summary_of, ts(row.created_at))


def compaction(row: sc.CompactionRow) -> rm.Compaction:
    return rm.Compaction(row.id, row.agent_id, row.summary_item_id, tuple(json.loads(row.covered_item_ids)),
                         row.focus, row.source_revision, ts(row.created_at), row.created_by,
                         ts_opt(row.undone_at))


def audit(row: sc.AuditRow) -> rm.AuditRecord:
    return rm.AuditRecord(row.seq, ts(row.at), row.actor, row.action, row.entity, row.entity_id, row.payload,
                          row.prev_hash, row.hash)
