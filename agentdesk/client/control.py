"""Checkpoints: where an agent honours an operator's pause and stop (store/control).

`run.checkpoint()` returns at once while the run is running. Paused, it reports the agent blocked (the
operator's window and `agentdesk` show "agent blocked at a checkpoint") and waits, the way a decision is waited
for (a long poll released from the change bus over HTTP; a short poll of one row on a local store), until the
operator resumes. After a stop it ends the run `cancelled`, naming who stopped it, and raises `RunStopped`, so
the agent's own code unwinds from wherever it was.
"""

from __future__ import annotations

import asyncio

from agentdesk.client.backend import Backend
from agentdesk.store.control.state import ControlState, RunControl

WAIT_SLICE_S = 25.0
"""How long one wait is held before asking again (a long poll over HTTP)."""
ASYNC_SLICE_S = 2.0
"""From asyncio a wait runs on a thread: a cancelled task lets that thread go after at most this long."""


class RunStopped(Exception):
    """An operator stopped the run; it has been recorded as `cancelled` with who stopped it and why."""

    def __init__(self, run_id: str, stopped_by: str | None, reason: str | None) -> None:
        why = f": {reason}" if reason else ""
        super().__init__(f"Run {run_id} was stopped by {stopped_by or 'an operator'}{why}.")
        self.run_id = run_id
        self.stopped_by = stopped_by
        self.reason = reason


def _stopped(run_id: str, control: RunControl) -> RunStopped:
    return RunStopped(run_id, control.who, control.reason)


def checkpoint(rt: Backend, run_id: str) -> None:
    """Return while running; block while paused; raise `RunStopped` after a stop."""
    while True:
        control = rt.checkpoint(run_id)
        if control.state is ControlState.RUNNING:
            return
        if control.state in (ControlState.STOPPING, ControlState.STOPPED):
            raise _stopped(run_id, control)
        control = rt.wait_control(run_id, WAIT_SLICE_S)
        if control.state is ControlState.RUNNING:
            return


async def acheckpoint(rt: Backend, run_id: str) -> None:
    """`checkpoint` without blocking the event loop; cancelling the task ends the wait."""
    while True:
        control = await asyncio.to_thread(rt.checkpoint, run_id)
        if control.state is ControlState.RUNNING:
            return
        if control.state in (ControlState.STOPPING, ControlState.STOPPED):
            raise _stopped(run_id, control)
        control = await asyncio.to_thread(rt.wait_control, run_id, ASYNC_SLICE_S)
        if control.state is ControlState.RUNNING:
            return
