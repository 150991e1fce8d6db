"""The pending questions of a source as a Qt table: read on the runner, refreshed from the bus.

Any change of an ask (or a reset) re-reads the pending list once per coalesced batch; the newest answer wins
(`_ticket`): a read that finishes after a newer one is dropped, and a read is applied even while newer ones
are on their way, so a steady stream of questions cannot starve the table. A source without questions (a
foreign runtime that never asks) shows none, and `why_none` says so. Answering runs on the runner too,
guarded by the revision the operator was shown; the outcome (or the one-sentence refusal) comes back as
`answered` / `refused`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt, QTimer, Signal

from agentdesk.model.plain import shown_line, tooltip
from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.store.asks.protocol import AskReader, ask_reader, ask_writer
from agentdesk.store.asks.reads import Ask
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.text.arguments import inspect_cached

Index = QModelIndex | QPersistentModelIndex
TOP = QModelIndex()
HEADERS = ("Question", "Options", "Agent", "Run", "Left")
"""`Left`: the time until the question expires (its tooltip says so)."""
QUESTION, OPTIONS, AGENT, RUN, EXPIRES = range(len(HEADERS))
LIMIT = 1000


def left_text(ask: Ask, now: datetime) -> str:
    if ask.expires_at is None:
        return "never"
    seconds = (ask.expires_at - now).total_seconds()
    if seconds <= 0:
        return "expired"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


class AskModel(QAbstractTableModel):
    loaded = Signal()
    answered = Signal(object)
    """The ask as answered (an `Ask`)."""
    refused = Signal(str, str)
    """(ask id, the one-sentence reason nothing was written)."""
    _heard = Signal()
    """Emitted on the bus's thread, delivered on the GUI thread (queued): an ask changed."""

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._rows: list[Ask] = []
        self._ticket = 0
        self._applied = 0
        self._foreign = services.source.descriptor.kind != "agentdesk"
        reader = ask_reader(services.source)
        self.why_none = "" if reader is not None else "This source has no questions: its runtime never asks."
        self._reading = False
        self._dirty = False
        self._heard.connect(self.reload)
        # Straight from the source's bus, not the window's coalescing bridge: a question is a person's cue, and
        # at most one read is in flight (more changes meanwhile make one more read), so no burst floods the pool.
        self._unsubscribe = services.source.bus.subscribe(self._on_bus)
        self.destroyed.connect(lambda *_: self._unsubscribe())
        self._tick = QTimer(self)
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._on_tick)
        self._tick.start()
        self.reload()

    # -- Qt model -----------------------------------------------------------------------
    def rowCount(self, parent: Index = TOP) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = TOP) -> int:
        return 0 if parent.isValid() else len(HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        ask = self._rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cell(ask, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            if column == QUESTION:
                return tooltip(ask.question)
            if column == OPTIONS:
                return tooltip(*ask.options)
            return tooltip(self._cell(ask, column))
        return None

    def _cell(self, ask: Ask, column: int) -> str:
        if column == QUESTION:
            warn = "⚠ " if inspect_cached(ask.question).suspicious else ""
            return warn + shown_line(ask.question, 200)
        if column == OPTIONS:
            return shown_line(" | ".join(ask.options), 120) or "free text"
        if column == AGENT:
            return shown_line(ask.agent_name or ask.agent_id, 60)
        if column == RUN:
            return shown_line(ask.run_id, 60)
        return left_text(ask, datetime.now(UTC)) + (" · read-only" if ask.read_only else "")

    # -- rows ---------------------------------------------------------------------------
    def ask_at(self, row: int) -> Ask | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, ask_id: str) -> int:
        return next((n for n, a in enumerate(self._rows) if a.id == ask_id), -1)

    @property
    def pending(self) -> int:
        return len(self._rows)

    def reload(self) -> None:
        reader = ask_reader(self._services.source)
        if reader is None:
            return
        if self._reading:
            self._dirty = True  # read once more when the read in flight answers
            return
        self._reading = True
        self._ticket += 1
        ticket = self._ticket
        spawn(self._read(reader, ticket), error_signal=self._services.runner.error)

    async def _read(self, reader: AskReader, ticket: int) -> None:
        try:
            rows = await self._services.runner.run(reader.asks, True, LIMIT)
        except Exception:  # the next change reads again
            self._read_done()
            return
        self._loaded(rows, ticket)

    def _read_done(self) -> None:
        self._reading = False
        if self._dirty:
            self._dirty = False
            self.reload()

    def _loaded(self, rows: list[Ask], ticket: int) -> None:
        self._read_done()
        if ticket <= self._applied:
            return  # a newer read already answered (reads may finish out of order on the pool)
        self._applied = ticket  # an older read still shows more than the last one applied: never starve
        self.beginResetModel()
        self._rows = sorted(rows, key=lambda a: (a.created_at, a.id))
        self.endResetModel()
        self.loaded.emit()

    def _on_bus(self, changes: Sequence[Change]) -> None:
        """Any thread. agentdesk's store says which asks changed; a foreign runtime's follower cannot tell a
        question from another call's change, so any of its changes re-reads the (short) pending list."""
        if self._foreign or any(c.op == RESET or c.entity == "ask" for c in changes):
            try:
                self._heard.emit()
            except RuntimeError:  # the model is gone (its window closed)
                self._unsubscribe()

    def _on_tick(self) -> None:
        if self._rows:
            self.dataChanged.emit(self.index(0, EXPIRES), self.index(len(self._rows) - 1, EXPIRES))

    # -- answering ----------------------------------------------------------------------
    def why_not_answer(self, ask: Ask | None) -> str:
        if ask is None:
            return "Select a question."
        if ask.read_only:
            return ask.read_only
        writer = ask_writer(self._services.source)
        if writer is None:
            return "This source cannot record answers."
        if self._services.source.descriptor.read_only:
            return "The store is open read-only: answering writes to it (open it with --allow-writes)."
        return ""

    def answer(self, ask: Ask, text: str) -> None:
        writer = ask_writer(self._services.source)
        if writer is None:
            self.refused.emit(ask.id, "This source cannot record answers.")
            return
        spawn(self._answer(partial(writer.answer_ask, expected_revision=ask.revision), ask.id, text),
              error_signal=self._services.runner.error)

    async def _answer(self, write: Callable[[str, str, str], object], ask_id: str, text: str) -> None:
        try:
            answered = await self._services.runner.run(write, ask_id, text, self._services.actor)
        except Exception as exc:
            self.refused.emit(ask_id, str(exc))
            return
        self.answered.emit(answered)
