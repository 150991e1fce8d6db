"""File → Open store… and Open recent: another store opens in a window of its own.

Everything in a window (views, models, the watcher, the receiver) is bound to one
source, so another store gets its own process, started the way this one was (the
bundle's executable, or this Python with `-m agentdesk.cli`). The store is
opened once on the runner first: a file that is no store fails here, in this
window's message bar, instead of in a process that only a terminal would hear, and
it is not remembered. The stores opened last are remembered in the settings
file, newest first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QProcess, QSettings
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QWidget

from agentdesk.model.plain import shown_line
from agentdesk.model.runner import StoreRunner
from agentdesk.model.tasks import spawn
from agentdesk.store.sources import open_source

RECENT_KEY = "recent/stores"
MAX_RECENT = 8
STORE_FILTER = "Stores (*.sqlite *.sqlite3 *.db);;All files (*)"


def remember(settings: QSettings, location: str) -> list[str]:
    """Put `location` first in the recent list (once), keep MAX_RECENT, and return the list."""
    stored = settings.value(RECENT_KEY, [])
    # QSettings' INI format reads a one-item list back as a plain string
    recent = [stored] if isinstance(stored, str) else [str(s) for s in stored] if isinstance(stored, list) else []
    recent = [location, *[r for r in recent if r != location]][:MAX_RECENT]
    settings.setValue(RECENT_KEY, recent)
    return recent


def can_open(location: str) -> None:
    """Open and close the store (raises `StoreError` saying why it cannot be used)."""
    open_source(location).close()


def window_command(location: str) -> tuple[str, list[str]]:
    """How to start `agentdesk gui --store LOCATION` from inside this process, bundled or not."""
    if getattr(sys, "frozen", False):
        return sys.executable, ["gui", "--store", location]
    return sys.executable, ["-m", "agentdesk.cli", "gui", "--store", location]


class StoreMenu:
    """The store entries at the top of the File menu."""

    def __init__(self, parent: QWidget, menu: QMenu, settings: QSettings, current: str, runner: StoreRunner,
                 report: Callable[[str], None]) -> None:
        self._parent = parent
        self._runner = runner
        self._report = report
        self._settings = settings
        self._current = current
        self.recent = remember(settings, current)
        self.open_action = QAction("&Open store…", parent)
        self.open_action.setShortcut(QKeySequence("Ctrl+O"))
        self.open_action.setToolTip("Open another store (agentdesk, lensagent, stageflow, vgxness, maka) in a "
                                    "new window")
        self.open_action.triggered.connect(self.choose)
        menu.addAction(self.open_action)
        self.recent_menu = menu.addMenu("Open &recent")
        self._fill_recent()
        menu.addSeparator()
        self.started: list[tuple[str, list[str]]] = []
        """Commands this menu started, newest last (what a test checks)."""

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        others = [r for r in self.recent if r != self._current]
        for location in others:
            action = self.recent_menu.addAction(shown_line(location, 200))
            action.triggered.connect(lambda _checked=False, where=location: self.open(where))
        self.recent_menu.setEnabled(bool(others))

    def choose(self) -> None:
        start = str(Path(self._current).parent) if "://" not in self._current else ""
        dialog = QFileDialog(self._parent, "Open store", start, STORE_FILTER)
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.open)
        dialog.open()

    def open(self, location: str) -> None:
        """Check the store on the runner, then open it in a new window (or say why not, here)."""
        spawn(self._check(location), error_signal=self._runner.error)

    async def _check(self, location: str) -> None:
        try:
            await self._runner.run(can_open, location)
        except Exception as exc:
            self._report(f"Could not open the store {location}: {exc}")
            return
        self._start(location)

    def _start(self, location: str) -> None:
        program, arguments = window_command(location)
        self.recent = remember(self._settings, location)
        self._fill_recent()
        self.started.append((program, arguments))
        QProcess.startDetached(program, arguments)
