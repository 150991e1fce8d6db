"""What every part of the vgxness source shares: identity, vocabularies, ids and times.

vgxness (0.1.0) keeps `project` as free text on runs, agents and sessions, an agent registry
(`agents`, sub-agents via `parent_agent_id`), runs with point-in-time `run_events` and
`run_checkpoints`, and `run_approvals`. Runs link to no session and no task, so the fixed tree
levels are filled like this:

- project = a distinct `project` text (runs, agents and sessions);
- task    = a pass-through node per project, id `<project>/task` ("vgxness has no task level");
- session = a pass-through node per project, id `<project>/session` (vgxness's `sessions` table is
            an IDE/memory log that no run references, so it is not a tree level);
- agent   = a registry agent (`agents.id`), or, for a `runs.selected_agent_id` the registry does not
            hold (there is no foreign key), a node named after that id, in the project of its first run;
- run     = `runs.id`; its timeline is `run_events` and `run_checkpoints`, all points in time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, NoReturn

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.source import Capability
from agentdesk.store.sources.foreign import ForeignSource

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TASK_SUFFIX = "/task"
SESSION_SUFFIX = "/session"

NO_CONTEXT = ("vgxness keeps no agent context to edit (its observations are project memory, shown "
              "read-only on the events that touch them).")

RUN_STATUS = {"created": "pending", "planned": "pending", "running": "running", "needs-human": "waiting",
              "completed": "done", "failed": "failed", "blocked": "failed", "cancelled": "cancelled"}
"""runs.status → tree status (reference §4.2); `blocked` has no tree status and shows as failed, its
outcome named in the run title."""

ACTIVE_RUN_STATUSES = ("created", "planned", "running", "needs-human")

APPROVAL_STATUS_SQL = "CASE ap.status WHEN 'rejected' THEN 'denied' ELSE ap.status END"
"""run_approvals.status → canonical: `rejected` is denied; `cancelled` has no canonical twin and is
shown as it is stored. vgxness approvals have no deadline, so none is ever expired."""


def parse_time(value: object) -> datetime | None:
    """ISO-8601 TEXT (`toISOString()` / strftime '%Y-%m-%dT%H:%M:%fZ'), or Unix ms, as aware UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000, UTC)
    raw = str(value).strip()
    if raw.isdigit():
        return datetime.fromtimestamp(int(raw) / 1000, UTC)
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def time_of(value: object) -> datetime:
    """For NOT NULL columns: an unreadable value shows as the epoch rather than breaking the view."""
    return parse_time(value) or EPOCH


def iso_now() -> str:
    """`new Date().toISOString()`, the format vgxness writes."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_any(raw: str | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def task_id(project: str) -> str:
    return project + TASK_SUFFIX


def session_id(project: str) -> str:
    return project + SESSION_SUFFIX


def project_of(node_id: str, suffix: str) -> str | None:
    return node_id[: -len(suffix)] if node_id.endswith(suffix) else None


def agent_projects(conn: Connection) -> dict[str, str]:
    """Where each agent sits: its registry project, else the project of its first run."""
    homes = {r.selected_agent_id: r.project for r in conn.execute(text(
        "SELECT selected_agent_id, project, MIN(created_at) FROM runs GROUP BY selected_agent_id"))}
    homes.update({r.id: r.project for r in conn.execute(text("SELECT id, project FROM agents"))})
    return homes


def parents(project: str, agent_id: str | None = None, run_id: str | None = None) -> dict[str, str]:
    """`Change.parents` of a node below a project, as the views expect them."""
    found = {"project": project, "task": task_id(project), "session": session_id(project)}
    if agent_id is not None:
        found["agent"] = agent_id
    if run_id is not None:
        found["run"] = run_id
    return found


class VgxnessBase(ForeignSource):
    """Identity, capabilities and the lookups every mixin needs."""

    kind = "vgxness"
    writable_capabilities = frozenset({Capability.APPROVE, Capability.DENY})
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "A vgxness approval is tied to the immutable run event that raised it; "
                                   "its arguments cannot be edited.",
        Capability.EXPIRE: "vgxness approvals have no deadline.",
        Capability.SET_VISIBILITY: NO_CONTEXT,
        Capability.LOCK: NO_CONTEXT,
        Capability.EDIT_ITEM: NO_CONTEXT,
        Capability.COMPACT: NO_CONTEXT,
        Capability.UNDO_COMPACTION: NO_CONTEXT,
    }
    notes = ("vgxness records points in time, not durations, and no tokens or cost; a decision sets only the "
             "approval row: the run leaves needs-human when the runtime acts on it.")

    @staticmethod
    def _missing(entity: str, entity_id: str) -> NoReturn:
        raise NotFound(f"There is no {entity} with id {entity_id} in this vgxness database.")

    def approval(self, approval_id: str) -> rm.Approval:
        """Implemented by the approvals mixin; declared here so the tree can locate approvals."""
        raise NotImplementedError

    def _run_row(self, run_id: str) -> dict[str, Any]:
        rows = self.rows("SELECT * FROM runs WHERE id = :rid", rid=run_id)
        return rows[0] if rows else self._missing("run", run_id)

    def _home(self, agent_id: str) -> str:
        with self.reading() as conn:
            home = agent_projects(conn).get(agent_id)
        return home if home is not None else self._missing("agent", agent_id)
