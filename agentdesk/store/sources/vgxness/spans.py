"""vgxness's timeline: `run_events` and `run_checkpoints`, each a point in time.

vgxness stores no durations, so none is invented: every span here starts and ends at the same
instant (`ended_at == started_at`) and carries `attributes["point_event"] = True`, which is how the
timeline knows to draw a marker instead of a bar. Checkpoints are milestones: kind `gate` with
`attributes["milestone"] = True`. Observations and artifacts that an event names (`related_type`
`observation` / `artifact`) are read into that event's attributes and output text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.sources.parsing import json_value, time_of
from agentdesk.store.sources.sql import Row, marks, one, rows
from agentdesk.store.sources.vgxness.common import home, missing

EVENT_KIND = {"tool-call": "tool", "operation-execution": "tool", "permission-decision": "gate",
              "approval": "gate", "verification": "guardrail", "timeline": "internal", "evidence": "internal",
              "memory-operation": "internal", "artifact-reference": "internal"}
"""run_events.kind → span kind; the native kind stays in `attributes["native_kind"]`."""

TIMELINE_SQL = """
SELECT id, sequence, kind, title, created_at, payload_json, 0 AS milestone
  FROM run_events WHERE run_id = :rid{only}
UNION ALL
SELECT id, sequence, 'checkpoint', label, created_at, state_json, 1
  FROM run_checkpoints WHERE run_id = :rid{only}"""


def event_status(payload: Any) -> tuple[str, str | None]:
    """An event whose payload says `"ok": false` or carries an `error` is shown as an error."""
    if isinstance(payload, dict):
        if payload.get("error"):
            return "error", str(payload["error"])
        if payload.get("ok") is False:
            return "error", None
    return "ok", None


def span_table(conn: Connection, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
    """The run's events and checkpoints as points in time; with `span_ids` only those."""
    if span_ids is None:
        found = rows(conn, TIMELINE_SQL.format(only=""), rid=run_id)
    else:  # by primary key, in chunks of bound parameters
        found, wanted = [], list(dict.fromkeys(span_ids))
        for n in range(0, len(wanted), 400):
            placeholders, bound = marks("s", wanted[n:n + 400])
            found += rows(conn, TIMELINE_SQL.format(only=f" AND id IN ({placeholders})"), rid=run_id, **bound)
    found.sort(key=lambda r: (time_of(r["created_at"]), r["milestone"] == 0, r["sequence"], r["id"]))
    starts = [time_of(r["created_at"]).timestamp() for r in found]
    return SpanTable(
        ids=[r["id"] for r in found], parent_ids=[None] * len(found),
        kinds=["gate" if r["milestone"] else EVENT_KIND.get(r["kind"], "internal") for r in found],
        names=[f"checkpoint: {r['title']}" if r["milestone"] else r["title"] for r in found],
        statuses=["ok" if r["milestone"] else event_status(json_value(r["payload_json"]))[0] for r in found],
        starts=starts, ends=list(starts), input_tokens=[0] * len(found), output_tokens=[0] * len(found),
        costs=[0.0] * len(found))


def span(conn: Connection, span_id: str) -> rm.Span:
    event = one(conn, "SELECT * FROM run_events WHERE id = :s", s=span_id)
    if event is not None:
        return _event_span(conn, event)
    c = one(conn, "SELECT c.*, (r.latest_checkpoint_id = c.id) AS latest FROM run_checkpoints c"
                  " JOIN runs r ON r.id = c.run_id WHERE c.id = :s", s=span_id)
    if c is None:
        missing("span", span_id)
    at = time_of(c["created_at"])
    attributes = {"point_event": True, "milestone": True, "native_kind": "checkpoint",
                  "sequence": c["sequence"], "label": c["label"], "latest": bool(c["latest"]),
                  "state": json_value(c["state_json"])}
    return rm.Span(c["id"], c["run_id"], None, "gate", f"checkpoint: {c['label']}", "ok", at, at,
                   rm.Usage(), attributes, c["state_json"], None, None)


def _event_span(conn: Connection, e: Row) -> rm.Span:
    payload = json_value(e["payload_json"])
    status, error = event_status(payload)
    attributes: dict[str, Any] = {
        "point_event": True, "native_kind": e["kind"], "sequence": e["sequence"],
        "related_type": e["related_type"], "related_id": e["related_id"], "payload": payload}
    output = None
    if e["related_type"] == "run_approval":
        attributes["approval_id"] = e["related_id"]
    elif e["related_type"] == "observation" and e["related_id"]:
        found = observation(conn, e["related_id"])
        if found:
            attributes["observation"] = {k: v for k, v in found.items() if k != "content"}
            output = found["content"]
    elif e["related_type"] == "artifact" and e["related_id"]:
        artifact = one(conn, "SELECT id, topic_key, phase, observation_id, content, updated_at FROM artifacts"
                             " WHERE id = :a", a=e["related_id"])
        if artifact:
            attributes["artifact"] = {k: v for k, v in artifact.items() if k != "content"}
            output = artifact["content"]
    at = time_of(e["created_at"])
    return rm.Span(e["id"], e["run_id"], None, EVENT_KIND.get(e["kind"], "internal"), e["title"], status,
                   at, at, rm.Usage(), attributes, e["payload_json"], output,
                   error or (e["title"] if status == "error" else None))


def context(conn: Connection, agent_id: str) -> rm.AgentContext:
    """vgxness has no agent context: an empty window, with every edit unsupported (see why_not)."""
    home(conn, agent_id)
    return rm.AgentContext(agent_id, 0, 0, (), ())


# -- the memory store, read-only -------------------------------------------------------------
def observation(conn: Connection, observation_id: str) -> Row | None:
    return one(conn, "SELECT o.*, (SELECT COUNT(*) FROM observation_revisions v"
                     " WHERE v.observation_id = o.id) AS revisions FROM observations o WHERE o.id = :o",
               o=observation_id)


def observations(conn: Connection, project_id: str, query: str | None = None, limit: int = 100) -> list[Row]:
    """A project's memory, newest first; `query` searches it as vgxness does (FTS5, terms quoted)."""
    if query and query.split():
        match = " ".join('"' + term.replace('"', '""') + '"' for term in query.split())
        return rows(conn, "SELECT o.* FROM observations o JOIN observations_fts fts ON fts.rowid = o.rowid"
                          " WHERE observations_fts MATCH :match AND o.project = :p"
                          " ORDER BY o.updated_at DESC LIMIT :n", match=match, p=project_id, n=limit)
    return rows(conn, "SELECT * FROM observations WHERE project = :p ORDER BY updated_at DESC LIMIT :n",
                p=project_id, n=limit)


def memory_sessions(conn: Connection, project_id: str) -> list[Row]:
    """vgxness's own `sessions` log (no run references it), with its activity count, newest first."""
    return rows(conn, "SELECT s.*, (SELECT COUNT(*) FROM session_activity a WHERE a.session_id = s.id) AS activity"
                      " FROM sessions s WHERE s.project = :p ORDER BY s.started_at DESC", p=project_id)
