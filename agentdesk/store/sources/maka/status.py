"""What every maka read shares: the status roll-ups, pending counts and lookups by id.

Statuses are read fresh on every query (run headers change in place); only the
structure is cached (`topology.TopologyCache`).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, text

from agentdesk.store.errors import NotFound
from agentdesk.store.queries import roll_up
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.topology import AgentNode, RunNode, Topology

PENDING_SQL = text(
    "SELECT q.session_id, q.run_id, count(*) AS n FROM core_interaction_requests q "
    "WHERE NOT EXISTS (SELECT 1 FROM core_interaction_outcomes o WHERE o.request_id = q.request_id) "
    "GROUP BY q.session_id, q.run_id")
RUN_STATUS_SQL = text(
    "SELECT session_id, run_id, json_extract(record_json, '$.status') AS status FROM core_agent_runs")


def pending_by_run(conn: Connection) -> dict[str, int]:
    return {codec.run_key(s, r): n for s, r, n in conn.execute(PENDING_SQL)}


def run_statuses(conn: Connection) -> dict[str, str]:
    """Native header status of every run."""
    return {codec.run_key(s, r): st or "" for s, r, st in conn.execute(RUN_STATUS_SQL)}


def agent_status(topo: Topology, agent_id: str, statuses: dict[str, str], pending: dict[str, int]) -> str:
    """Waiting while a request is open; else the roll-up of unfinished runs, else the latest run's."""
    keys = topo.runs_by_agent.get(agent_id, [])
    if any(pending.get(k) for k in keys):
        return "waiting"
    if not keys:
        return "idle"
    open_runs = [codec.RUN_STATUS.get(statuses.get(k, ""), "pending") for k in keys
                 if statuses.get(k) not in codec.TERMINAL_RUN]
    if open_runs:
        return roll_up(open_runs)
    latest = max(keys, key=lambda k: (topo.runs[k].created_ms or 0, k))
    return codec.RUN_STATUS.get(statuses.get(latest, ""), "pending")


def agent_statuses(conn: Connection, topo: Topology,
                   agents: Iterable[AgentNode]) -> tuple[dict[str, str], dict[str, int]]:
    """Status and pending count of each agent, from one status scan and one pending scan."""
    statuses, pending = run_statuses(conn), pending_by_run(conn)
    status: dict[str, str] = {}
    counts: dict[str, int] = {}
    for agent in agents:
        status[agent.id] = agent_status(topo, agent.id, statuses, pending)
        counts[agent.id] = sum(pending.get(k, 0) for k in topo.runs_by_agent.get(agent.id, []))
    return status, counts


def session_budget(conn: Connection, session_id: str) -> int:
    """The last `tokenUsage.contextBudget` the session reported (0 when it never did).

    Tool calls and results are skipped: they never carry token usage, and a
    multi-megabyte result should not be parsed just to find that out.
    """
    value = conn.execute(text(
        "SELECT json_extract(payload_json, '$.actions.tokenUsage.contextBudget') FROM runtime_events "
        "WHERE session_id = :sid AND event_kind NOT IN ('function_call', 'function_response') "
        "AND json_extract(payload_json, '$.actions.tokenUsage.contextBudget') IS NOT NULL "
        "ORDER BY committed_at DESC LIMIT 1"), {"sid": session_id}).scalar()
    return int(value) if isinstance(value, int | float) else 0


def require_agent(topo: Topology, agent_id: str) -> AgentNode:
    agent = topo.agents.get(agent_id)
    if agent is None:
        raise NotFound(f"There is no agent with id {agent_id}.")
    return agent


def require_run(topo: Topology, run_id: str) -> RunNode:
    node = topo.runs.get(run_id)
    if node is None:
        raise NotFound(f"There is no run with id {run_id}.")
    return node
