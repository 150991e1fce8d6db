"""The window's status bar: which store, whether the bus is live, when the last change came.

A lost PostgreSQL server is one line here, in place of "live", until it is back: "PostgreSQL at
HOST unreachable since 12:03:04, retrying". The store says it (`ChangeWatcher.outage_line`, no Qt
there); the watcher reconnects by itself and catches up on everything committed meanwhile.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from agentdesk.gui.shared.elided import ElidedLabel
from agentdesk.gui.window.encryption import add_encryption_label
from agentdesk.model.plain import shown_line, tooltip
from agentdesk.model.services import Services


def _label(parent: QWidget) -> QLabel:
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def ago(seconds: float) -> str:
    if seconds < 1.5:
        return "just now"
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


class StoreStatusBar(QStatusBar):
    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self.store_label = ElidedLabel(parent=self, min_chars=16)  # a long path must not widen the window
        self.live_label = _label(self)
        self.last_change_label = _label(self)
        self.pending_label = _label(self)
        self.busy_label = _label(self)
        for widget in (self.busy_label, self.pending_label, self.last_change_label, self.live_label,
                       self.store_label):
            self.addPermanentWidget(widget)
        self.encryption_label = add_encryption_label(self, services)  # PostgreSQL: TLS or not
        source = services.source.descriptor
        mode = "read-only" if source.read_only else "read-write"
        self.store_label.setText(shown_line(f"{source.kind} store · {source.location} · {mode}"))
        if source.notes:
            self.store_label.setToolTip(tooltip(f"{source.location}\n{source.notes}"))
        services.runner.busy_changed.connect(self._on_busy)
        services.runner.error.connect(lambda text: self.showMessage(shown_line(text, 600), 8000))
        self._timer = QTimer(self)
        self._timer.setInterval(1000)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        self.refresh()

    def set_pending(self, count: int, waiting_agents: int = 0, questions: int = 0) -> None:
        """An agent with a pending approval or question is blocked on the operator: say how many, in those words."""
        text = f"{count} pending approval{'s' if count != 1 else ''}"
        if questions:
            text += f" · {questions} question{'s' if questions != 1 else ''}"
        if waiting_agents:
            text += f" · {waiting_agents} agent{'s' if waiting_agents != 1 else ''} waiting for you"
        self.pending_label.setText(text)
        busy = bool(count or questions)
        self.pending_label.setStyleSheet("color: #d08000; font-weight: bold;" if busy else "")

    def _on_busy(self, in_flight: int) -> None:
        self.busy_label.setText("loading…" if in_flight else "")

    def refresh(self) -> None:
        watcher = self._services.source.watcher
        live = watcher is not None and watcher.healthy
        reconnecting = bool(getattr(watcher, "reconnecting", False))  # a server store lost its connection
        lost: str | None = getattr(watcher, "outage_line", None)
        if lost:  # the line must be read whole: it takes its width, the store's name is elided instead
            self.live_label.setText(f"○ {lost}")
            self.live_label.setMinimumWidth(self.live_label.sizeHint().width())
        else:
            self.live_label.setText("● live" if live else "○ not live, reconnecting…" if reconnecting
                                    else "○ not live")
            self.live_label.setMinimumWidth(0)
        self.last_change_label.setVisible(not lost)  # "last change 3 s ago" means nothing while nothing can come
        self.live_label.setStyleSheet("color: #30a46c;" if live else "color: #e5484d;")
        self.live_label.setToolTip("Watching the store for changes from any process" if live
                                   else "Not receiving changes from other processes; what they commit meanwhile "
                                   "is shown once the connection is back")
        last = self._services.bridge.last_change_at
        self.last_change_label.setText("no changes yet" if last is None
                                       else f"last change {ago(time.time() - last)}")
