"""A run's control state and the transitions between them: one table, shared by both backends and the tests.

The operator's actions are compare-and-set on the state (`next_state`): pause only a running run, resume only a
paused one, stop any unfinished one. `stopping` becomes `stopped` only when the agent reaches a checkpoint (it
ends the run `cancelled`); nothing an agent can call moves a run out of `paused` or `stopping`.
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentdesk.store.persistence import schema as sc
from agentdesk.store.readmodel import ControlState, RunControl

__all__ = ["FINISHED_RUN", "Action", "ControlState", "RunControl", "from_row", "next_state", "read_in", "read_many"]


class Action(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"


FINISHED_RUN = frozenset({"done", "failed", "cancelled"})
"""Run statuses after which nothing can be paused or stopped."""

ALLOWED = {Action.PAUSE: {ControlState.RUNNING}, Action.RESUME: {ControlState.PAUSED},
           Action.STOP: {ControlState.RUNNING, ControlState.PAUSED}}
RESULT = {Action.PAUSE: ControlState.PAUSED, Action.RESUME: ControlState.RUNNING, Action.STOP: ControlState.STOPPING}


def next_state(current: ControlState, action: Action, run_status: str) -> ControlState | None:
    """The state `action` leads to, or None when the guard refuses it (finished run, wrong state)."""
    if run_status in FINISHED_RUN or current is ControlState.STOPPED:
        return None
    return RESULT[action] if current in ALLOWED[action] else None


def from_row(run_id: str, row: sc.RunControlRow | None) -> RunControl:
    if row is None:
        return RunControl(run_id, ControlState.RUNNING)
    return RunControl(run_id, ControlState(row.state), row.set_by, row.set_at, row.reason, row.held_at,
                      row.set_login)


def read_in(session: Session, run_id: str) -> RunControl:
    return from_row(run_id, session.get(sc.RunControlRow, run_id))


def read_many(session: Session, run_ids: list[str]) -> dict[str, RunControl]:
    """Every named run's control (running when it has none), one query per 500 ids."""
    found = {run_id: RunControl(run_id, ControlState.RUNNING) for run_id in run_ids}
    K = sc.RunControlRow
    for n in range(0, len(run_ids), 500):
        for row in session.execute(select(K).where(K.run_id.in_(run_ids[n:n + 500]))).scalars():
            found[row.run_id] = from_row(row.run_id, row)
    return found
