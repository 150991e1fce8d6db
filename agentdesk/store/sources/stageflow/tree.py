"""The project tree of a stageflow database: project key > definition > session > pinned agent > turn.

Counts and statuses are computed per level in one pass over the sessions (with each session's last
turn), never one query per row. Pending counts leave out approvals past their deadline: those show
as expired even before stageflow's sweep marks them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.queries import roll_up
from agentdesk.store.readmodel import Location, Page
from agentdesk.store.sources.parsing import iso_now, json_object, parse_time, time_of
from agentdesk.store.sources.sql import Row, marks, one, rows
from agentdesk.store.sources.stageflow.approvals import approval
from agentdesk.store.sources.stageflow.common import (
    SESSION_STATUS,
    TURN_STATUS,
    agent_session,
    missing,
    session_row,
    turn_row,
)
from agentdesk.store.sources.stageflow.ids import agent_node_id, task_id

SESSIONS_SQL = """
SELECT s.session_id, s.project_key, s.agent_id, s.revision, s.backend, s.status, s.source, s.title,
       s.created_at, s.updated_at,
       (SELECT t.status FROM agent_turns t WHERE t.session_id = s.session_id ORDER BY t.seq DESC LIMIT 1)
         AS last_turn_status,
       (SELECT COUNT(*) FROM agent_turns t WHERE t.session_id = s.session_id) AS turn_count,
       (SELECT json_extract(r.definition_json, '$.model') FROM agent_revisions r
         WHERE r.project_key = s.project_key AND r.agent_id = s.agent_id AND r.revision = s.revision
           AND json_valid(r.definition_json)) AS model
  FROM agent_sessions s"""

PENDING_SQL = """
SELECT s.project_key, s.agent_id, a.session_id, a.turn_id, COUNT(*) AS n
  FROM agent_approvals a JOIN agent_sessions s ON s.session_id = a.session_id
 WHERE a.status = 'pending' AND a.expires_at > :now
 GROUP BY s.project_key, s.agent_id, a.session_id, a.turn_id"""


def agent_status(session_status: str, last_turn: str | None) -> str:
    """The pinned agent's state: its latest turn while one is active, else its session's, failures kept."""
    if last_turn in ("running", "waiting"):
        return TURN_STATUS[last_turn]
    if session_status in ("running", "waiting"):
        return SESSION_STATUS[session_status]
    if last_turn == "failed":
        return "failed"
    return SESSION_STATUS.get(session_status, session_status)


# -- batched helpers -------------------------------------------------------------------
def _sessions(conn: Connection, where: str, **params: Any) -> list[Row]:
    return rows(conn, f"{SESSIONS_SQL} WHERE {where} ORDER BY s.created_at, s.session_id", **params)


def _pending(conn: Connection, key: Callable[[Row], str | None]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for row in rows(conn, PENDING_SQL, now=iso_now()):
        value = key(row)
        if value is not None:
            counts[value] += row["n"]
    return counts


def _statuses(sessions: Iterable[Row], key: Callable[[Row], str]) -> dict[str, str]:
    grouped: dict[str, list[str]] = {}
    for s in sessions:
        grouped.setdefault(key(s), []).append(agent_status(s["status"], s["last_turn_status"]))
    return {k: roll_up(v) for k, v in grouped.items()}


# -- levels --------------------------------------------------------------------------------
def projects(conn: Connection) -> list[rm.Project]:
    keys = conn.execute(text(
        "SELECT project_key, MIN(created_at) AS created_at FROM ("
        " SELECT project_key, created_at FROM agent_definitions"
        " UNION ALL SELECT project_key, created_at FROM agent_sessions)"
        " GROUP BY project_key ORDER BY MIN(created_at), project_key")).all()
    sessions = _sessions(conn, "1 = 1")
    tasks = Counter(r.project_key for r in conn.execute(text(
        "SELECT project_key, agent_id FROM agent_definitions"
        " UNION SELECT project_key, agent_id FROM agent_sessions")))
    pending = _pending(conn, lambda r: r["project_key"])
    status = _statuses(sessions, lambda s: s["project_key"])
    return [rm.Project(k.project_key, k.project_key, status.get(k.project_key, "idle"),
                       time_of(k.created_at), 0, pending[k.project_key], tasks[k.project_key])
            for k in keys]


def tasks(conn: Connection, project_id: str) -> list[rm.Task]:
    """One task per agent definition (and per agent id a session names without a definition)."""
    found = conn.execute(text(
        "SELECT agent_id, MAX(current_revision) AS rev, MAX(archived) AS archived,"
        " MIN(created_at) AS created_at FROM ("
        "  SELECT agent_id, current_revision, archived, created_at FROM agent_definitions"
        "   WHERE project_key = :pk"
        "  UNION ALL SELECT agent_id, NULL, NULL, created_at FROM agent_sessions"
        "   WHERE project_key = :pk)"
        " GROUP BY agent_id ORDER BY agent_id"), {"pk": project_id}).all()
    sessions = _sessions(conn, "s.project_key = :pk", pk=project_id)
    pending = _pending(conn, lambda r: r["agent_id"] if r["project_key"] == project_id else None)
    status = _statuses(sessions, lambda s: s["agent_id"])
    return [rm.Task(task_id(project_id, r.agent_id), project_id, _task_title(r.agent_id, r.rev, r.archived),
                    status.get(r.agent_id, "idle"), time_of(r.created_at), int(r.rev or 0), pending[r.agent_id])
            for r in found]


def _task_title(agent_id: str, revision: int | None, archived: int | None) -> str:
    title = f"agent {agent_id}"
    if revision is None:
        title += " (no definition on record)"
    elif revision:
        title += f" · definition r{revision}"
    return title + (" (archived)" if archived else "")


def sessions(conn: Connection, task: str) -> list[rm.Session]:
    project_key, _, agent_id = task.partition("/")
    found = _sessions(conn, "s.project_key = :pk AND s.agent_id = :aid", pk=project_key, aid=agent_id)
    pending = _pending(conn, lambda r: r["session_id"])
    return [_session(r, pending[r["session_id"]]) for r in found]


def _session(r: Row, pending: int) -> rm.Session:
    closed = r["status"] == "closed"
    title = r["title"] or f"({r['source']} session)"
    return rm.Session(r["session_id"], r["project_key"], task_id(r["project_key"], r["agent_id"]), title,
                      SESSION_STATUS.get(r["status"]) or r["status"], time_of(r["created_at"]),
                      parse_time(r["updated_at"]) if closed else None, 0, pending)


def agents(conn: Connection, session_id: str) -> list[rm.Agent]:
    """The one pass-through agent of a session: stageflow has no agent rows and no sub-agent tree."""
    found = _sessions(conn, "s.session_id = :sid", sid=session_id)
    pending = _pending(conn, lambda r: r["session_id"])
    return [_agent(r, pending[r["session_id"]]) for r in found]


def agent(conn: Connection, agent_id: str) -> rm.Agent:
    found = agents(conn, agent_session(conn, agent_id)["session_id"])
    return found[0] if found else missing("agent", agent_id)


def _agent(r: Row, pending: int) -> rm.Agent:
    return rm.Agent(agent_node_id(r["session_id"], r["agent_id"]), r["project_key"],
                    task_id(r["project_key"], r["agent_id"]), r["session_id"], None,
                    f"{r['agent_id']} r{r['revision']}", str(r["model"] or r["backend"] or ""),
                    agent_status(r["status"], r["last_turn_status"]), 0, 0, time_of(r["created_at"]),
                    int(r["revision"] or 0), pending, int(r["turn_count"] or 0))


def runs(conn: Connection, agent_id: str, offset: int = 0, limit: int = 200) -> Page[rm.Run]:
    """Turns of the agent's session, newest first."""
    ses = agent_session(conn, agent_id)
    total = conn.execute(text("SELECT COUNT(*) FROM agent_turns WHERE session_id = :sid"),
                         {"sid": ses["session_id"]}).scalar_one()
    found = rows(conn, "SELECT * FROM agent_turns WHERE session_id = :sid ORDER BY started_at DESC, seq DESC"
                       " LIMIT :limit OFFSET :offset", sid=ses["session_id"], limit=limit, offset=offset)
    return Page(tuple(_runs(conn, found, ses)), offset, int(total))


