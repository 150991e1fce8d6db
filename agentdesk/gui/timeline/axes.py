"""The waterfall's axes: time since run start at the bottom, one indented label per lane on the left."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QFontMetricsF, QPainter, QPen, QPicture, QPixmap

from agentdesk.gui.shared.palette import ERROR_COLOUR, RUNNING_COLOUR, kind_colour
from agentdesk.gui.timeline.drawing import (
    StaticTexts,
    cache_text_items,
    compact,
    draw_hv_line,
    draw_lines,
    draw_rects,
    one_line,
    paint_once_per_change,
    repaint_as_one_rect,
    time_label,
    unlink_hidden_axes,
)
from agentdesk.store.analysis.layout.data import ERROR, RUNNING, TimelineData
from agentdesk.store.analysis.layout.rows import Rows

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
        # the room for the labels across the axis is set through the public style (`_fit_text_space`)
        self.setStyle(autoExpandTextSpace=False)
        self.fixed_ticks = False
        """Ticks set by `setTicks` (not from the range): drawn by pyqtgraph's general path."""
        self._pixels: tuple[tuple[object, ...], QPixmap] | None = None
        self._text_sizes: dict[tuple[str, str], tuple[float, float]] = {}
        self._texts = StaticTexts()
        self.renders = 0
        """How many times the axis was drawn afresh (the rest were copies): tests read it."""

    def setTicks(self, ticks: Any) -> None:
        self.fixed_ticks = ticks is not None
        super().setTicks(ticks)

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
            if self.fixed_ticks or self.grid is not False or any(self.style["stopAxisAtTick"]):
                specs = self.generateDrawSpecs(painter)  # fixed ticks, a grid: pyqtgraph's general path
                if specs is not None:
                    self.drawPicture(painter, *specs)
            else:
                self._draw_lean(painter)
        finally:
            painter.end()
        return pixmap

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, list[float]]]:
        """pyqtgraph's `tickValues`, the same values: a tick already on a coarser level (within 1 %
        of the spacing) is left out, found by a sorted search instead of comparing every pair
        (`np.isclose` three times per render was a quarter of an axis's redraw)."""
        if self.logMode:
            return list(super().tickValues(minVal, maxVal, size))
        lo, hi = sorted((minVal, maxVal))
        lo, hi = lo * self.scale, hi * self.scale
        ticks = []
        seen = np.zeros(0)
        for spacing, offset in self.tickSpacing(lo, hi, size):
            start = math.ceil((lo - offset) / spacing) * spacing + offset
            values = (np.arange(int((hi - start) / spacing) + 1) * spacing + start) / self.scale
            if len(seen) and len(values):
                tol = spacing / self.scale * 0.01
                at = np.searchsorted(seen, values)
                below, above = seen[np.maximum(at - 1, 0)], seen[np.minimum(at, len(seen) - 1)]
                values = values[(np.abs(values - below) > tol) & (np.abs(values - above) > tol)]
            seen = np.sort(np.concatenate((seen, values)))
            ticks.append((spacing / self.scale, values.tolist()))
        return ticks

    def _text_size(self, p: QPainter, font: str, text: str) -> tuple[float, float]:
        """Width and height of a tick label's `QPainter.boundingRect` (as pyqtgraph measures it,
        the height cut to 80 %), remembered per font: a zoom redraws the axis every frame, and the
        same few labels come back."""
        key = font, text
        found = self._text_sizes.get(key)
        if found is None:
            if len(self._text_sizes) > 4096:
                self._text_sizes.clear()
            rect = p.boundingRect(QRectF(0, 0, 100, 100), Qt.AlignmentFlag.AlignCenter, text)
            found = self._text_sizes[key] = rect.width(), rect.height() * 0.8
        return found

    def _draw_lean(self, p: QPainter) -> None:
        """What `generateDrawSpecs` and `drawPicture` draw (no grid, ticks from `tickValues`), in a
        fraction of their time: every tick of a level in one `drawLines`, label sizes remembered,
        no `Point` per tick. The time axis is drawn afresh on every pan and zoom frame."""
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        bounds = self.mapRectFromParent(self.geometry())
        orientation = self.orientation
        if orientation == "left":
            ends = (QPointF(bounds.right() - 1, bounds.top() - 1), QPointF(bounds.right() - 1, bounds.bottom() + 1))
            tick_stop, tick_dir, axis = bounds.right(), -1, 0
        elif orientation == "right":
            ends = (QPointF(bounds.left() + 1, bounds.top() - 1), QPointF(bounds.left() + 1, bounds.bottom() + 1))
            tick_stop, tick_dir, axis = bounds.left(), 1, 0
        elif orientation == "top":
            ends = (QPointF(bounds.left() - 1, bounds.bottom() - 1), QPointF(bounds.right() + 1, bounds.bottom() - 1))
            tick_stop, tick_dir, axis = bounds.bottom(), -1, 1
        else:
            ends = (QPointF(bounds.left() - 1, bounds.top() + 1), QPointF(bounds.right() + 1, bounds.top() + 1))
            tick_stop, tick_dir, axis = bounds.top(), 1, 1
        tick_start = tick_stop  # no grid: ticks start at the axis line
        device = [self.mapToDevice(point) for point in ends]
        if device[0] is None or device[1] is None:
            return
        length = math.hypot(device[1].x() - device[0].x(), device[1].y() - device[0].y())
        if length == 0:
            return
        levels = self.tickValues(self.range[0], self.range[1], length)
        dif = self.range[1] - self.range[0]
        if dif == 0:
            scale, offset = 1.0, 0.0
        elif axis == 0:
            scale = -bounds.height() / dif
            offset = self.range[0] * scale - bounds.height()
        else:
            scale = bounds.width() / dif
            offset = self.range[0] * scale
        lo, hi = sorted(x * scale - offset for x in self.range)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        draw_hv_line(p, self.pen(), ends[0].x(), ends[0].y(), ends[1].x(), ends[1].y())
        positions: list[list[float | None]] = []
        for i, (_spacing, values) in enumerate(levels):
            tick_length = self.style["tickLength"] / (i * 0.5 + 1.0)
            pen = self._tick_pen(i, length, len(values))
            xs = np.asarray(values, dtype=np.float64) * scale - offset
            inside = (xs >= lo) & (xs <= hi)
            positions.append([x if keep else None for x, keep in zip(xs.tolist(), inside.tolist(), strict=True)])
            if inside.any():
                shown = xs[inside]
                far = tick_stop + tick_length * tick_dir
                lines = np.empty((len(shown), 4))  # x1, y1, x2, y2 per tick: QLineF's memory
                lines[:, 0::2] = shown[:, None] if axis == 1 else (tick_start, far)
                lines[:, 1::2] = (tick_start, far) if axis == 1 else shown[:, None]
                p.setPen(pen)
                draw_lines(p, lines)
        if not self.style["showValues"]:
            return
        texts = self._lean_texts(p, levels, positions, length, axis, tick_stop)
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        p.setPen(self.textPen())
        p.setClipRect(self.boundingRect().toAlignedRect())
        # laid out once (QStaticText), placed as `drawText` aligns a line in its rectangle: by the
        # label's width and the font's line height
        laid = self._texts
        laid.start(p.font())
        line = QFontMetricsF(p.font()).height()
        if not texts:
            return
        # every label of an axis has its flags (`_lean_texts`): tested once, not per label (a
        # PySide6 flag test is a Python enum operation, ~3 µs: a third of a pan frame's axis)
        flags = texts[0][1]
        horizontal = 0 if flags & Qt.AlignmentFlag.AlignLeft else 1 if flags & Qt.AlignmentFlag.AlignRight else 2
        vertical = 0 if flags & Qt.AlignmentFlag.AlignTop else 1 if flags & Qt.AlignmentFlag.AlignBottom else 2
        for rect, _flags, text in texts:
            static = laid.text(text)
            width = static.size().width()
            x = rect.left() if horizontal == 0 else rect.right() - width if horizontal == 1 \
                else rect.center().x() - width / 2
            y = rect.top() if vertical == 0 else rect.bottom() - line if vertical == 1 else rect.center().y() - line / 2
            p.drawStaticText(QPointF(x, y), static)

    def _tick_pen(self, level: int, length: float, ticks: int) -> QPen:
        """The tick pen of a level, its alpha as `generateDrawSpecs` sets it (no grid)."""
        alpha = self.style["tickAlpha"]
        if alpha is None:
            alpha = 255 / (level + 1)
        elif isinstance(alpha, float):
            alpha = min(255, max(0, round(alpha * 255)))
        pen = self.tickPen()
        if pen.brush().style() == Qt.BrushStyle.SolidPattern:
            pen = QPen(pen)
            colour = QColor(pen.color())
            colour.setAlpha(int(alpha))
            pen.setColor(colour)
        return pen

    def _lean_texts(self, p: QPainter, levels: list[tuple[float, list[float]]], positions: list[list[float | None]],
                    length: float, axis: int, tick_stop: float) -> list[tuple[QRectF, int, str]]:
        """The labels `generateDrawSpecs` would place: level by level until they crowd (all with the
        one set of flags of the axis's side)."""
        specs: list[tuple[QRectF, int, str]] = []
        along_total, size2, last_size2, counted = 0.0, 0.0, 0.0, 0
        offset = max(0, self.style["tickLength"]) + self.style["tickTextOffset"][axis]
        orientation = self.orientation
        flags = {"left": Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                 "right": Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                 "top": Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom,
                 "bottom": Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop}[orientation]
        text_flags = int(flags | Qt.TextFlag.TextDontClip)
        box = self.boundingRect()
        font = p.font().toString()
        for i in range(min(len(levels), self.style["maxTextLevel"] + 1)):
            spacing, values = levels[i]
            strings = self.tickStrings(values, self.autoSIPrefixScale * self.scale, spacing)
            if not len(strings):
                continue
            sizes: list[tuple[float, float] | None] = []
            for j, text in enumerate(strings):
                if positions[i][j] is None:
                    sizes.append(None)
                    continue
                width, height = size = self._text_size(p, font, text)
                sizes.append(size)
                # what the labels so far take along the axis, and the widest across it
                along_total += height if axis == 0 else width
                size2 = max(size2, width if axis == 0 else height) if counted else (width if axis == 0 else height)
                counted += 1
            if not counted:
                along_total = size2 = 0.0
            if i > 0 and any(len(specs) >= count and along_total / length >= limit
                             for count, limit in self.style["textFillLimits"]):
                break
            last_size2 = size2
            for j, text in enumerate(strings):
                x, found = positions[i][j], sizes[j]
                if x is None or found is None:
                    continue
                width, height = found
                if orientation == "left":
                    place = QRectF(tick_stop - offset - width, x - height / 2, width, height)
                elif orientation == "right":
                    place = QRectF(tick_stop + offset, x - height / 2, width, height)
                elif orientation == "top":
                    place = QRectF(x - width / 2, tick_stop - offset - height, width, height)
                else:
                    place = QRectF(x - width / 2, tick_stop + offset, width, height)
                if box & place == place:
                    specs.append((place, text_flags, text))
        self._fit_text_space(last_size2)
        return specs

    def _fit_text_space(self, size: float) -> None:
        """Room across the axis for the widest (or tallest) label, as pyqtgraph's own auto-expanding
        text space keeps it (it grows at once and shrinks only by 10 px or more), through its public
        style: a time axis's labels are one line of its font, an axis of fixed width ignores it."""
        name = "tickTextWidth" if self.orientation in ("left", "right") else "tickTextHeight"
        if size > self.style[name] or size < self.style[name] - 10:
            self.setStyle(**{name: math.ceil(size)})  # whole pixels: pyqtgraph kept the fraction


