"""The mouse over the waterfall: which lane a point is on (a bar, or its name's whole row), its tooltip,
and what a click there asks for (a left click selects the lane, a right click opens the run's menu)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, Qt, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QToolTip

from agentdesk.gui.timeline.axes import LaneAxis
from agentdesk.gui.timeline.drawing import span_tooltip
from agentdesk.gui.timeline.span_item import SpanItem
from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.analysis.layout.rows import Rows


class HoverController(QObject):
    clicked = Signal(int)
    """A left click on a lane."""
    menu_requested = Signal(int)
    """A right click: the run's menu, for the lane under the mouse (-1 when none)."""

    def __init__(self, plot: pg.PlotWidget, lanes: LaneAxis, item: SpanItem,
                 layout: Callable[[], tuple[TimelineData | None, Rows | None]], lane_of_row: Callable[[int], int],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.plot, self.lanes, self.item, self._layout, self._lane_of_row = plot, lanes, item, layout, lane_of_row
        self.view = plot.getPlotItem().vb
        self.last_tip = -1
        """The lane whose tooltip shows (-1: none); a new layout forgets it."""
        plot.scene().sigMouseMoved.connect(self.hover)
        plot.scene().sigMouseClicked.connect(self._clicked)

    def lane_at(self, scene_pos: QPointF) -> int:
        """The lane under a point of the waterfall, or of its label (the label's whole row counts)."""
        shown = self.item.data
        if self._layout()[0] is None or shown is None:
            return -1
        if self.lanes.sceneBoundingRect().contains(scene_pos):
            row = self.lanes.row_at(self.lanes.mapFromScene(scene_pos).y())
            return self._lane_of_row(row) if row >= 0 else -1
        if not self.view.sceneBoundingRect().contains(scene_pos):
            return -1
        point = self.view.mapSceneToView(scene_pos)
        px_w, px_h = self.view.viewPixelSize()
        return self._lane_of_row(shown.hit(point.x(), point.y(), 4 * px_w, 2 * px_h, self.item.now))

    def hover(self, scene_pos: QPointF) -> None:
        lane = self.lane_at(scene_pos)
        if lane == self.last_tip:
            return
        self.last_tip = lane
        if lane < 0:
            QToolTip.hideText()
        else:
            QToolTip.showText(QCursor.pos(), self.tooltip(lane), self.plot)

    def tooltip(self, lane: int) -> str:
        data, rows = self._layout()
        assert data is not None
        folded = 0
        if rows is not None and rows.data is data and rows.collapsed[lane] and rows.visible(lane):
            folded = int(rows.folded[rows.row(lane)])
        return span_tooltip(data, lane, self.item.now, folded)

    def _clicked(self, event: Any) -> None:
        if event.button() == Qt.MouseButton.RightButton:
            self.menu_requested.emit(self.lane_at(event.scenePos()))
        elif event.button() == Qt.MouseButton.LeftButton:
            lane = self.lane_at(event.scenePos())
            if lane >= 0:
                self.clicked.emit(lane)
