"""The minimap kept in step with the waterfall: its window is the waterfall's time range (a drag on it
moves the waterfall), its strip lines up with the plot area, and it marks the path and the matches."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, Signal

from agentdesk.gui.timeline.minimap import Minimap
from agentdesk.store.analysis.layout.overview import Overview
from agentdesk.store.analysis.layout.tools import Matches, PathLanes


class MinimapController(QObject):
    moved = Signal()
    """The operator moved the waterfall from the minimap (a live run stops being followed)."""

    def __init__(self, minimap: Minimap, plot: pg.PlotWidget, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.minimap, self.plot = minimap, plot
        self.view = plot.getPlotItem().vb
        minimap.window_moved.connect(self._moved)
        self.view.sigXRangeChanged.connect(self.sync)
        self.view.sigResized.connect(self.sync)

    def sync(self, *_args: object) -> None:
        """The minimap's window is the waterfall's time range, its strip aligned with the plot area."""
        area = self.view.mapRectToScene(self.view.boundingRect())
        left = int(self.plot.mapFromScene(area.topLeft()).x())
        right = int(self.plot.width() - self.plot.mapFromScene(area.topRight()).x())
        self.minimap.set_margins(left, max(0, right))
        self.minimap.set_window(*self.view.viewRange()[0])

    def _moved(self, start: float, end: float) -> None:
        self.moved.emit()
        self.view.setXRange(start, end, padding=0)

    def set_overview(self, overview: Overview | None) -> None:
        """The run's overview grid (drawn once per change, not per pan)."""
        if self.minimap.overview is not overview:
            self.minimap.set_overview(overview)
            self.sync()

    def clear_marks(self) -> None:
        self.minimap.set_marks(np.zeros(0), np.zeros((0, 2)))

    def show_path(self, path: PathLanes | None, now: float) -> None:
        """Each critical-path span as its (start, end)."""
        if path is None:
            self.minimap.set_marks(path=np.zeros((0, 2)))
            return
        data = path.data
        self.minimap.set_marks(path=np.column_stack((data.start[path.lanes], data.ends(now)[path.lanes])))

    def show_matches(self, matches: Matches | None) -> None:
        """Each match as its start."""
        self.minimap.set_marks(matches=np.zeros(0) if matches is None else matches.data.start[matches.lanes])
