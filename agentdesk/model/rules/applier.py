"""The window as a rule applier: an operator's or admin's window on PostgreSQL rules on agent logins' requests.

An agent login's requests are never ruled on by its own process (store/rules/applier.py says why); while a
window whose login may decide is open, it does it. Each pass is `apply_pending` on the store runner, started
from the change bus (a new request, a rule changed, a reconnect) and every `IDLE_MS` besides: one pass at a
time, and a change heard during a pass runs one more after it, so the GUI thread never waits on the database
and nothing heard is dropped. Several windows (and `agentdesk rules apply --follow`) may run at once: the
server decides each request once, the losers are told so and say nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.store.errors import PermissionRefused, ServerUnreachable
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import Change
from agentdesk.store.rules.applier import BATCH, DECIDED, Applied, applier_refusal, apply_pending, wakes

IDLE_MS = 15_000
"""A pass this often with nothing heard: a notification lost in an outage costs at most this long."""


class RuleApplier(QObject):
    decided = Signal(object)
    """A tuple of `Applied` this window decided by rule (on the GUI thread)."""

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services = services
        source = services.source
        self.store = source.store if isinstance(source, NativeSource) else None
        self.active = self.store is not None and applier_refusal(self.store) is None
        """Whether this window applies rules: a PostgreSQL store and a login that may decide."""
        self._task: asyncio.Task[Any] | None = None
        self._again = False
        self.passes = 0
        self._timer = QTimer(self)
        self._timer.setInterval(IDLE_MS)
        self._timer.timeout.connect(self.kick)
        if self.active:
            services.bridge.changes.connect(self._heard)
            self._timer.start()
            self.kick()

    def _heard(self, batch: Sequence[Change]) -> None:
        if any(wakes(change) for change in batch):
            self.kick()

    def kick(self) -> None:
        """Run a pass now, or one more after the pass in flight."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = spawn(self._passes(), self._failed, self.services.runner.error)

    async def _passes(self) -> None:
        while True:
            self._again = False
            applied: list[Applied] = await self.services.runner.run(apply_pending, self.store)
            self.passes += 1
            mine = tuple(a for a in applied if a.outcome in DECIDED)
            if mine:
                self.decided.emit(mine)
            if not self._again and len(applied) < BATCH:
                return

    def _failed(self, exc: BaseException) -> None:
        """A lost server is the status bar's to say (the reconnect's reset kicks a pass); anything else is shown.
        A refusal (the login lost its level since the window opened) is said once and ends the applying here."""
        if isinstance(exc, ServerUnreachable):
            return
        if isinstance(exc, PermissionRefused):
            self.stop()
            self.active = False
            self.services.bridge.changes.disconnect(self._heard)
            self.services.runner.error.emit(f"Standing rules are no longer applied from this window: {exc}")
            return
        self.services.runner.error.emit(str(exc))

    def stop(self) -> None:
        self._timer.stop()
        if self._task is not None and not self._task.done():
            self._task.cancel()


def decided_line(applied: Sequence[Applied]) -> str:
    """The status bar's line after a pass that decided something."""
    approved = sum(a.outcome == "approved" for a in applied)
    denied = len(applied) - approved
    parts = [f"{n} {word}" for n, word in ((approved, "approved"), (denied, "denied")) if n]
    return f"Standing rules decided agent requests here: {', '.join(parts)}."
