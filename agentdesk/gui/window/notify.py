"""A desktop notification when a new approval waits and the window is not in front.

`NotifyGate` is the decision, Qt-free and clock-driven so it is tested without a
desktop: notify only when the pending count *grew* while the window was not
focused; at most one message per `min_interval_s`; arrivals inside the interval
are coalesced into one later message carrying the count at that moment (and
dropped if the operator came back or the queue emptied meanwhile).

`TrayNotifier` shows the gate's messages through `QSystemTrayIcon` where a
system tray exists; without one (offscreen, some Wayland desktops) it asks the
window manager to flag the window (`QApplication.alert`) instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication, QStyle, QSystemTrayIcon, QWidget

MIN_INTERVAL_S = 10.0
TITLE = "agentdesk"


def message_for(count: int) -> str:
    return f"{count} approval{'s' if count != 1 else ''} waiting for you"


@dataclass(frozen=True, slots=True)
class Decision:
    show: str | None = None
    """Show this message now."""
    later_s: float | None = None
    """Ask again (`due`) after this many seconds."""


class NotifyGate:
    def __init__(self, min_interval_s: float = MIN_INTERVAL_S) -> None:
        self.min_interval_s = min_interval_s
        self._last_shown: float | None = None
        self._previous = 0
        self._owed = False

    def pending_changed(self, count: int, focused: bool, now: float) -> Decision:
        grew = count > self._previous
        self._previous = count
        if not grew or focused or count <= 0:
            return Decision()
        wait = 0.0 if self._last_shown is None else self._last_shown + self.min_interval_s - now
        if wait <= 0:
            self._last_shown = now
            self._owed = False
            return Decision(show=message_for(count))
        first = not self._owed
        self._owed = True
        return Decision(later_s=wait) if first else Decision()

    def due(self, focused: bool, now: float) -> Decision:
        """The coalesced message, once the interval has passed (nothing if no longer wanted)."""
        if not self._owed:
            return Decision()
        if self._last_shown is not None and now < self._last_shown + self.min_interval_s:
            return Decision(later_s=self._last_shown + self.min_interval_s - now)
        self._owed = False
        if focused or self._previous <= 0:
            return Decision()
        self._last_shown = now
        return Decision(show=message_for(self._previous))


class TrayNotifier(QObject):
    shown = Signal(str)
    """Each message as it is raised (tests listen here; the OS may or may not display it)."""

    def __init__(self, window: QWidget, *, min_interval_s: float = MIN_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(window)
        self._window = window
        self._clock = clock
        self.gate = NotifyGate(min_interval_s)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._due)
        self.tray: QSystemTrayIcon | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            icon = window.windowIcon()
            if icon.isNull():
                icon = window.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxInformation)
            self.tray = QSystemTrayIcon(icon, self)
            self.tray.setToolTip(TITLE)
            self.tray.activated.connect(self._bring_forward)
            self.tray.messageClicked.connect(self._bring_forward)
            self.tray.show()

    def _focused(self) -> bool:
        return self._window.isActiveWindow()

    def pending_changed(self, count: int) -> None:
        if self.tray is not None:
            self.tray.setToolTip(f"{TITLE}: {message_for(count)}" if count else TITLE)
        self._act(self.gate.pending_changed(count, self._focused(), self._clock()))

    def _due(self) -> None:
        self._act(self.gate.due(self._focused(), self._clock()))

    def _act(self, decision: Decision) -> None:
        if decision.later_s is not None:
            self._timer.start(max(1, int(decision.later_s * 1000)))
        if decision.show is None:
            return
        if self.tray is not None:
            self.tray.showMessage(TITLE, decision.show, QSystemTrayIcon.MessageIcon.Information, 8000)
        else:
            QApplication.alert(self._window)
        self.shown.emit(decision.show)

    def _bring_forward(self, *_args: object) -> None:
        self._window.showNormal()
        self._window.raise_()
        self._window.activateWindow()
