"""The waterfall's axes: time since run start at the bottom, one indented label per lane on the left."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPicture, QPixmap

from agentdesk.gui.shared.palette import ERROR_COLOUR, RUNNING_COLOUR, kind_colour
from agentdesk.gui.timeline.drawing import (
    StaticTexts,
    compact,
    one_line,
    paint_once_per_change,
    time_label,
    unlink_hidden_axes,
)
from agentdesk.model.timeline.data import ERROR, RUNNING, TimelineData
from agentdesk.model.timeline.rows import Rows

log = logging.getLogger(__name__)

NICE_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600,
              86400)
INDENT_PX = 12
MAX_INDENT_LEVELS = 10
MIN_LABEL_LANE_PX = 11.0
DISCLOSURE_PX = 10


class DirectAxis(pg.AxisItem):
    """An axis drawn once per change into a pixmap, and only copied while nothing about it changes.

    pyqtgraph records an axis into a QPicture and replays it on every paint; replaying the tick
    labels lays their text out again, and a pan repaints the axes beside the view as well. Here
    the draw specs and their pixels are worked out only when pyqtgraph drops its picture (ticks,
    range, size, pens or fonts changed), a range set to what it already is drops nothing (a pan
    along x sets the unchanged y range of the axes beside it on every frame), and every other
    paint is one pixmap copy.
    """

    picture: QPicture | None

    def __init__(self, orientation: str) -> None:
        super().__init__(orientation)
        self._pixels: tuple[tuple[object, ...], QPixmap] | None = None
        self.renders = 0
        """How many times the axis was drawn afresh (the rest were copies): tests read it."""

    def setRange(self, mn: float, mx: float) -> None:
        if self.picture is not None and [mn, mx] == list(self.range):
            return  # the same range: the ticks, the labels and their pixels stay as they are
        super().setRange(mn, mx)

    def paint(self, p: QPainter, *args: object) -> None:
        try:
            rect = self.boundingRect()
            device = p.device()
            dpr = device.devicePixelRatioF() if device is not None else 1.0
            font = self.style["tickFont"] or QFont()  # the font pyqtgraph's QPicture starts with
            key = (rect.getRect(), dpr, font.toString())
            if self.picture is None or self._pixels is None or self._pixels[0] != key:
                self._pixels = key, self._render(rect, dpr, font)
                self.picture = _SPECS_CURRENT  # pyqtgraph clears it whenever ticks, range or size change
            p.drawPixmap(rect.topLeft(), self._pixels[1])
        except Exception:  # a broken axis must never take the window down
            log.exception("axis failed to paint")

    def _render(self, rect: QRectF, dpr: float, font: QFont) -> QPixmap:
        self.renders += 1
        pixmap = QPixmap(max(1, math.ceil(rect.width() * dpr)), max(1, math.ceil(rect.height() * dpr)))
        pixmap.setDevicePixelRatio(dpr)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        try:
            painter.translate(-rect.topLeft())
            painter.setFont(font)
            specs = self.generateDrawSpecs(painter)
            if specs is not None:
                self.drawPicture(painter, *specs)
        finally:
            painter.end()
        return pixmap


_SPECS_CURRENT = QPicture()


class BlankAxis(DirectAxis):
    """An axis with no ticks, there for its width (the waterfall's right margin lines up with the
    cost axis below it): its pixels never depend on the range, so a range change keeps them."""

    def __init__(self, orientation: str) -> None:
        super().__init__(orientation)
        self.setStyle(showValues=False, tickLength=0)
        self.setTicks([[], []])

    def setRange(self, mn: float, mx: float) -> None:
        self.range = [mn, mx]


class TimeAxis(DirectAxis):
    """Seconds since the run started, stepping in seconds, minutes and hours an operator reads."""

    def __init__(self, orientation: str = "bottom") -> None:
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)

    def tickSpacing(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, float]]:
        span = maxVal - minVal
        if span <= 0 or size <= 0:
            return []
        target = span * 90 / size
        if target < 1:
            decade = 10 ** math.floor(math.log10(target))
            step = next(m * decade for m in (1, 2, 5, 10) if m * decade >= target)
        else:
            step = next((s for s in NICE_STEPS if s >= target), NICE_STEPS[-1] * math.ceil(target / 86400))
        return [(step, 0.0)]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [time_label(v, spacing) for v in values]


class CompactAxis(DirectAxis):
    """Counts and money as 1.2k, 3.4M: narrow and readable at any magnitude."""

    def __init__(self, orientation: str) -> None:
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [compact(v) for v in values]


class LaneAxis(pg.AxisItem):
    """Lane names indented by depth when lanes are tall enough; else the tree's outline.

    Painted from the layout arrays, so only the visible lanes cost anything, into a picture kept
    while the lanes shown stay the same: a pan along time, the commonest move, just copies it.
    A span with children has a disclosure mark (▾ expanded, ▸ collapsed with the count folded into
    it); a click on the mark emits `toggled` with the row.
    """

    toggled = Signal(int)
    """A row's disclosure mark was clicked."""

    def __init__(self, data: Callable[[], TimelineData | None], rows: Callable[[], Rows | None] = lambda: None
                 ) -> None:
        super().__init__("left")
        self._data = data
        self._rows = rows
        self.text_colour = QColor("#202020")
        self.muted_colour = QColor("#808080")
        self.background = QColor("#ffffff")
        """The plot's: the picture is opaque, so its text is antialiased as if drawn directly."""
        self._picture: tuple[tuple[object, ...], QPixmap] | None = None
        self._texts = StaticTexts()
        self._error, self._running = QColor(ERROR_COLOUR), QColor(RUNNING_COLOUR)
        self.setWidth(190)
        self.setStyle(showValues=False)
        self.enableAutoSIPrefix(False)  # else every vertical pan sets the (empty) axis label's HTML again

    def paint(self, p: QPainter, *args: object) -> None:
        try:
            data, view = self._data(), self.linkedView()
            if data is not None and view is not None and len(data):
                self._paint_cached(p, data, view)
        except Exception:  # a broken label must never take the window down
            log.exception("lane labels failed to paint")

    def _paint_cached(self, p: QPainter, data: TimelineData, view: pg.ViewBox) -> None:
        rect = self.mapRectFromParent(self.geometry())
        device = p.device()
        dpr = device.devicePixelRatioF() if device is not None else 1.0
        rows = self._rows()
        top, bottom = view.viewRange()[1]
        lane_px = rect.height() / max(bottom - top, 1e-9)
        # zoomed out, the column only says how many rows are in view: it changes with that count
        shown = (top, bottom) if lane_px >= MIN_LABEL_LANE_PX else \
            ("summary", max(0, math.floor(top)), min(len(data), math.ceil(bottom)))
        key = (data, data.version, id(rows), shown, rect.getRect(), dpr, p.font().toString(),
               self.text_colour.rgba(), self.muted_colour.rgba(), self.background.rgba())
        if self._picture is None or self._picture[0] != key:
            pixmap = QPixmap(max(1, math.ceil(rect.width() * dpr)), max(1, math.ceil(rect.height() * dpr)))
            pixmap.setDevicePixelRatio(dpr)
            pixmap.fill(self.background)
            painter = QPainter(pixmap)
            try:
                painter.setFont(p.font())
                painter.translate(-rect.topLeft())
                self._paint(painter, data, view, rect)
            finally:
                painter.end()
            self._picture = key, pixmap
        p.drawPixmap(rect.topLeft(), self._picture[1])

    def _paint(self, p: QPainter, data: TimelineData, view: pg.ViewBox, rect: QRectF) -> None:
        top, bottom = view.viewRange()[1]
        if bottom <= top or rect.height() <= 0:
            return
        lane_px = rect.height() / (bottom - top)
        lo, hi = max(0, math.floor(top)), min(len(data), math.ceil(bottom))
        if lo >= hi:
            return
        p.setPen(self.muted_colour)
        p.drawLine(int(rect.right()) - 1, int(rect.top()), int(rect.right()) - 1, int(rect.bottom()))
        if lane_px >= MIN_LABEL_LANE_PX:
            self._labels(p, data, lo, hi, top, lane_px, rect)
        else:
            self._summary(p, data, lo, hi, rect)

    def _labels(self, p: QPainter, data: TimelineData, lo: int, hi: int, top: float, lane_px: float,
                rect: QRectF) -> None:
        font = p.font()
        metrics = QFontMetrics(font)
        box = max(6, min(10, int(lane_px * 0.6)))
        rows = self._rows()
        folding = rows is not None and len(rows) == len(data)
        text_dy = (lane_px - metrics.height()) / 2  # as AlignVCenter centres a line in the lane
        self._texts.start(font)
        for lane in range(lo, hi):
            y = rect.top() + (lane - top) * lane_px
            x = rect.left() + 4 + min(int(data.depth[lane]), MAX_INDENT_LEVELS) * INDENT_PX
            if folding and rows is not None and lane < len(rows):
                if rows.has_children[lane]:
                    p.setPen(self.muted_colour if not rows.folded[lane] else self.text_colour)
                    mark = self._texts.text("▸" if rows.folded[lane] else "▾")
                    p.drawStaticText(QPointF(x - 1 + (DISCLOSURE_PX - mark.size().width()) / 2, y + text_dy), mark)
                x += DISCLOSURE_PX
            p.fillRect(QRectF(x, y + (lane_px - box) / 2, box, box), kind_colour(data.kind_names[lane]))
            status = data.status[lane]
            prefix = "✖ " if status == ERROR else "● " if status == RUNNING else ""  # ▶ would read as a fold mark
            colour = self._error if status == ERROR else self._running if status == RUNNING else self.text_colour
            width = rect.right() - 6 - (x + box + 4)
            count = ""
            if rows is not None and lane < len(rows) and rows.folded[lane]:
                count = f" +{compact(int(rows.folded[lane]))}"  # the count stays whole; the name elides
                width -= self._texts.text(count).size().width()
            name = self._texts.elided(prefix + one_line(data.names[lane]), int(max(width, 0)), metrics)
            p.setPen(colour)
            p.drawStaticText(QPointF(x + box + 4, y + text_dy), name)
            if count:
                p.setPen(self.muted_colour)
                p.drawStaticText(QPointF(x + box + 4 + name.size().width(), y + text_dy), self._texts.text(count))

    def row_at(self, y: float) -> int:
        """The row under a y in this axis's coordinates; -1 outside the rows or when labels are off."""
        data, view = self._data(), self.linkedView()
        if data is None or view is None:
            return -1
        rect = self.mapRectFromParent(self.geometry())
        top, bottom = view.viewRange()[1]
        lane_px = rect.height() / max(bottom - top, 1e-9)
        row = math.floor(top + (y - rect.top()) / lane_px)
        return row if lane_px >= MIN_LABEL_LANE_PX and 0 <= row < len(data) else -1

    def disclosure_x(self, row: int) -> float:
        """Where a row's disclosure mark starts (axis coordinates)."""
        data = self._data()
        depth = int(data.depth[row]) if data is not None and 0 <= row < len(data) else 0
        return self.mapRectFromParent(self.geometry()).left() + 4 + min(depth, MAX_INDENT_LEVELS) * INDENT_PX

    def mouseClickEvent(self, event: Any) -> None:
        """A click on a disclosure mark (or anywhere on a foldable row's label) folds or unfolds it."""
        rows = self._rows()
        row = self.row_at(event.pos().y())
        if event.button() == Qt.MouseButton.LeftButton and rows is not None and 0 <= row < len(rows) \
                and rows.has_children[row]:
            event.accept()
            self.toggled.emit(row)
            return
        super().mouseClickEvent(event)

    def _summary(self, p: QPainter, data: TimelineData, lo: int, hi: int, rect: QRectF) -> None:
        """Too many lanes to name: say how many there are and how to get to the names."""
        p.setPen(self.text_colour)
        rows = self._rows()
        folded = int(rows.folded.sum()) if rows is not None and len(rows) == len(data) else 0
        text = f"{hi - lo:,} of {len(data):,} {'rows' if folded else 'spans'} here."
        if folded:
            text += f"\n{folded:,} more spans are in collapsed rows (▸)."
        p.drawText(rect.adjusted(4, 0, -6, 0), int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap),
                   text + "\nZoom in (wheel, +) to read their names.")


def waterfall_plot(lanes: LaneAxis, right_width: int) -> pg.PlotWidget:
    """The waterfall's plot: lanes down the left, time along the bottom, and on the right a blank
    axis as wide as the cost axis below, so both plots share their x pixels."""
    plot = pg.PlotWidget(axisItems={"left": lanes, "bottom": TimeAxis("bottom"), "right": BlankAxis("right")})
    plot.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
    item = plot.getPlotItem()
    item.setMenuEnabled(False)
    item.hideButtons()
    item.setLabel("bottom", "time since run start")
    item.showAxis("right")
    item.getAxis("right").setWidth(right_width)
    unlink_hidden_axes(item, ("top",))
    item.vb.invertY(True)
    item.vb.disableAutoRange()
    paint_once_per_change(item.vb)
    return plot
