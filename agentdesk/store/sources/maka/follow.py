"""Which maka tables the follower watches, and what each changed row means to the views.

maka's ledgers are append-only, so most tables are followed by rowid: `runtime_events`,
`usage_model_call_attempts`, `core_agent_run_events`, and the interaction request and
outcome tables. Their row counts ride along: a count below what was seen means rows were
deleted (a session purge) and the views reload (one reset). Rows maka updates in place:
run headers (status and `updatedAt`, re-read by rowid while the run is unfinished), and
three small sets compared whole: projects, session rows (`committed_at`) and streaming
partial snapshots (`updated_at` and their segment count). The tree topology every mapping
needs for parents is read once per poll (cached on its signature).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Connection

from agentdesk.store.persistence.bus import Change, ChangeOp, EntityKind
from agentdesk.store.sources.follow import AppendOnly, Deletes, Follow, RowChanges, RowEvent, UpdatedInPlace
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.topology import Topology
from agentdesk.store.sources.sql import Row

TERMINAL = ", ".join(f"'{s}'" for s in sorted(codec.TERMINAL_RUN))
RUN_STATUS = "json_extract(x.record_json, '$.status')"


def _project(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.PROJECT, event.op, row["key"])]


def _session(row: Row, event: RowEvent) -> Iterable[Change]:
    topo: Topology = event.lookups
    s = topo.sessions.get(row["key"])
    if s is None:
        return []
    out = []
    if s.top == s.id:
        out.append(Change(EntityKind.SESSION, event.op, s.id, {"project": s.project_id,
                                                               "task": codec.task_of(s.project_id)}))
    agent = topo.agents.get(codec.root_agent(s.id))
    if agent is not None:
        out.append(Change(EntityKind.AGENT, event.op, agent.id, topo.agent_parents(agent)))
    return out


def _run(row: Row, event: RowEvent) -> Iterable[Change]:
    """A run header: new by rowid (bringing a new in-session sub-agent), changed by status and updatedAt."""
    topo: Topology = event.lookups
    sid, rid = row["session_id"], row["run_id"]
    parents, key = topo.run_parents(sid, rid), codec.run_key(sid, rid)
    out = []
    if event.op == ChangeOp.INSERT and _first_run_of_header_agent(topo, sid, key):
        agent = topo.agents[topo.runs[key].agent_id]
        out.append(Change(EntityKind.AGENT, ChangeOp.INSERT, agent.id, topo.agent_parents(agent)))
    out.append(Change(EntityKind.RUN, event.op, key, parents))
    out.append(Change(EntityKind.SPAN, ChangeOp.UPDATE, codec.span_id("turn", sid, rid), {**parents, "run": key}))
    return out


def _first_run_of_header_agent(topo: Topology, sid: str, key: str) -> bool:
    """A run that brings a new in-session sub-agent (run header `parentRunId`) into the tree."""
    node = topo.runs.get(key)
    if node is None or node.agent_id == codec.root_agent(sid) or node.agent_id not in topo.agents:
        return False
    return topo.runs_by_agent.get(node.agent_id, [])[:1] == [key]


def _stream(row: Row, event: RowEvent) -> Iterable[Change]:
    topo: Topology = event.lookups
    sid, rid = row["session_id"], row["run_id"]
    at_run = {**topo.run_parents(sid, rid), "run": codec.run_key(sid, rid)}
    return [Change(EntityKind.SPAN, event.op, codec.span_id("stream", sid, rid, row["key"]), at_run)]


def _appended(table: str) -> RowChanges:
    """What one new ledger row means: its run changed, and the span (or approval, item) it belongs to."""
    def changes(row: Row, event: RowEvent) -> Iterable[Change]:
        return _ledger_changes(event.lookups, table, row)
    return changes


def _ledger_changes(topo: Topology, table: str, row: Row) -> list[Change]:
    sid, rid = row["session_id"], row["run_id"]
    if sid is None or rid is None:
        return []
    parents = topo.run_parents(sid, rid)
    run = codec.run_key(sid, rid)
    at_run = {**parents, "run": run}
    out = [Change(EntityKind.RUN, ChangeOp.UPDATE, run, parents)]
    if table == "runtime_events":
        kind = row["event_kind"]
        out.append(Change(EntityKind.SPAN, ChangeOp.UPDATE, codec.span_id("turn", sid, rid), at_run))
        if kind in ("function_call", "function_response", "tool_dispatch") and row["call"]:
            op = ChangeOp.INSERT if kind == "function_call" else ChangeOp.UPDATE
            out.append(Change(EntityKind.SPAN, op, codec.span_id("tool", sid, rid, row["call"]), at_run))
        elif kind == "error":
            out.append(Change(EntityKind.SPAN, ChangeOp.INSERT, codec.span_id("error", sid, rid, row["event_id"]),
                              at_run))
        elif row["req"]:
            out.append(Change(EntityKind.SPAN, ChangeOp.UPDATE, codec.span_id("perm", sid, rid, row["req"]), at_run))
        if kind in codec.CONTENT_KINDS and parents:
            agent = {"agent": parents["agent"], "session": parents["session"]}
            out.append(Change(EntityKind.CONTEXT_ITEM, ChangeOp.INSERT, row["event_id"], {**agent, "group": run}))
            out.append(Change(EntityKind.CONTEXT, ChangeOp.UPDATE, parents["agent"], agent))
    elif table == "usage_model_call_attempts":
        out.append(Change(EntityKind.SPAN, ChangeOp.INSERT, codec.span_id("model", sid, rid, row["attempt_id"]),
                          at_run))
    elif table == "core_agent_run_events" and row["event_type"] in codec.COMPACTION_EVENTS:
        out.append(Change(EntityKind.SPAN, ChangeOp.INSERT, codec.span_id("compact", sid, rid, row["sequence"]),
                          at_run))
        if parents:
            out.append(Change(EntityKind.CONTEXT, ChangeOp.UPDATE, parents["agent"],
                              {"agent": parents["agent"], "session": parents["session"]}))
    elif table in ("core_interaction_requests", "core_interaction_outcomes"):
        op = ChangeOp.INSERT if table == "core_interaction_requests" else ChangeOp.UPDATE
        out.append(Change(EntityKind.APPROVAL, op, row["request_id"], at_run))
        out.append(Change(EntityKind.SPAN, op, codec.span_id("perm", sid, rid, row["request_id"]), at_run))
    return out


LEDGERS = {
    "runtime_events":
        "x.event_id, x.session_id, x.run_id, x.event_kind, "
        "coalesce(json_extract(x.payload_json, '$.refs.toolCallId'), "
        "json_extract(x.payload_json, '$.content.id')) AS call, "
        "coalesce(json_extract(x.payload_json, '$.actions.permissionRequest.requestId'), "
        "json_extract(x.payload_json, '$.actions.permissionDecision.requestId')) AS req",
    "usage_model_call_attempts":
        "x.attempt_id, json_extract(x.record_json, '$.sessionId') AS session_id, "
        "json_extract(x.record_json, '$.runId') AS run_id",
    "core_agent_run_events": "x.session_id, x.run_id, x.sequence, x.event_type",
    "core_interaction_requests": "x.request_id, x.session_id, x.run_id",
    "core_interaction_outcomes": "x.request_id, q.session_id, q.run_id",
}
LEDGER_JOINS = {"core_interaction_outcomes": "JOIN core_interaction_requests q ON q.request_id = x.request_id"}


def follow(topology: Callable[[Connection], Topology]) -> Follow:
    """maka's declarations; `topology` is the source's cached tree structure, read once per poll."""
    ledgers: list[Any] = [AppendOnly(table, columns, _appended(table), joins=LEDGER_JOINS.get(table, ""),
                                     deletes=Deletes.RESET) for table, columns in LEDGERS.items()]
    return Follow("maka", (
        UpdatedInPlace("projects", "x.name, x.last_used_at, x.archived_at", _project, key="x.project_id",
                       rowid=None, signature=("name", "last_used_at", "archived_at"), deletes=Deletes.RESET),
        UpdatedInPlace("session_metadata", "x.committed_at, x.status, x.name", _session, key="x.session_id",
                       rowid=None, signature=("committed_at", "status", "name"), deletes=Deletes.RESET),
        UpdatedInPlace("core_agent_runs", f"x.session_id, x.run_id, {RUN_STATUS} AS status, "
                                          "json_extract(x.record_json, '$.updatedAt') AS updated", _run,
                       key="x.rowid", keep=f"coalesce({RUN_STATUS}, '') NOT IN ({TERMINAL})",
                       signature=("status", "updated")),
        *ledgers,
        UpdatedInPlace("runtime_partial_snapshots", "x.session_id, x.run_id, x.updated_at, "
                       "(SELECT count(*) FROM runtime_partial_segments s WHERE s.stream_key = x.stream_key) AS segs",
                       _stream, key="x.stream_key", rowid=None, signature=("updated_at", "segs"),
                       deletes=Deletes.DELETE),
    ), lookups=topology)
