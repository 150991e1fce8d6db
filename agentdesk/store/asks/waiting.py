"""An agent waiting for its answer: where it stands now, and a blocking wait for a local store.

`state` is what the agent needs to know (answered and the text, or expired, or cancelled, or still pending),
as one small value that also travels as JSON over the agent API. A pending ask past its deadline is closed as
expired by whoever looks first (the asker may: it is its own), so an agent never waits past `expires_in`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentdesk.store.asks import commands
from agentdesk.store.errors import Conflict, NotFound
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import Store

POLL_S = 0.02
"""How often a local wait looks at the store when no change was heard in this process (another process's
answer reaches it in about this long; one indexed read of one row each time)."""


@dataclass(frozen=True, slots=True)
class AskState:
    ask_id: str
    status: str
    """pending, answered, expired or cancelled."""
    answer: str | None = None
    answered_by: str | None = None
    reason: str | None = None
    expires_at: float | None = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def json(self) -> dict[str, Any]:
        return {"ask_id": self.ask_id, "status": self.status, "answer": self.answer,
                "answered_by": self.answered_by, "reason": self.reason, "expires_at": self.expires_at}

    @staticmethod
    def of(answer: Mapping[str, Any]) -> AskState:
        return AskState(str(answer["ask_id"]), str(answer["status"]), answer.get("answer"),
                        answer.get("answered_by"), answer.get("reason"), answer.get("expires_at"))


def read_state(store: Store, ask_id: str) -> AskState:
    with store.reading() as s:
        row = s.get(sc.AskRow, ask_id)
        if row is None:
            raise NotFound(f"There is no question with id {ask_id}.")
        return AskState(row.id, row.status, row.answer, row.answered_by, row.reason, row.expires_at)


def state(store: Store, ask_id: str, actor: str) -> AskState:
    """The ask now, closing it as expired first when its deadline passed."""
    found = read_state(store, ask_id)
    if found.pending and found.expires_at is not None and time.time() >= found.expires_at:
        with contextlib.suppress(Conflict):  # answered in the same instant, or expired by another: read what won
            commands.close(store, ask_id, "expired", actor)
        found = read_state(store, ask_id)
    return found


def cancel(store: Store, ask_id: str, actor: str, why: str) -> AskState:
    """Take the question back: `cancelled`, or whatever came first (an answer wins if it did)."""
    with contextlib.suppress(Conflict):
        commands.close(store, ask_id, "cancelled", actor, why)
    return read_state(store, ask_id)


def wait(store: Store, ask_id: str, actor: str, timeout_s: float | None = None,
         poll_s: float = POLL_S) -> AskState:
    """Block until the ask is no longer pending (or `timeout_s` passes: then its pending state).

    An answer written in this process wakes the wait at once (the store's bus); another process's within
    `poll_s`.
    """
    woken = threading.Event()

    def heard(batch: Sequence[Change]) -> None:
        if any(c.entity == "ask" and c.id == ask_id for c in batch):
            woken.set()

    unsubscribe = store.bus.subscribe(heard)
    give_up = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while True:
            found = state(store, ask_id, actor)
            if not found.pending:
                return found
            left = None if give_up is None else give_up - time.monotonic()
            if left is not None and left <= 0:
                return found
            pause = poll_s if left is None else min(poll_s, left)
            if found.expires_at is not None:
                pause = min(pause, max(0.0, found.expires_at - time.time()))
            woken.wait(pause)
            woken.clear()
    finally:
        unsubscribe()
