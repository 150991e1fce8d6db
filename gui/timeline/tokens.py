"""Cumulative tokens (left axis) and cost (right axis) over the run, x-linked to the waterfall."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from agentdesk.gui.timeline.axes import CompactAxis
from agentdesk.gui.timeline.drawing import colour_axes, paint_once_per_change, unlink_hidden_axes
from agentdesk.model.timeline.data import TokenSeries, step_samples

INPUT_COLOUR = "#5b8def"
OUTPUT_COLOUR = "#2fa38b"
COST_COLOUR = "#e0a030"
RIGHT_AXIS_WIDTH = 64
FIT_PAD = 0.08
"""Room left above and below what is in view when the y axes are refitted (as the fit always had)."""
KEEP_FILL = 0.5
"""A y range is kept while what is in view fills at least this much of it."""


class TokensPlot(pg.PlotWidget):
    def __init__(self, left_axis_width: int, parent: QWidget | None = None) -> None:
        super().__init__(parent, axisItems={"left": CompactAxis("left"), "right": CompactAxis("right")})
        item = self.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=True, y=False)
        item.hideAxis("bottom")
        unlink_hidden_axes(item, ("top", "bottom"))
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
        # curves, not PlotDataItems: `_redraw` hands them ready samples on every pan, and the data
        # item's bookkeeping around each setData (display dataset, bounds, signals) cost more than
        # the curve; the samples are finite, so the finite check is skipped too
        self.input_curve = pg.PlotCurveItem(pen=pg.mkPen(INPUT_COLOUR, width=1), stepMode="left",
                                            name="input tokens", skipFiniteCheck=True)
        self.output_curve = pg.PlotCurveItem(pen=pg.mkPen(OUTPUT_COLOUR, width=1), stepMode="left",
                                             name="output tokens", skipFiniteCheck=True)
        item.addItem(self.input_curve)
        item.addItem(self.output_curve)
        fill = QColor(COST_COLOUR)
        fill.setAlpha(40)
        self.cost_curve = pg.PlotCurveItem(pen=pg.mkPen(COST_COLOUR, width=1, style=Qt.PenStyle.DashLine),
                                           stepMode="left", name="cost", fillLevel=0.0, brush=fill,
                                           skipFiniteCheck=True)
        self.cost_view.addItem(self.cost_curve)
        # the legend draws its swatch from a data item's options (a curve's fill is not shown there)
        self._cost_sample = pg.PlotDataItem(pen=self.cost_curve.opts["pen"], fillLevel=0.0, brush=fill)
        self.legend.addItem(self._cost_sample, "cost")
        self.legend.setColumnCount(3)
        # no clipToView or auto-downsampling: `_redraw` hands the curves at most one point a pixel
        # column, picked for the view (pyqtgraph's kept five, all redrawn and filled on every pan)
        item.vb.disableAutoRange()  # x follows the waterfall, y is fitted by `_fit_y`
        self.cost_view.disableAutoRange()
        item.vb.sigXRangeChanged.connect(self._redraw)
        item.vb.sigResized.connect(self._redraw)
        paint_once_per_change(item.vb)
        paint_once_per_change(self.cost_view)
        self.series: TokenSeries | None = None
        self._y_ranges: tuple[tuple[float, float], tuple[float, float]] | None = None

    def _sync_views(self) -> None:
        vb = self.getPlotItem().vb
        self.cost_view.setGeometry(vb.sceneBoundingRect())
        self.cost_view.linkedViewChanged(vb, self.cost_view.XAxis)
        self._y_ranges = None

    def set_series(self, series: TokenSeries | None, until: float = 0.0) -> None:
        """Show cumulative usage, held flat until `until` (the run's end, or now while it runs)."""
        if series is not None and len(series.t) and until > series.t[-1]:
            series = TokenSeries(*(np.append(column, column[-1]) for column in
                                   (series.t, series.input_tokens, series.output_tokens, series.cost)))
            series.t[-1] = until
        self.series = series
        self._redraw()

    def _redraw(self, *args: object) -> None:
        """Give the curves the samples that show at this zoom (a few hundred, not the whole run)."""
        series = self.series
        curves = (self.input_curve, self.output_curve, self.cost_curve)
        if series is None or len(series.t) < 2:
            for curve in curves:
                curve.setData([], [])
            return
        vb = self.getPlotItem().vb
        x0, x1 = vb.viewRange()[0]
        keep = step_samples(series.t, x0, x1, math.ceil(vb.width() * self.devicePixelRatioF()))
        t = series.t[keep]
        for curve, values in zip(curves, (series.input_tokens, series.output_tokens, series.cost), strict=True):
            curve.setData(t, values[keep])
        self._fit_y()

    def _fit_y(self) -> None:
        """Cumulative series: the visible range runs from the value at the left edge to the right's.

        A y range shown is kept while what is in view fits in it and fills at least half of it
        (`_keeps`): a pan along a rising curve would otherwise move both y axes, and redraw
        their ticks and labels, on every frame. A refit leaves `FIT_PAD` of room each side.
        """
        series = self.series
        if series is None or len(series.t) < 2:
            return
        x0, x1 = self.getPlotItem().vb.viewRange()[0]
        i0, i1 = (max(0, int(np.searchsorted(series.t, x, side="right")) - 1) for x in (x0, x1))
        lo = min(series.input_tokens[i0], series.output_tokens[i0])
        hi = max(series.input_tokens[i1], series.output_tokens[i1])
        wanted = _span(float(lo), float(hi), 1.0), _span(float(series.cost[i0]), float(series.cost[i1]), 1e-4)
        shown = self._y_ranges or (None, None)
        ranges = []
        for view, want, have in zip((self.getPlotItem().vb, self.cost_view), wanted, shown, strict=True):
            if have is None or not _keeps(have, want):
                pad = (want[1] - want[0]) * FIT_PAD
                have = (want[0] - pad, want[1] + pad)
                view.setYRange(*have, padding=0)
            ranges.append(have)
        self._y_ranges = ranges[0], ranges[1]

    def apply_colours(self, background: QColor, text: QColor, muted: QColor) -> None:
        self.setBackground(background)
        item = self.getPlotItem()
        colour_axes(item, ("left", "right"), text, muted)
        self.legend.setLabelTextColor(text)
        for _sample, label in self.legend.items:
            label.setText(label.text, color=text)


def _keeps(shown: tuple[float, float], wanted: tuple[float, float]) -> bool:
    """Whether a y range shown still fits what is in view: all of it, filling at least half."""
    return shown[0] <= wanted[0] and wanted[1] <= shown[1] and \
        wanted[1] - wanted[0] >= KEEP_FILL * (shown[1] - shown[0])


def _span(lo: float, hi: float, least: float) -> tuple[float, float]:
    """The y range of a cumulative curve over the view; flat stretches show from zero, not a sliver."""
    return (lo, hi) if hi - lo > 1e-6 * max(abs(hi), least) else (0.0, max(hi, least))
