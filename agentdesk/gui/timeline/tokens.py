"""Cumulative tokens (left axis) and cost (right axis) over the run, x-linked to the waterfall."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QWidget

from agentdesk.gui.timeline.axes import CompactAxis
from agentdesk.gui.timeline.drawing import (
    cache_text_items,
    colour_axes,
    paint_once_per_change,
    repaint_as_one_rect,
    set_background,
    unlink_hidden_axes,
)
from agentdesk.store.analysis.layout.data import TokenSeries

INPUT_COLOUR = "#5b8def"
OUTPUT_COLOUR = "#2fa38b"
COST_COLOUR = "#e0a030"
RIGHT_AXIS_WIDTH = 64
FIT_PAD = 0.08
"""Room left above and below what is in view when the y axes are refitted (as the fit always had)."""
KEEP_FILL = 0.5
"""A y range is kept while what is in view fills at least this much of it."""
LEAD_PAD = 0.3
"""Room left on the side a pan carried the curve out of the y range: the pan goes on that way, and
with only `FIT_PAD` there a steady pan along a rising curve refitted both y axes (their ticks and
labels redrawn, the view's range plumbing run twice) every other frame. What is in view still
fills 1 / (1 + FIT_PAD + LEAD_PAD) ≈ 72 % of the range, above `KEEP_FILL`."""


EDGE_PX = 8.0
"""Step vertices are clamped this far outside the paint device (not just the view: Qt strokes the
parts of a dashed line outside the view but inside the device, under the view's clip, and they
set where the dashes fall). Each step is level or upright, so a clamped one covers exactly the
pixels the whole one would, and the fill stays a small polygon."""


class StepCurve(pg.GraphicsObject):
    """A cumulative series as steps (pyqtgraph's stepMode "left"), drawn in device pixels.

    `PlotCurveItem` rebuilt a QPainterPath on every pan and filled it in 50-point chunks, each
    reaching down to the fill level through the data transform (about 4 ms a frame for three
    curves). The samples handed over here are already one a pixel column, so the same vertices,
    in device pixels and clamped near the view, filled as one polygon and stroked as one path, set
    the same pixels in a fraction of that. `opts` holds what the legend's sample reads (pen, fill
    level and brush).
    """

    def __init__(self, pen: QPen, fill_level: float | None = None, brush: QBrush | QColor | None = None) -> None:
        super().__init__()
        self.opts: dict[str, Any] = {"pen": pen, "fillLevel": fill_level,
                                     "fillBrush": QBrush(brush) if brush is not None else None}
        self._x = self._y = np.zeros(0)
        self._bounds = QRectF()

    def setData(self, x: np.ndarray, y: np.ndarray) -> None:
        """The samples to draw (sorted x); the previous ones are dropped. The bounding rect stays
        (`set_extent`): changed on every pan, it made the scene re-index the item each frame."""
        self._x, self._y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        self.update()

    def set_extent(self, x: np.ndarray, y: np.ndarray) -> None:
        """What the whole series covers (sorted x), and the fill level: the item's bounding rect."""
        if len(x):
            self.set_bounds(float(x[0]), float(x[-1]), float(np.min(y)), float(np.max(y)))
        else:
            self.set_bounds(None)

    def set_bounds(self, x0: float | None, x1: float = 0.0, low: float = 0.0, high: float = 0.0) -> None:
        """`set_extent` from what the series covers, worked out by the caller (None: nothing): a
        live series grows by a sample, and its extent then follows from the tail alone."""
        bounds = QRectF()
        if x0 is not None:
            if self.opts["fillLevel"] is not None:
                low, high = min(low, self.opts["fillLevel"]), max(high, self.opts["fillLevel"])
            bounds = QRectF(x0, low, max(x1 - x0, 1e-9), max(high - low, 1e-9))
        if bounds != self._bounds:
            self.prepareGeometryChange()
            self._bounds = bounds

    def getData(self) -> tuple[np.ndarray, np.ndarray]:
        return self._x, self._y

    def boundingRect(self) -> QRectF:
        return QRectF(self._bounds)

    def paint(self, p: QPainter, *args: object) -> None:
        x, y = self._x, self._y
        if len(x) < 1:
            return
        tr = p.transform()
        sx, sy, dx, dy = tr.m11(), tr.m22(), tr.dx(), tr.dy()
        view = self.viewRect()
        if view is None or sx == 0 or sy == 0:
            return
        # vertices are clamped into the view widened by the whole device (see `EDGE_PX`)
        device = p.device()
        reach = EDGE_PX + 2.0 * max(device.width(), device.height()) if device is not None else 1e9
        xs = sorted((view.left() * sx + dx, view.right() * sx + dx))
        ys = sorted((view.top() * sy + dy, view.bottom() * sy + dy))
        xs, ys = [xs[0] - reach, xs[1] + reach], [ys[0] - reach, ys[1] + reach]
        n = len(x)
        level, brush = self.opts["fillLevel"], self.opts["fillBrush"]
        ends = 1 if level is not None else 0  # with a fill level, pyqtgraph's line drops to it at both ends
        points = pg.functions.create_qpolygonf(2 * n + 2 * ends)
        xy = pg.functions.ndarray_from_qpolygonf(points)
        steps = xy[ends:ends + 2 * n]
        # stepMode "left" as pyqtgraph lays it out: y[k] holds from x[k-1] to x[k], vertices
        # (x0, y0), (x0, y0), (x0, y1), (x1, y1), (x1, y2), …, (x[n-1], y[n-1])
        steps[0, 0] = x[0]
        steps[1::2, 0] = x
        steps[2::2, 0] = x[:-1]
        steps[0::2, 1] = y
        steps[1::2, 1] = y
        if ends:
            xy[0] = x[0], level
            xy[-1] = x[-1], level
        xy[:, 0] *= sx
        xy[:, 0] += dx
        xy[:, 1] *= sy
        xy[:, 1] += dy
        np.clip(xy[:, 0], xs[0], xs[1], out=xy[:, 0])
        np.clip(xy[:, 1], ys[0], ys[1], out=xy[:, 1])
        p.save()
        try:
            p.resetTransform()
            p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
            if ends and brush is not None and n > 1:  # the steps down to the fill level, closed along it
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(brush)
                p.drawPolygon(points)
            p.setPen(self.opts["pen"])
            p.setBrush(Qt.BrushStyle.NoBrush)
            line = QPainterPath()  # a path, not a polyline: Qt strokes the corners of each the way it
            line.addPolygon(points)  # drew pyqtgraph's path (a polyline leaves out some corner pixels)
            p.drawPath(line)
        finally:
            p.restore()


EMPTY_RANGES = ((0.0, 1.0), (0.0, 1e-4))
"""The y ranges (tokens, cost) while nothing has been used."""


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
        # `_redraw` hands the curves ready samples (one a pixel column) on every pan; `StepCurve`
        # draws them in one call each
        self.input_curve = StepCurve(pg.mkPen(INPUT_COLOUR, width=1))
        self.output_curve = StepCurve(pg.mkPen(OUTPUT_COLOUR, width=1))
        fill = QColor(COST_COLOUR)
        fill.setAlpha(40)
        self.cost_curve = StepCurve(pg.mkPen(COST_COLOUR, width=1, style=Qt.PenStyle.DashLine), 0.0, fill)
        for curve, name in ((self.input_curve, "input tokens"), (self.output_curve, "output tokens")):
            item.addItem(curve)
            self.legend.addItem(curve, name)
        self.cost_view.addItem(self.cost_curve)
        self.legend.addItem(self.cost_curve, "cost")
        self.legend.setColumnCount(3)
        # no clipToView or auto-downsampling: `_redraw` hands the curves at most one point a pixel
        # column, picked for the view (pyqtgraph's kept five, all redrawn and filled on every pan)
        item.vb.disableAutoRange()  # x follows the waterfall, y is fitted by `_fit_y`
        self.cost_view.disableAutoRange()
        item.vb.sigXRangeChanged.connect(self._redraw)
        item.vb.sigResized.connect(self._redraw)
        paint_once_per_change(item.vb)
        paint_once_per_change(self.cost_view)
        repaint_as_one_rect(self)
        cache_text_items(self)
        self.series: TokenSeries | None = None
        """The series shown, as given (not held flat: see `until`)."""
        self.until = 0.0
        """Where the curves are held flat to (the run's end, or now while it runs)."""
        self._extent: list[tuple[float, float]] | None = None
        """(min, max) of the input, output and cost columns of `series`."""
        self._drawn: tuple[object, ...] | None = None
        """What the curves were last given samples for (`_draw_key`)."""
        self._y_ranges: tuple[tuple[float, float], tuple[float, float]] | None = None
        self._last_x: tuple[float, float] | None = None
        """The x range `_fit_y` last saw: the same width moved along is a pan."""

    def _sync_views(self) -> None:
        vb = self.getPlotItem().vb
        self.cost_view.setGeometry(vb.sceneBoundingRect())
        self.cost_view.linkedViewChanged(vb, self.cost_view.XAxis)
        self._y_ranges = None

    def set_series(self, series: TokenSeries | None, until: float = 0.0, redraw: bool = True) -> None:
        """Show cumulative usage, held flat until `until` (the run's end, or now while it runs).

        The series is kept as given, not copied: the flat stretch to `until` is one sample added to
        the few drawn (`_samples`), and a live series that only grew at its end (`extends`) gets its
        extent from the new tail. At a million samples appending that one sample copied four
        arrays, and the extent reduced three, on every live refresh. `redraw=False` leaves the
        curves to `refresh` (the panel refits the view first, which would draw them again).
        """
        before, self.series, self.until = self.series, series, until
        if series is None or not len(series.t):
            self._extent = None
            for curve in self._curves():
                curve.set_bounds(None)
        else:
            grown = extends(series, before) if before is not None and self._extent is not None else -1
            columns = (series.input_tokens, series.output_tokens, series.cost)
            if grown < 0:
                self._extent = [(float(np.min(v)), float(np.max(v))) for v in columns]
            elif grown < len(series.t):  # only the new tail is looked at
                assert self._extent is not None
                self._extent = [(float(np.minimum(lo, np.min(v[grown:]))), float(np.maximum(hi, np.max(v[grown:]))))
                                for (lo, hi), v in zip(self._extent, columns, strict=True)]  # NaN spreads, as in np.min
            assert self._extent is not None
            x0, x1 = float(series.t[0]), max(float(series.t[-1]), until)
            for curve, (lo, hi) in zip(self._curves(), self._extent, strict=True):
                curve.set_bounds(x0, x1, lo, hi)
        self._drawn = None
        if redraw:
            self._redraw()

    def refresh(self) -> None:
        """Draw the curves unless what they show (series, view, width) was drawn already."""
        if self._drawn != self._draw_key():
            self._redraw()

    def _curves(self) -> tuple[StepCurve, StepCurve, StepCurve]:
        return self.input_curve, self.output_curve, self.cost_curve

    def _length(self) -> int:
        """Samples in the series as drawn: one more when it is held flat to `until`."""
        series = self.series
        if series is None or not len(series.t):
            return 0
        return len(series.t) + (1 if self.until > series.t[-1] else 0)

    def _draw_key(self) -> tuple[object, ...]:
        vb = self.getPlotItem().vb
        series = self.series
        return (id(series), len(series.t) if series is not None else 0, self.until, tuple(vb.viewRange()[0]),
                math.ceil(vb.width() * self.devicePixelRatioF()))

    def _redraw(self, *args: object) -> None:
        """Give the curves the samples that show at this zoom (a few hundred, not the whole run)."""
        series = self.series
        curves = self._curves()
        self._drawn = self._draw_key()
        if series is None or self._length() < 2:
            for curve in curves:
                curve.setData(np.zeros(0), np.zeros(0))
            self._fit_y()
            return
        vb = self.getPlotItem().vb
        x0, x1 = vb.viewRange()[0]
        keep, held = _samples(series.t, self.until, x0, x1, math.ceil(vb.width() * self.devicePixelRatioF()))
        t = series.t[keep]
        if held:  # the flat stretch to `until`: the last sample again, there
            t[-1] = self.until
        for curve, values in zip(curves, (series.input_tokens, series.output_tokens, series.cost), strict=True):
            curve.setData(t, values[keep])
        self._fit_y()

    def _fit_y(self) -> None:
        """Cumulative series: the visible range runs from the value at the left edge to the right's.

        A y range shown is kept while what is in view fits in it and fills at least half of it
        (`_keeps`): a pan along a rising curve would otherwise move both y axes, and redraw
        their ticks and labels, on every frame. A refit leaves `FIT_PAD` of room each side, and
        on a pan (the same width moved along) `LEAD_PAD` on the side the curve left the range by
        (see `_refit`): a zoom, a live run's growth or a first fit pad evenly, as they always did.
        """
        series = self.series
        if series is None or self._length() < 2:
            if self._y_ranges != EMPTY_RANGES:  # nothing used yet: zero at the bottom, never negative tokens
                self.getPlotItem().vb.setYRange(*EMPTY_RANGES[0], padding=0)
                self.cost_view.setYRange(*EMPTY_RANGES[1], padding=0)
                self._y_ranges = EMPTY_RANGES
            return
        x0, x1 = self.getPlotItem().vb.viewRange()[0]
        last, self._last_x = self._last_x, (x0, x1)
        panned = last is not None and last[0] != x0 and abs((last[1] - last[0]) - (x1 - x0)) <= 1e-9 * (x1 - x0)
        i0, i1 = (max(0, int(np.searchsorted(series.t, x, side="right")) - 1) for x in (x0, x1))
        lo = min(series.input_tokens[i0], series.output_tokens[i0])
        hi = max(series.input_tokens[i1], series.output_tokens[i1])
        wanted = _span(float(lo), float(hi), 1.0), _span(float(series.cost[i0]), float(series.cost[i1]), 1e-4)
        shown = self._y_ranges or (None, None)
        ranges = []
        for view, want, have in zip((self.getPlotItem().vb, self.cost_view), wanted, shown, strict=True):
            if have is None or not _keeps(have, want):
                have = _refit(have if panned else None, want)
                view.setYRange(*have, padding=0)
            ranges.append(have)
        self._y_ranges = ranges[0], ranges[1]

    def apply_colours(self, background: QColor, text: QColor, muted: QColor) -> None:
        set_background(self, background)
        item = self.getPlotItem()
        colour_axes(item, ("left", "right"), text, muted)
        self.legend.setLabelTextColor(text)
        for _sample, label in self.legend.items:
            label.setText(label.text, color=text)


def extends(series: TokenSeries, before: TokenSeries) -> int:
    """How long `before` was when `series` is it grown at the end (its arrays views of the same
    buffers from the same start: `token_series_after` writes a live sample into the room after
    them, and the samples before it stay as they were); -1 when it is another series."""
    if len(series.t) < len(before.t):
        return -1
    for new, old in zip((series.t, series.input_tokens, series.output_tokens, series.cost),
                        (before.t, before.input_tokens, before.output_tokens, before.cost), strict=True):
        if new is old:
            continue
        if new.dtype != old.dtype or new.ctypes.data != old.ctypes.data or new.strides != old.strides \
                or _buffer(new) is not _buffer(old):
            return -1
    return len(before.t)


def _buffer(array: np.ndarray) -> object:
    return array.base if array.base is not None else array


def _samples(t: np.ndarray, until: float, x0: float, x1: float, columns: int) -> tuple[np.ndarray, bool]:
    """`step_samples` of the series held flat to `until` (one sample more, at `until`, when that is
    past the last), without building that series: indices into `t` (the held sample as the last
    one's index), and whether the last index picked stands for the held sample. The indices come
    out sorted, so repeats go by comparing neighbours (`np.unique` sorted them again)."""
    n = len(t)
    held = n > 0 and until > t[-1]
    if not n or columns < 1 or not x1 > x0:
        return (np.append(np.arange(n), n - 1), True) if held else (np.arange(n), False)
    edges = np.linspace(x0, x1, columns + 1)
    last = np.searchsorted(t, edges, side="right") - 1
    if held:
        last[edges >= until] = n  # the held sample, at `until`, is the last at or before these edges
    keep = np.clip(np.append(last, last[-1] + 1), 0, n if held else n - 1)
    keep = keep[np.concatenate(([True], keep[1:] != keep[:-1]))]
    picked = held and bool(keep[-1] == n)
    if picked:
        keep[-1] = n - 1
    return keep, picked


def _keeps(shown: tuple[float, float], wanted: tuple[float, float]) -> bool:
    """Whether a y range shown still fits what is in view: all of it, filling at least half."""
    return shown[0] <= wanted[0] and wanted[1] <= shown[1] and \
        wanted[1] - wanted[0] >= KEEP_FILL * (shown[1] - shown[0])


def _refit(shown: tuple[float, float] | None, wanted: tuple[float, float]) -> tuple[float, float]:
    """The y range for what is in view: `FIT_PAD` of room each side, `LEAD_PAD` on the one side the
    curve went past the range shown by a pan (None: not a pan, even room)."""
    spread = wanted[1] - wanted[0]
    low = high = spread * FIT_PAD
    above, below = shown is not None and wanted[1] > shown[1], shown is not None and wanted[0] < shown[0]
    if above != below:  # out on one side only: a pan (a zoom out leaves on both)
        high, low = (spread * LEAD_PAD, low) if above else (high, spread * LEAD_PAD)
    return wanted[0] - low, wanted[1] + high


def _span(lo: float, hi: float, least: float) -> tuple[float, float]:
    """The y range of a cumulative curve over the view; flat stretches show from zero, not a sliver."""
    return (lo, hi) if hi - lo > 1e-6 * max(abs(hi), least) else (0.0, max(hi, least))
