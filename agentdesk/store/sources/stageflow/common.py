"""The stageflow vocabularies (statuses, SQL fragments) and the row lookups every stageflow read needs.

stageflow (0.40.0, `dist/agents/store.js`) keeps project > agent definition > session >
turn > span. agentdesk's tree has fixed levels, so the mapping is:

- project  = a distinct `project_key` (a hash of the project root: the path cannot be recovered);
- task     = an agent *definition* (`agent_definitions`, id `project_key/agent_id`);
- session  = `agent_sessions` (id `session_id`);
- agent    = a pass-through node: the definition as this session pinned it
             (id `session_id/agent_id`), because stageflow has no per-session agent row;
- run      = a turn (`agent_turns`, id `turn_id`); spans are `agent_spans` as they are.
"""

from __future__ import annotations

from typing import NoReturn

from sqlalchemy import Connection

from agentdesk.store.errors import NotFound
from agentdesk.store.sources.parsing import json_value
from agentdesk.store.sources.sql import Row, one

NO_CONTEXT = ("stageflow keeps no editable context: the session transcript (agent_messages) is shown "
              "read-only.")

TURN_STATUS = {"running": "running", "waiting": "waiting", "succeeded": "done", "failed": "failed",
               "cancelled": "cancelled"}
"""agent_turns.status → tree status (reference §4.2); anything else is shown as stored."""

SESSION_STATUS = {"open": "idle", "running": "running", "waiting": "waiting", "held": "idle",
                  "closed": "done"}
"""agent_sessions.status → tree status; `held` is legacy ("nothing writes it any more")."""

SPAN_KINDS = frozenset({"agent", "model", "tool", "sub_agent", "guardrail", "gate", "internal"})
SPAN_STATUSES = frozenset({"ok", "error", "cancelled"})

DECISION_STATUS = {"approve": "approved", "deny": "denied"}
"""The spellings agentdesk writes (reference §1.2: inferred; `rejected` is read as denied too)."""

CANONICAL_APPROVAL_SQL = """CASE WHEN a.status = 'pending' AND a.expires_at <= :now THEN 'expired'
                               WHEN a.status IN ('denied', 'rejected') THEN 'denied'
                               ELSE a.status END"""
"""The status an operator sees: a pending approval past `expires_at` is expired even before the runtime's
sweep marks it. The comparison is on the ISO TEXT, exactly as stageflow's own `expireApprovals` does."""


def actor_name(actor_json: str | None) -> str | None:
    """Who decided, from `actor_json` (`null` means the runtime's own expiry; non-JSON is shown as stored)."""
    actor = json_value(actor_json)
    if isinstance(actor, str):
        return actor
    if not isinstance(actor, dict):
        return None
    for key in ("name", "id", "kind"):
        if isinstance(actor.get(key), str) and actor[key]:
            return str(actor[key])
    return None


def missing(entity: str, entity_id: str) -> NoReturn:
    raise NotFound(f"There is no {entity} with id {entity_id} in this stageflow database.")


SESSION_ROW = "SELECT session_id, project_key, agent_id, revision FROM agent_sessions"


def session_row(conn: Connection, session_id: str) -> Row:
    found = one(conn, f"{SESSION_ROW} WHERE session_id = :sid", sid=session_id)
    return found if found is not None else missing("session", session_id)


def agent_session(conn: Connection, agent_node: str) -> Row:
    """The session behind a pass-through agent id `session_id/agent_id` (either part may hold a '/')."""
    session_id, _, agent_id = agent_node.rpartition("/")
    found = one(conn, f"{SESSION_ROW} WHERE session_id = :sid AND agent_id = :aid", sid=session_id, aid=agent_id)
    if found is None:
        found = one(conn, f"{SESSION_ROW} WHERE session_id || '/' || agent_id = :node", node=agent_node)
    return found if found is not None else missing("agent", agent_node)


def turn_row(conn: Connection, turn_id: str) -> Row:
    found = one(conn, "SELECT t.*, s.project_key, s.agent_id FROM agent_turns t "
                      "LEFT JOIN agent_sessions s ON s.session_id = t.session_id WHERE t.turn_id = :tid", tid=turn_id)
    return found if found is not None else missing("run", turn_id)
