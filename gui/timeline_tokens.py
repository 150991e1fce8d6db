"""Cumulative tokens (left axis) and cost (right axis) over the run, x-linked to the waterfall."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from model.timeline_data import TokenSeries

from .timeline_axes import CompactAxis

INPUT_COLOUR = "#5b8def"
OUTPUT_COLOUR = "#2fa38b"
COST_COLOUR = "#e0a030"
RIGHT_AXIS_WIDTH = 64


class TokensPlot(pg.PlotWidget):
    def __init__(self, left_axis_width: int, parent: QWidget | None = None) -> None:
        super().__init__(parent, axisItems={"left": CompactAxis("left"), "right": CompactAxis("right")})
        item = self.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=True, y=False)
        item.hideAxis("bottom")
        item.getAxis("left").setWidth(left_axis_width)
        item.setLabel("left", "tokens")
        item.showAxis("right")
        right = item.getAxis("right")
        right.setWidth(RIGHT_AXIS_WIDTH)
        right.setLabel("cost $")
        self.cost_view = pg.ViewBox(enableMenu=False)
        self.cost_view.setMouseEnabled(x=False, y=False)
        item.scene().addItem(self.cost_view)
        right.linkToView(self.cost_view)
        self.cost_view.setXLink(item.vb)
        item.vb.sigResized.connect(self._sync_views)
        self.legend = item.addLegend(offset=(8, 4), brush=None)
        self.input_curve = item.plot(pen=pg.mkPen(INPUT_COLOUR, width=1), stepMode="left",
                                     name="input tokens")
        self.output_curve = item.plot(pen=pg.mkPen(OUTPUT_COLOUR, width=1), stepMode="left",
                                      name="output tokens")
        self.cost_curve = pg.PlotDataItem(pen=pg.mkPen(COST_COLOUR, width=1, style=Qt.PenStyle.DashLine),
                                          stepMode="left", name="cost")
        self.cost_view.addItem(self.cost_curve)
        self.legend.addItem(self.cost_curve, "cost")
        self.legend.setColumnCount(3)
        for curve in (self.input_curve, self.output_curve, self.cost_curve):
            curve.setClipToView(True)
            curve.setDownsampling(auto=True, method="subsample")  # cumulative, so subsampling is faithful
        item.vb.disableAutoRange(axis="x")  # x follows the waterfall; clip-to-view needs this off
        item.vb.enableAutoRange(axis="y")
        item.vb.setAutoVisible(y=True)
        self.cost_view.enableAutoRange(axis="y")
        self.cost_view.setAutoVisible(y=True)

    def _sync_views(self) -> None:
        vb = self.getPlotItem().vb
        self.cost_view.setGeometry(vb.sceneBoundingRect())
        self.cost_view.linkedViewChanged(vb, self.cost_view.XAxis)

    def set_series(self, series: TokenSeries | None) -> None:
        if series is None or len(series.t) < 2:
            for curve in (self.input_curve, self.output_curve, self.cost_curve):
                curve.setData([], [])
            return
        self.input_curve.setData(series.t, series.input_tokens)
        self.output_curve.setData(series.t, series.output_tokens)
        self.cost_curve.setData(series.t, series.cost)

    def apply_colours(self, background: QColor, text: QColor, muted: QColor) -> None:
        self.setBackground(background)
        item = self.getPlotItem()
        for name in ("left", "right"):
            axis = item.getAxis(name)
            axis.setPen(muted)
            axis.setTextPen(text)
        self.legend.setLabelTextColor(text)
