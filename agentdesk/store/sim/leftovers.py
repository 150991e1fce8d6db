"""Runs left "waiting" by an agent that is gone: found and closed when a simulator starts.

An agent that dies while it waits for a decision (killed, or it gave up during a server outage
that outlasted it) leaves its run and session saying `waiting`, and they would say so for ever.
Whether anyone still waits is what the requester heartbeat tells (store/approvals/heartbeat.py):
a waiting run whose pending approvals have all stopped beating has nobody behind it, by the same
rule the approval queue greys "requester gone". Such a run is closed as `cancelled` with the reason,
and its approvals withdrawn, so neither the tree nor the queue counts it as an agent waiting for
you. A run with any live or never-beaten approval is left alone: somebody may still be there.
Each close is the runtime's own compare-and-set writes (withdraw once, then the status), so two
simulators starting together close each run once; a login that may not write a run (another
agent's, on PostgreSQL) leaves it to its owner.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from contextlib import suppress
from datetime import UTC, datetime

from sqlalchemy import select

from agentdesk.store.approvals import commands
from agentdesk.store.approvals.heartbeat import GONE_AFTER_S, is_gone
from agentdesk.store.errors import Conflict, NotFound, PermissionRefused
from agentdesk.store.persistence import schema as sc
from agentdesk.store.runtime import AgentRuntime

log = logging.getLogger(__name__)

GONE_REASON = "the agent is gone: it stopped waiting without closing its run"


def gone_waiting_runs(rt: AgentRuntime, gone_after_s: float = GONE_AFTER_S) -> dict[tuple[str, str], list[str]]:
    """Waiting runs whose pending approvals all stopped beating: (run id, session id) → those approvals' ids."""
    R, A = sc.RunRow, sc.ApprovalRow
    with rt.store.reading() as s:
        rows = s.execute(select(A.run_id, R.session_id, A.id, A.status, A.requester_heartbeat_at)
                         .join(R, R.id == A.run_id)
                         .where(R.status == "waiting", A.status == "pending")).all()
    now = datetime.fromtimestamp(time.time(), UTC)
    pending: dict[tuple[str, str], list[str]] = defaultdict(list)
    alive: set[str] = set()
    for row in rows:
        beat = None if row.requester_heartbeat_at is None else datetime.fromtimestamp(row.requester_heartbeat_at, UTC)
        if is_gone(row.status, beat, now, gone_after_s):
            pending[(row.run_id, row.session_id)].append(row.id)
        else:
            alive.add(row.run_id)
    return {key: ids for key, ids in pending.items() if key[0] not in alive}


def close_gone_runs(rt: AgentRuntime, gone_after_s: float = GONE_AFTER_S) -> list[str]:
    """Close every waiting run nobody waits in any more (see the module); returns the runs closed."""
    closed = []
    for (run_id, session_id), approval_ids in gone_waiting_runs(rt, gone_after_s).items():
        try:
            for approval_id in approval_ids:
                with suppress(Conflict):  # decided or expired meanwhile: that stands; the run is still left
                    commands.withdraw(rt.store, approval_id, rt.actor, GONE_REASON)
            rt.set_run_status(run_id, "cancelled", error=GONE_REASON)
            if _session_status(rt, session_id) == "waiting":
                rt.set_session_status(session_id, "cancelled")
        except (PermissionRefused, NotFound) as exc:
            log.info("left run %s alone: %s", run_id, exc)
            continue
        closed.append(run_id)
    return closed


def _session_status(rt: AgentRuntime, session_id: str) -> str | None:
    with rt.store.reading() as s:
        return s.execute(select(sc.SessionRow.status).where(sc.SessionRow.id == session_id)).scalar()
