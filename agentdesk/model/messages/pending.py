"""One agent's pending messages for the context editor: kept current from the bus, cancelled on the runner.

A plain QObject, not an item model: the editor shows a handful of rows with a Cancel button each. A message
leaves this list when the agent takes it (it is then a context item the context model shows) or when someone
cancels it; either arrives as a `message` change of this agent on the bus.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from agentdesk.model.runner import OnError
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask, spawn
from agentdesk.store.messages.desk import MessageDesk, message_desk, messaging_refusal
from agentdesk.store.messages.reads import Message
from agentdesk.store.persistence.bus import RESET, Change

RELOAD_DEBOUNCE_MS = 40


@dataclass(frozen=True, slots=True)
class Pending:
    """What the editor needs: the message and whether a cancel of it is on its way."""

    message: Message
    cancelling: bool = False


class PendingMessages(QObject):
    changed = Signal()
    failed = Signal(str)
    """A load or a cancel failed: one sentence for the editor's message bar."""

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._desk: MessageDesk | None = message_desk(services.source)
        self._latest = LatestTask(services.runner, on_error=lambda exc: self.failed.emit(str(exc)))
        self._agent_id: str | None = None
        self._rows: list[Message] = []
        self._cancelling: set[str] = set()
        self._timer = QTimer(self, singleShot=True, interval=RELOAD_DEBOUNCE_MS)
        self._timer.timeout.connect(self.reload)
        services.bridge.changes.connect(self._on_changes)

    @property
    def refusal(self) -> str | None:
        """Why this source takes no messages now (None: it does): sending and cancelling are disabled."""
        return messaging_refusal(self._services.source)

    @property
    def rows(self) -> list[Pending]:
        return [Pending(m, m.id in self._cancelling) for m in self._rows]

    def set_agent(self, agent_id: str | None) -> None:
        self._latest.cancel()
        self._agent_id, self._rows = agent_id, []
        self._cancelling.clear()
        self.changed.emit()
        if agent_id is not None:
            self.reload()

    def reload(self) -> None:
        desk, agent_id = self._desk, self._agent_id
        if desk is None or agent_id is None:
            return
        self._latest.start(self._load(desk, agent_id))

    async def _load(self, desk: MessageDesk, agent_id: str) -> None:
        self._apply(await self._services.runner.run(desk.pending, agent_id))

    def close(self) -> None:
        self._timer.stop()
        self._latest.cancel()

    def cancel(self, message_id: str, on_error: OnError | None = None) -> None:
        """Cancel on the runner; the list reloads from the bus (or here, when the cancel lost to a delivery)."""
        if self._desk is None:
            return
        self._cancelling.add(message_id)
        self.changed.emit()

        spawn(self._cancel(self._desk, message_id, on_error))

    async def _cancel(self, desk: MessageDesk, message_id: str, on_error: OnError | None) -> None:
        try:
            await self._services.runner.run(desk.cancel, message_id, self._services.actor)
        except Exception as exc:
            self._cancelling.discard(message_id)
            self.reload()
            if on_error is not None:
                on_error(exc)
            else:
                self.failed.emit(str(exc))
            return
        self.reload()

    def _apply(self, rows: list[Message]) -> None:
        if rows and rows[0].agent_id != self._agent_id:
            return
        self._rows = rows
        self._cancelling &= {m.id for m in rows}
        self.changed.emit()

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if self._agent_id is not None and any(self._concerns(c) for c in changes):
            self._timer.start()

    def _concerns(self, change: Change) -> bool:
        return change.op == RESET or (change.entity == "message" and change.parent("agent") == self._agent_id) or (
            change.entity == "context" and change.id == self._agent_id)  # a foreign runtime's queue moved
