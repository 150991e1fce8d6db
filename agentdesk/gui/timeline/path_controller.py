"""The critical path (key P): worked out on the store runner, listed in its tab beside the span's details.

The panel wires it: `changed` re-marks the rows, the minimap and the header, `chosen` selects and reveals
the lane clicked in the list. While it is on, every new layout of the run asks for the path again.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QTabWidget

from agentdesk.gui.timeline.path_panel import PathPanel
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.analysis.layout.tools import PathLanes, path_of

PATH_TAB = 1
"""The critical path's tab in the side tabs (the span's details are tab 0)."""


class PathController(QObject):
    changed = Signal()
    """The path was found or hidden: the rows, the minimap and the header show it."""
    chosen = Signal(int)
    """A lane clicked in the path's list: select it and bring it into view."""
    failed = Signal(str)
    """The path could not be worked out: one sentence for the header."""

    def __init__(self, services: Services, listing: PathPanel, side: QTabWidget,
                 run: Callable[[], tuple[str | None, TimelineData | None]], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services, self.listing, self.side, self._run = services, listing, side, run
        self.on = False
        self.path: PathLanes | None = None
        self._latest = LatestTask(services.runner,
                                  on_error=lambda exc: self.failed.emit(f"Could not find the critical path: {exc}"))
        listing.lane_clicked.connect(self.chosen)

    def reset(self) -> None:
        """Another run: the path in flight and the one shown are forgotten (P stays on or off)."""
        self._latest.cancel()
        self.path = None
        self.listing.show_path(None)

    def toggle(self) -> None:
        """Key P: highlight the chain of spans that set the run's end time, list it, fade the rest."""
        self.on = not self.on
        if self.on:
            self.compute()
        else:
            self._latest.cancel()
            self.path = None
            self.listing.show_path(None)
            self.side.setTabVisible(PATH_TAB, False)
            self.side.setCurrentIndex(0)
        self.changed.emit()

    def refresh(self, data: TimelineData, changed_ids: frozenset[str] | None) -> None:
        """A new layout: while on, the path is worked out again unless nothing in it changed."""
        if self.on and (self.path is None or self.path.data is not data or changed_ids is None or changed_ids):
            self.compute()

    def compute(self) -> None:
        run_id, data = self._run()
        if data is not None and run_id is not None:
            self._latest.start(self._find_path(run_id, data))

    async def _find_path(self, run_id: str, data: TimelineData) -> None:
        self._ready(await self.services.runner.run(path_of, self.services.source, run_id, data))

    def _ready(self, path: PathLanes) -> None:
        if not self.on or path.data is not self._run()[1]:
            return
        self.path = path
        self.listing.show_path(path)
        if not self.side.isTabVisible(PATH_TAB):
            self.side.setTabVisible(PATH_TAB, True)
            self.side.setCurrentIndex(PATH_TAB)
        self.changed.emit()

    def summary(self) -> str | None:
        """What the header adds while the path is on (None when off)."""
        if not self.on:
            return None
        return self.path.summary() if self.path is not None else "critical path: working it out…"
