"""The agent's side: what a checkpoint reads and writes at a step boundary.

Running: one read, nothing written. Paused: `held_at` is stamped once (a run update on the bus, so the window
and the bench see the agent blocked), and the caller waits for the state to change. Stopping: the run ends
`cancelled` with "stopped by <who>: <reason>" as its error and the state becomes `stopped` (audited as
`run.stopped`). Nothing here lifts a pause or undoes a stop: that is the operator's (store/control/commands.py).

On PostgreSQL the server does it (`agentdesk_run_checkpoint`, migration 0017), for the agent login that wrote
the run or an operator only.
"""

from __future__ import annotations

from sqlalchemy import text

from agentdesk.store.control.commands import run_parents
from agentdesk.store.control.state import ControlState, RunControl, read_in
from agentdesk.store.errors import NotFound
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.uow import UnitOfWork, adopt_server_changes

SERVER_CHECKPOINT = text("SELECT * FROM agentdesk_run_checkpoint(:run, :actor, :origin)")


def read_control(store: Store, run_id: str) -> RunControl:
    """The run's control state now (running when no operator ever held it); `NotFound` for an unknown run."""
    with store.reading() as s:
        if s.get(sc.RunRow, run_id) is None:
            raise NotFound(f"There is no run with id {run_id}.")
        return read_in(s, run_id)


def reach_checkpoint(store: Store, run_id: str, actor: str) -> RunControl:
    """The state the agent must act on: running (go on), paused (held: wait), stopped (raise and end)."""
    if store.is_postgres:
        with store.reading() as s:  # the common case: running, nothing to write, no writer's turn
            current = read_in(s, run_id)
            if s.get(sc.RunRow, run_id) is None:
                raise NotFound(f"There is no run with id {run_id}.")
        if not _needs_write(current):
            return current
        with UnitOfWork(store, runtime=True) as uow:
            found = uow.session.execute(SERVER_CHECKPOINT, {"run": run_id, "actor": actor,
                                                            "origin": store.origin}).one()
            if found.outcome == "not found":
                raise NotFound(f"There is no run with id {run_id}.")
            adopt_server_changes(uow, found.changes)
        return read_control(store, run_id)
    current = read_control(store, run_id)
    if not _needs_write(current):
        return current
    with UnitOfWork(store, runtime=True) as uow:
        row = uow.session.get(sc.RunControlRow, run_id)
        run = uow.session.get(sc.RunRow, run_id)
        assert row is not None and run is not None
        if row.state == ControlState.PAUSED and row.held_at is None:
            row.held_at, row.revision = uow.now, row.revision + 1
            uow.record("run", "update", run_id, run_parents(run), run.revision)
        elif row.state == ControlState.STOPPING:
            row.state, row.held_at, row.revision = ControlState.STOPPED.value, None, row.revision + 1
            run.status, run.ended_at, run.revision = "cancelled", uow.now, run.revision + 1
            run.error = f"stopped by {row.set_by}" + (f": {row.reason}" if row.reason else "")  # no logins here
            uow.audit(actor, "run.stopped", "run", run_id, {"reason": row.reason, "stopped_by": row.set_by})
            uow.record("run", "update", run_id, run_parents(run), run.revision)
        return RunControl(run_id, ControlState(row.state), row.set_by, row.set_at, row.reason, row.held_at)


def _needs_write(current: RunControl) -> bool:
    return (current.state is ControlState.PAUSED and current.held_at is None) or \
        current.state is ControlState.STOPPING