def run(conn: Connection, run_id: str) -> rm.Run:
    turn = turn_row(conn, run_id)
    return _runs(conn, [turn], turn)[0]


def _runs(conn: Connection, turns: list[Row], ses: Row) -> list[rm.Run]:
    scores = _scores(conn, [r["turn_id"] for r in turns])
    pending = _pending(conn, lambda r: r["turn_id"])
    return [_run(r, ses, scores.get(r["turn_id"], {}), pending[r["turn_id"]]) for r in turns]


def _scores(conn: Connection, turn_ids: list[str]) -> dict[str, dict[str, float]]:
    scores: dict[str, dict[str, float]] = {}
    for i in range(0, len(turn_ids), 500):
        placeholders, bound = marks("t", turn_ids[i:i + 500])
        for row in rows(conn, f"SELECT turn_id, metric, score FROM agent_eval_scores WHERE turn_id"
                              f" IN ({placeholders}) ORDER BY metric", **bound):
            scores.setdefault(row["turn_id"], {})[row["metric"]] = float(row["score"])
    return scores


def _run(r: Row, ses: Row, scores: dict[str, float], pending: int) -> rm.Run:
    """A turn as a run; its eval scores go into the title (rm.Run has no attributes)."""
    title = f"Turn {r['seq']}" + "".join(f" · {metric} {score:.2f}" for metric, score in scores.items())
    usage = rm.Usage(int(r["input_tokens"] or 0), int(r["output_tokens"] or 0), float(r["cost_usd"] or 0.0))
    return rm.Run(r["turn_id"], ses["project_key"], task_id(ses["project_key"], ses["agent_id"]),
                  r["session_id"], agent_node_id(r["session_id"], ses["agent_id"]), title,
                  TURN_STATUS.get(r["status"]) or r["status"], time_of(r["started_at"]),
                  parse_time(r["ended_at"]), r["error_code"], usage, 0, pending)


