"""What every part of the stageflow source shares: identity, vocabularies, ids and times.

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

from datetime import UTC, datetime
from typing import Any, NoReturn

from agentdesk.store import readmodel as rm
from agentdesk.store.convert import json_dict
from agentdesk.store.errors import NotFound
from agentdesk.store.source import Capability
from agentdesk.store.sources.foreign import ForeignSource

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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


def parse_time(value: object) -> datetime | None:
    """ISO-8601 TEXT (stageflow writes `toISOString()`), or Unix milliseconds, as aware UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000, UTC)
    text = str(value).strip()
    if text.isdigit():
        return datetime.fromtimestamp(int(text) / 1000, UTC)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def time_of(value: object) -> datetime:
    """For NOT NULL columns: an unreadable value shows as the epoch rather than breaking the view."""
    return parse_time(value) or EPOCH


def epoch_of(value: object) -> float:
    return time_of(value).timestamp()


def iso_now() -> str:
    """The runtime's own format (`new Date().toISOString()`), so lexicographic comparisons keep working."""
    return iso(datetime.now(UTC))


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


json_obj = json_dict  # the native store's lenient JSON-object reader


def actor_name(actor_json: str | None) -> str | None:
    """Who decided, from `actor_json` (`null` means the runtime's own expiry)."""
    actor = json_obj(actor_json)
    for key in ("name", "id", "kind"):
        if isinstance(actor.get(key), str) and actor[key]:
            return str(actor[key])
    return actor.get("_raw") if actor else None


def task_id(project_key: str, agent_id: str) -> str:
    return f"{project_key}/{agent_id}"


def agent_node_id(session_id: str, agent_id: str) -> str:
    return f"{session_id}/{agent_id}"


class StageflowBase(ForeignSource):
    """Identity, capabilities and the few lookups every mixin needs."""

    kind = "stageflow"
    writable_capabilities = frozenset({Capability.APPROVE, Capability.DENY, Capability.EXPIRE})
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "stageflow approves the exact payload it hashed (payload_hash replay "
                                   "protection); its arguments cannot be edited.",
        Capability.SET_VISIBILITY: NO_CONTEXT,
        Capability.LOCK: NO_CONTEXT,
        Capability.EDIT_ITEM: NO_CONTEXT,
        Capability.COMPACT: NO_CONTEXT,
        Capability.UNDO_COMPACTION: NO_CONTEXT,
    }
    notes = ("stageflow's schema is inferred from its SQL; spans carry no cost (cost is per turn); the turn "
             "and session states after a decision are the runtime's to set.")

    @staticmethod
    def _missing(entity: str, entity_id: str) -> NoReturn:
        raise NotFound(f"There is no {entity} with id {entity_id} in this stageflow database.")

    def approval(self, approval_id: str) -> rm.Approval:
        """Implemented by the approvals mixin; declared here so the tree can locate approvals."""
        raise NotImplementedError

    def _session_row(self, session_id: str) -> dict[str, Any]:
        rows = self.rows("SELECT session_id, project_key, agent_id, revision FROM agent_sessions "
                         "WHERE session_id = :sid", sid=session_id)
        return rows[0] if rows else self._missing("session", session_id)

    def _agent_session(self, agent_node: str) -> dict[str, Any]:
        """The session behind a pass-through agent id `session_id/agent_id` (either part may hold a '/')."""
        session_id, _, agent_id = agent_node.rpartition("/")
        rows = self.rows("SELECT session_id, project_key, agent_id, revision FROM agent_sessions "
                         "WHERE session_id = :sid AND agent_id = :aid", sid=session_id, aid=agent_id)
        if not rows:
            rows = self.rows("SELECT session_id, project_key, agent_id, revision FROM agent_sessions "
                             "WHERE session_id || '/' || agent_id = :node", node=agent_node)
        return rows[0] if rows else self._missing("agent", agent_node)

    def _turn_row(self, turn_id: str) -> dict[str, Any]:
        rows = self.rows("SELECT t.*, s.project_key, s.agent_id FROM agent_turns t "
                         "LEFT JOIN agent_sessions s ON s.session_id = t.session_id WHERE t.turn_id = :tid",
                         tid=turn_id)
        return rows[0] if rows else self._missing("run", turn_id)

    @staticmethod
    def parents_of(project_key: str | None, agent_id: str | None, session_id: str | None,
                   turn_id: str | None = None) -> dict[str, str]:
        """The `Change.parents` of anything below a session, as the views expect them."""
        parents: dict[str, str] = {}
        if project_key is not None:
            parents["project"] = project_key
            if agent_id is not None:
                parents["task"] = task_id(project_key, agent_id)
        if session_id is not None:
            parents["session"] = session_id
            if agent_id is not None:
                parents["agent"] = agent_node_id(session_id, agent_id)
        if turn_id:
            parents["run"] = turn_id
        return parents
