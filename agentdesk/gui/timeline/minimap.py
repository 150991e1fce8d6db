"""The strip above the waterfall: the whole run at a glance, and the part of it the waterfall shows.

Per pixel column it draws how many spans are active (from the run's overview
grid, so a million spans cost nothing per paint), failures in red, search
matches and the critical path as marks, and the visible time window as a
rectangle: drag it (or click beside it) to move the waterfall.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QSizePolicy, QWidget

from agentdesk.gui.shared.palette import ERROR_COLOUR
from agentdesk.gui.timeline.drawing import draw_rects
from agentdesk.gui.timeline.span_item import MATCH_COLOUR, PATH_COLOUR
from agentdesk.store.analysis.layout.overview import Overview

HEIGHT_PX = 34


def resampled(values: np.ndarray, columns: int, reduce: str = "max") -> np.ndarray:
    """`values` (one per overview column) as `columns` pixel columns: the max (or sum) of the
    overview columns each pixel covers, so a narrow peak is never sampled away."""
    if columns <= 0 or not len(values):
        return np.zeros(max(columns, 0))
    edges = np.linspace(0, len(values), columns + 1).astype(np.int64)
    edges[1:] = np.maximum(edges[1:], edges[:-1] + 1)
    edges = np.minimum(edges, len(values))
    starts = np.minimum(edges[:-1], len(values) - 1)
    op = np.maximum if reduce == "max" else np.add
    return np.asarray(op.reduceat(values, starts), dtype=np.float64)


class Minimap(QWidget):
    window_moved = Signal(float, float)
    """(start, end) seconds since run start: the operator moved the visible window."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFixedHeight(HEIGHT_PX)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(False)
        self.setToolTip("The whole run: spans active per column, failures in red, matches and the critical "
                        "path marked. Drag the rectangle to move the view.")
        self.overview: Overview | None = None
        self.shown = (0.0, 0.0)
        self.matches = np.zeros(0)
        """Start times (s since run start) of the search matches."""
        self.path = np.zeros((0, 2))
        """(start, end) of each critical-path span."""
        self.left_px, self.right_px = 0, 0
        """Margins so the strip's time axis lines up with the waterfall's plot area."""
        self.bar_colour, self.frame_colour = QColor("#8b949e"), QColor("#2f6fd0")
        self._drag: float | None = None
        self._version = 0
        """Counts changes of the marks (the overview's bars are compared column by column)."""
        self._strip: tuple[tuple[object, ...], QPixmap] | None = None
        """The drawn strip (bars, failures, marks), kept while only the window moves: a pan repaints
        the minimap on every frame, and that is then one pixmap copy and a rectangle."""
        self._drawn_columns: tuple[np.ndarray, np.ndarray] | None = None
        """Bar heights and failure ticks per pixel column in `_strip`: a live run's new grid (every
        refresh) changes a few columns, and only those are drawn again."""
        self._columns_of: tuple[Overview, object, tuple[np.ndarray, np.ndarray]] | None = None

    # -- state ------------------------------------------------------------------------------
    def set_overview(self, overview: Overview | None) -> None:
        self.overview = overview
        self.update()

    def set_window(self, start: float, end: float) -> None:
        if (start, end) != self.shown:
            self.shown = (start, end)
            self.update()

    def set_marks(self, matches: np.ndarray | None = None, path: np.ndarray | None = None) -> None:
        if matches is not None:
            self.matches = matches
        if path is not None:
            self.path = path
        self._version += 1
        self.update()

    def set_margins(self, left: int, right: int) -> None:
        if (left, right) != (self.left_px, self.right_px):
            self.left_px, self.right_px = left, right
            self.update()

    # -- geometry ---------------------------------------------------------------------------
    def _area(self) -> QRectF:
        return QRectF(self.left_px, 1, max(1, self.width() - self.left_px - self.right_px), self.height() - 2)

    def x_of(self, t: float | np.ndarray) -> float | np.ndarray:
        ov, area = self.overview, self._area()
        if ov is None:
            return area.left()
        return area.left() + (t - ov.x0) / max(ov.x1 - ov.x0, 1e-12) * area.width()

    def t_of(self, x: float) -> float:
        ov, area = self.overview, self._area()
        if ov is None:
            return 0.0
        return ov.x0 + (x - area.left()) / area.width() * (ov.x1 - ov.x0)

    # -- painting ---------------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        try:
            self._paint(p)
        finally:
            p.end()

    def _paint(self, p: QPainter) -> None:
        area = self._area()
        ov = self.overview
        if ov is None or not ov.lanes:
            p.fillRect(area, self.palette().base())
            return
        dpr = self.devicePixelRatioF()
        heights, ticks = self._columns(area, ov)
        marked = len(self.path) or len(self.matches)
        key = (self._version, area.getRect(), dpr, self.palette().base().color().rgba(),
               self.bar_colour.rgba(), (ov.x0, ov.x1) if marked else None)
        kept = self._strip is not None and self._strip[0] == key and self._drawn_columns is not None \
            and len(self._drawn_columns[0]) == len(heights)
        if not kept:
            pixmap = QPixmap(max(1, round(self.width() * dpr)), max(1, round(self.height() * dpr)))
            pixmap.setDevicePixelRatio(dpr)
            pixmap.fill(Qt.GlobalColor.transparent)
            self._draw_strip(pixmap, area, heights, ticks, 0, len(heights))
            self._strip = key, pixmap
        else:
            assert self._strip is not None and self._drawn_columns is not None
            old_heights, old_ticks = self._drawn_columns
            changed = np.flatnonzero((heights != old_heights) | (ticks != old_ticks))
            if len(changed):  # only the columns that changed, over what was drawn
                self._draw_strip(self._strip[1], area, heights, ticks, int(changed[0]), int(changed[-1]) + 1)
        self._drawn_columns = heights, ticks
        p.drawPixmap(0, 0, self._strip[1])
        self._frame(p, area)

    def _columns(self, area: QRectF, ov: Overview) -> tuple[np.ndarray, np.ndarray]:
        """Per pixel column: the bar's height (spans active) and the failure tick's (0: none);
        kept for the same grid and strip (a pan repaints with neither changed)."""
        if self._columns_of is not None and self._columns_of[0] is ov and self._columns_of[1] == area.getRect():
            return self._columns_of[2]
        columns = int(area.width())
        active = resampled(ov.active.astype(np.float64), columns)
        peak = max(float(active.max()), 1.0)
        bars = area.height() - 8  # room below for the marks
        heights = np.sqrt(active / peak) * bars  # a square root: a quiet stretch still shows
        # failures: a red tick along the top, taller where more failed (a run with a failure in
        # every column must not turn the whole strip red)
        failed = resampled(ov.failed.astype(np.float64), columns, "sum")
        ticks = np.zeros(len(failed))
        xs = np.flatnonzero(failed > 0)
        ticks[xs] = 3 + 5 * np.sqrt(failed[xs] / max(float(failed.max(initial=0)), 1.0))
        self._columns_of = ov, area.getRect(), (heights, ticks)
        return heights, ticks

    def _draw_strip(self, pixmap: QPixmap, area: QRectF, heights: np.ndarray, ticks: np.ndarray,
                    first: int, end: int) -> None:
        """Draw pixel columns `first` to `end` of the strip: bars and ticks are a pixel column
        each, so those columns (clipped, over the rest as it was) come out as the whole strip would."""
        p = QPainter(pixmap)
        try:
            if first > 0 or end < len(heights):
                p.setClipRect(QRectF(area.left() + first, area.top(), end - first, area.height()))
            p.fillRect(area, self.palette().base())
            self._paint_strip(p, area, heights, ticks, first, end)
        finally:
            p.end()

    def _paint_strip(self, p: QPainter, area: QRectF, heights: np.ndarray, ticks: np.ndarray,
                     first: int = 0, end: int | None = None) -> None:
        bars = area.height() - 8
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(self.bar_colour)
        xs = first + np.flatnonzero(heights[first:end] > 0)  # one rectangle per pixel column at most, in one call
        h = heights[xs]
        draw_rects(p, np.column_stack((area.left() + xs, area.top() + bars - h, np.ones(len(xs)), h)))
        xs = first + np.flatnonzero(ticks[first:end] > 0)
        p.setBrush(QColor(ERROR_COLOUR))
        draw_rects(p, np.column_stack((area.left() + xs, np.full(len(xs), area.top()), np.ones(len(xs)), ticks[xs])))
        self._marks(p, area, bars)

    def _marks(self, p: QPainter, area: QRectF, bars: float) -> None:
        if len(self.path):
            p.setBrush(QColor(PATH_COLOUR))
            for start, end in self.path.tolist():
                x0, x1 = float(self.x_of(start)), float(self.x_of(end))
                p.drawRect(QRectF(x0, area.top() + bars + 1, max(x1 - x0, 1.0), 3))
        if len(self.matches):
            p.setBrush(QColor(MATCH_COLOUR))
            xs = np.unique(np.asarray(self.x_of(self.matches), dtype=np.float64).astype(np.int64))
            for x in xs.tolist():
                p.drawRect(QRectF(x, area.top() + bars + 4, 2, 4))

    def _frame(self, p: QPainter, area: QRectF) -> None:
        x0, x1 = float(self.x_of(self.shown[0])), float(self.x_of(self.shown[1]))
        x0, x1 = max(area.left(), x0), min(area.right(), max(x1, x0 + 3))
        fill = QColor(self.frame_colour)
        fill.setAlpha(40)
        p.setBrush(fill)
        p.setPen(QPen(self.frame_colour, 1.5))
        p.drawRect(QRectF(QPointF(x0, area.top()), QPointF(x1, area.bottom())))

    # -- dragging ---------------------------------------------------------------------------
    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton or self.overview is None:
            return
        t = self.t_of(event.position().x())
        start, end = self.shown
        if not start <= t <= end:  # beside the window: centre it there, then drag from the middle
            self._move_to(t - (end - start) / 2)
            start, end = self.shown
        self._drag = t - start

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._drag is not None:
            self._move_to(self.t_of(event.position().x()) - self._drag)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._drag = None

    def _move_to(self, start: float) -> None:
        width = self.shown[1] - self.shown[0]
        self.shown = (start, start + width)
        self.update()
        self.window_moved.emit(start, start + width)