_SPECS_CURRENT = QPicture()


@lru_cache(maxsize=4096)
def _time_label(value: float, spacing: float) -> str:
    """`time_label`, remembered: a pan shows the same ticks frame after frame."""
    return time_label(value, spacing)


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
        return [_time_label(v, spacing) for v in values]


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
        """What the column shows (its key and pixels): tests read it."""
        self._sheet: tuple[tuple[object, ...], float, float, QPixmap] | None = None
        """Labels drawn for a range of rows (see `_paint_sheet`): key, first and last row, pixels."""
        self.renders = 0
        """How many times labels were drawn afresh (the rest were copies): tests read it."""
        self._texts = StaticTexts()
        self._error, self._running = QColor(ERROR_COLOUR), QColor(RUNNING_COLOUR)
        self._kind_colours: dict[str, QColor] = {}
        self._folded_total: tuple[Rows, int] | None = None
        self.setWidth(190)
        self.setStyle(showValues=False)
        self.enableAutoSIPrefix(False)  # else every vertical pan sets the (empty) axis label's HTML again

    def wanted_width(self, data: TimelineData, sample: int = 2_000) -> int:
        """Pixels the labels of the first `sample` lanes need whole: indent, fold mark, kind box, status
        mark and name (the panel clamps it; a longer name elides and shows whole on hover)."""
        n = min(len(data), sample)
        if n == 0:
            return 0
        metrics = QFontMetrics(self.font())
        names = data.names[0:n]
        depths = np.minimum(data.depth[:n], MAX_INDENT_LEVELS).tolist()
        widest = max(d * INDENT_PX + metrics.horizontalAdvance("● " + one_line(name))
                     for d, name in zip(depths, names, strict=True))
        return int(4 + DISCLOSURE_PX + 10 + 4 + widest + 8)

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
        looks = (data, data.version, id(rows), rect.getRect(), dpr, p.font().toString(),
                 self.text_colour.rgba(), self.muted_colour.rgba(), self.background.rgba())
        if lane_px >= MIN_LABEL_LANE_PX:
            self._paint_sheet(p, data, view, rect, dpr, (top, bottom), (round(lane_px, 6), *looks))
            return
        # zoomed out, the column only says how many rows are in view: it changes with that count
        # (by its text: a pan that keeps the count keeps the picture)
        shown = ("summary", self._summary_text(data, max(0, math.floor(top)), min(len(data), math.ceil(bottom))))
        key = (shown, *looks)
        if self._picture is None or self._picture[0] != key:
            self._picture = key, self._render_rows(p, data, view, rect, dpr, (top, bottom))
        p.drawPixmap(rect.topLeft(), self._picture[1])

    def _paint_sheet(self, p: QPainter, data: TimelineData, view: pg.ViewBox, rect: QRectF, dpr: float,
                     shown: tuple[float, float], key: tuple[object, ...]) -> None:
        """The labels of the rows in view, copied out of a sheet of labels taller than the column.

        A vertical pan keeps the rows' height: the sheet drawn for the first frame of a pan holds
        half a column of rows more above and below, and the frames after it copy their part of it
        (at most half a pixel off where a fresh draw would put the text) until the view leaves it.
        The first frame at a new row height (a zoom) draws only the rows in view: a zoom changes
        the height on every frame, and a taller sheet would only cost more.
        """
        top, bottom = shown
        lane_px = rect.height() / max(bottom - top, 1e-9)
        sheet = self._sheet
        fits = sheet is not None and sheet[0] == key and sheet[1] - 1e-6 <= top and bottom <= sheet[2] + 1e-6
        if sheet is None or not fits:
            margin = 0.0
            if sheet is not None and sheet[0] == key:  # a pan at this row height: room to move
                margin = math.ceil(max(8.0, (bottom - top) / 2) * lane_px) / lane_px  # whole pixels
            first, last = top - margin, bottom + margin
            room = margin * lane_px
            tall = QRectF(rect.left(), rect.top() - room, rect.width(), rect.height() + 2 * room)
            sheet = self._sheet = key, first, last, self._render_rows(p, data, view, tall, dpr, (first, last))
        _key, first, _last, pixmap = sheet
        offset = round((top - first) * lane_px * dpr)
        width, height = max(1, math.ceil(rect.width() * dpr)), max(1, math.ceil(rect.height() * dpr))
        p.drawPixmap(QRectF(rect.left(), rect.top(), width / dpr, height / dpr), pixmap,
                     QRectF(0, offset, width, min(height, pixmap.height() - offset)))
        if self._picture is None or self._picture[1] is not pixmap or self._picture[0][:2] != shown:
            self._picture = (*shown, *key), pixmap

    def _render_rows(self, p: QPainter, data: TimelineData, view: pg.ViewBox, rect: QRectF, dpr: float,
                     shown: tuple[float, float]) -> QPixmap:
        self.renders += 1
        pixmap = QPixmap(max(1, math.ceil(rect.width() * dpr)), max(1, math.ceil(rect.height() * dpr)))
        pixmap.setDevicePixelRatio(dpr)
        pixmap.fill(self.background)
        painter = QPainter(pixmap)
        try:
            painter.setFont(p.font())
            painter.translate(-rect.topLeft())
            self._paint(painter, data, shown, rect)
        finally:
            painter.end()
        return pixmap

    def _paint(self, p: QPainter, data: TimelineData, shown: tuple[float, float], rect: QRectF) -> None:
        top, bottom = shown
        if bottom <= top or rect.height() <= 0:
            return
        lane_px = rect.height() / (bottom - top)
        lo, hi = max(0, math.floor(top)), min(len(data), math.ceil(bottom))
        if lo >= hi:
            return
        draw_hv_line(p, QPen(self.muted_colour), int(rect.right()) - 1, int(rect.top()), int(rect.right()) - 1,
                     int(rect.bottom()))
        if lane_px >= MIN_LABEL_LANE_PX:
            self._labels(p, data, lo, hi, top, lane_px, rect)
        else:
            self._summary(p, data, lo, hi, rect)

    def _labels(self, p: QPainter, data: TimelineData, lo: int, hi: int, top: float, lane_px: float,
                rect: QRectF) -> None:
        """One row's label after another; each row's values come from one slice of the layout's
        arrays (`tolist`), so the loop itself is only the drawing calls (a label redraws on every
        vertical move)."""
        font = p.font()
        metrics = QFontMetrics(font)
        box = max(6, min(10, int(lane_px * 0.6)))
        rows = self._rows()
        folding = rows is not None and len(rows) == len(data)
        text_dy = (lane_px - metrics.height()) / 2  # as AlignVCenter centres a line in the lane
        texts = self._texts
        texts.start(font)
        depths = np.minimum(data.depth[lo:hi], MAX_INDENT_LEVELS).tolist()
        statuses = data.status[lo:hi].tolist()
        upto = min(hi, len(rows)) if rows is not None else lo
        parents = rows.has_children[lo:upto].tolist() if folding and rows is not None else []
        folds = rows.folded[lo:upto].tolist() if rows is not None else []
        names, kinds = data.names[lo:hi], data.kind_names[lo:hi]
        marks = {folded: (mark, (DISCLOSURE_PX - mark.size().width()) / 2 - 1)
                 for folded, mark in ((True, texts.text("▸")), (False, texts.text("▾")))}
        colours = self._kind_colours
        text_colour, muted = self.text_colour, self.muted_colour
        ys = (rect.top() + text_dy + (np.arange(lo, hi) - top) * lane_px).tolist()
        left = rect.left() + 4
        box_dy = (lane_px - box) / 2 - text_dy
        pen = None  # the painter's pen, set only when it changes
        boxes: dict[str, list[tuple[float, float]]] = {}  # the kind boxes, drawn after: one call a colour
        for i, y in enumerate(ys):
            x = left + depths[i] * INDENT_PX
            folded = folds[i] if i < len(folds) else 0
            if folding:
                if i < len(parents) and parents[i]:
                    want = text_colour if folded else muted
                    if want is not pen:
                        p.setPen(want)
                        pen = want
                    mark, dx = marks[bool(folded)]
                    p.drawStaticText(QPointF(x + dx, y), mark)
                x += DISCLOSURE_PX
            kind = kinds[i]
            found = boxes.get(kind)
            if found is None:
                found = boxes[kind] = []
            found.append((x, y + box_dy))
            status = statuses[i]
            prefix = "✖ " if status == ERROR else "● " if status == RUNNING else ""  # ▶ would read as a fold mark
            want = self._error if status == ERROR else self._running if status == RUNNING else text_colour
            if want is not pen:
                p.setPen(want)
                pen = want
            width = rect.right() - 6 - (x + box + 4)
            count = None
            if folded:
                count = texts.text(f" +{compact(int(folded))}")  # the count stays whole; the name elides
                width -= count.size().width()
            name = texts.elided(prefix + one_line(names[i]), int(max(width, 0)), metrics)
            p.drawStaticText(QPointF(x + box + 4, y), name)
            if count is not None:
                p.setPen(muted)
                pen = muted
                p.drawStaticText(QPointF(x + box + 4 + name.size().width(), y), count)
        p.setPen(Qt.PenStyle.NoPen)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        for kind, corners in boxes.items():
            colour = colours.get(kind)
            if colour is None:
                colour = colours[kind] = kind_colour(kind)
            p.setBrush(colour)  # filled without a pen: the pixels `fillRect` sets
            rects = np.empty((len(corners), 4))
            rects[:, :2] = corners
            rects[:, 2:] = box
            draw_rects(p, rects)

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
        """A click on a disclosure mark folds or unfolds its row; anywhere else on a label, the panel
        selects the row's span (as a click on its bar does)."""
        rows = self._rows()
        row = self.row_at(event.pos().y())
        on_mark = event.pos().x() < self.disclosure_x(row) + DISCLOSURE_PX + 4
        if event.button() == Qt.MouseButton.LeftButton and rows is not None and 0 <= row < len(rows) \
                and rows.has_children[row] and on_mark:
            event.accept()
            self.toggled.emit(row)
            return
        super().mouseClickEvent(event)

    def _summary(self, p: QPainter, data: TimelineData, lo: int, hi: int, rect: QRectF) -> None:
        """Too many lanes to name: say how many there are and how to get to the names."""
        p.setPen(self.text_colour)
        p.drawText(rect.adjusted(4, 0, -6, 0), int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap),
                   self._summary_text(data, lo, hi))

    def _summary_text(self, data: TimelineData, lo: int, hi: int) -> str:
        rows = self._rows()
        folded = 0
        if rows is not None and len(rows) == len(data):
            if self._folded_total is None or self._folded_total[0] is not rows:
                self._folded_total = rows, int(rows.folded.sum())  # once per rows, not per pan
            folded = self._folded_total[1]
        text = f"{hi - lo:,} of {len(data):,} {'rows' if folded else 'spans'} here."
        if folded:
            text += f"\n{folded:,} more spans are in collapsed rows (▸)."
        return text + "\nZoom in (wheel, +) to read their names."


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
    repaint_as_one_rect(plot)
    cache_text_items(plot)
    return plot