def run_attributes(conn: Connection, run_id: str) -> dict[str, Any]:
    """What a turn has beyond rm.Run: trace id, definition revision, scores, delivery, native status."""
    turn = turn_row(conn, run_id)
    scores = _scores(conn, [run_id]).get(run_id, {})
    delivery = one(conn, "SELECT state, attempts, error_code FROM agent_deliveries WHERE turn_id = :tid",
                   tid=run_id)
    return {"trace_id": turn["trace_id"], "seq": turn["seq"], "definition_revision": turn["revision"],
            "native_status": turn["status"], "error_code": turn["error_code"],
            "cost_usd": turn["cost_usd"], "eval_scores": scores, "delivery": delivery}


def locate(conn: Connection, entity: str, entity_id: str) -> Location:
    span_id = None
    if entity == "span":
        found = one(conn, "SELECT turn_id FROM agent_spans WHERE span_id = :sid", sid=entity_id)
        if found is None:
            missing(entity, entity_id)
        span_id, entity, entity_id = entity_id, "run", found["turn_id"]
    if entity == "approval":
        gate = approval(conn, entity_id)
        if not gate.run_id:
            return Location(gate.project_id, gate.task_id, gate.session_id, (gate.agent_id,))
        span_id, entity, entity_id = gate.span_id, "run", gate.run_id
    if entity == "project":
        if not any(p.id == entity_id for p in projects(conn)):
            missing(entity, entity_id)
        return Location(entity_id)
    if entity == "task":
        project_key = entity_id.partition("/")[0]
        if not any(t.id == entity_id for t in tasks(conn, project_key)):
            missing(entity, entity_id)
        return Location(project_key, entity_id)
    if entity in ("session", "agent"):
        ses = session_row(conn, entity_id) if entity == "session" else agent_session(conn, entity_id)
        chain = () if entity == "session" else (agent_node_id(ses["session_id"], ses["agent_id"]),)
        return Location(ses["project_key"], task_id(ses["project_key"], ses["agent_id"]), ses["session_id"], chain)
    if entity == "run":
        turn = turn_row(conn, entity_id)
        if turn["project_key"] is None:
            missing("session", turn["session_id"])
        return Location(turn["project_key"], task_id(turn["project_key"], turn["agent_id"]),
                        turn["session_id"], (agent_node_id(turn["session_id"], turn["agent_id"]),),
                        entity_id, span_id)
    missing(entity, entity_id)


# -- whole-store figures -------------------------------------------------------------------
COUNTS = {
    "projects": "SELECT COUNT(*) AS n FROM (SELECT project_key FROM agent_definitions"
                " UNION SELECT project_key FROM agent_sessions)",
    "agent definitions": "SELECT COUNT(*) AS n FROM agent_definitions",
    "sessions": "SELECT COUNT(*) AS n FROM agent_sessions",
    "turns": "SELECT COUNT(*) AS n FROM agent_turns",
    "spans": "SELECT COUNT(*) AS n FROM agent_spans",
    "messages": "SELECT COUNT(*) AS n FROM agent_messages",
    "approvals": "SELECT COUNT(*) AS n FROM agent_approvals",
    "pending approvals": "SELECT COUNT(*) AS n FROM agent_approvals WHERE status = 'pending' AND expires_at > :now",
    "overdue approvals not yet swept": "SELECT COUNT(*) AS n FROM agent_approvals"
                                       " WHERE status = 'pending' AND expires_at <= :now",
}


def counts(conn: Connection) -> dict[str, int]:
    now = iso_now()
    return {name: int(rows(conn, sql, **({"now": now} if ":now" in sql else {}))[0]["n"])
            for name, sql in COUNTS.items()}


def showcase_run(conn: Connection) -> str | None:
    """The turn with the most spans among the newest 200: what a screenshot should open."""
    found = one(conn, "SELECT sp.turn_id, COUNT(*) AS n FROM agent_spans sp WHERE sp.turn_id IN"
                      " (SELECT turn_id FROM agent_turns ORDER BY started_at DESC LIMIT 200)"
                      " GROUP BY sp.turn_id ORDER BY n DESC, sp.turn_id LIMIT 1")
    return None if found is None else str(found["turn_id"])


def definition(conn: Connection, task: str) -> dict[str, Any]:
    """The current definition behind a task (YAML and parsed JSON), for a details pane."""
    project_key, _, agent_id = task.partition("/")
    row = one(conn, "SELECT r.* FROM agent_definitions d JOIN agent_revisions r ON r.project_key ="
                    " d.project_key AND r.agent_id = d.agent_id AND r.revision = d.current_revision"
                    " WHERE d.project_key = :pk AND d.agent_id = :aid", pk=project_key, aid=agent_id)
    if row is None:
        return {}
    return {"revision": row["revision"], "yaml": row["yaml_text"],
            "definition": json_object(row["definition_json"]), "author": row["author"],
            "summary": row["summary"], "created_at": parse_time(row["created_at"])}
