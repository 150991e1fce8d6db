"""One graphics item that draws every span of a run: rectangles batched per colour, culled, merged.

Painting happens in device pixels: the visible lanes are one slice of the layout
arrays (lanes are in depth-first order), the slice is culled to the visible
time window, and when lanes are thinner than two pixels the spans of each
pixel row are merged into blocks per colour (`pixel_blocks`). Each colour is
then one `QPainter.drawRects` call straight from a numpy buffer. Every paint
records its own duration in `paint_ms`, which the benchmark reads.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetrics, QImage, QPainter, QPen

from agentdesk.gui.shared.palette import ERROR_COLOUR, RUNNING_COLOUR, SPAN_KIND_COLOURS
from agentdesk.gui.timeline.drawing import (
    StaticTexts,
    draw_diamonds,
    draw_rects,
    format_duration,
    one_line,
    one_per_cell,
)
from agentdesk.store.analysis.layout.data import CANCELLED, ERROR, KINDS, TimelineData, pixel_blocks
from agentdesk.store.analysis.layout.overview import Overview, pooled
from agentdesk.store.analysis.layout.rows import spans_in

log = logging.getLogger(__name__)

ERROR_GROUP = len(KINDS)
CANCELLED_GROUP = ERROR_GROUP + 1
GROUP_COLOURS = [*(SPAN_KIND_COLOURS[k] for k in KINDS), ERROR_COLOUR, "#8b949e"]
DRAW_ORDER = [KINDS.index(kind) for kind in
              ("internal", "gate", "guardrail", "model", "tool", "sub_agent", "agent")]
DRAW_ORDER += [CANCELLED_GROUP, ERROR_GROUP]
"""Where merged blocks overlap, the rarer, structural kinds (agents) and failures stay on top."""
MERGE_GAP_PX = 2
LOD_BLOCK_PX = 3.0
"""Merged blocks are drawn this tall (over their neighbours) so colours stay visible when zoomed out."""
ROWS_PER_BAND = 1800
"""Pixel rows merged per call: rows x colour groups must stay below 2**14 (see `pixel_blocks`)."""
MARKER_PX = 7.0
MARKER_CELL_PX = 10.0
"""At most one error marker per cell of this size: thousands of failures stay readable."""
MIN_TEXT_LANE_PX = 13.0
DIM_OPACITY = 0.2
MATCH_COLOUR = "#f5a524"
PATH_COLOUR = "#d6336c"
MAX_MARKED = 3000
"""Marked lanes outlined per frame at most (each outline is one call)."""
SHEET_PAD_PX = 16
"""The grid sheet reaches this far beyond the cells: the failure markers left of a span's start."""
GRID_CELL_PX = 2.0
"""Zoomed out until a cell of the run's overview grid is at most this big on screen, the waterfall
draws the grid (cost per pixel) instead of the spans (cost per span)."""


def grid_colours(draw_order: list[int]) -> np.ndarray:
    """ARGB per kind bit mask: the kind drawn last (`draw_order`) among those present wins the cell."""
    lut = np.zeros(256, dtype=np.uint32)
    for mask in range(1, 256):
        top = next((g for g in reversed(draw_order) if g < len(KINDS) and mask >> g & 1), None)
        if top is not None:
            lut[mask] = QColor(GROUP_COLOURS[top]).rgba()
    return lut


def _pixels(x: np.ndarray, scale: float, offset: float, clip: tuple[float, float]) -> np.ndarray:
    """Data x (a fresh gather, so overwritten) to device pixels clipped near the viewport."""
    x *= scale
    x += offset
    return np.clip(x, *clip, out=x)


def point_px(lane_px: float) -> float:
    """How tall a point event's diamond is: most of its lane, readable when lanes are thin."""
    return min(max(lane_px * 0.7, 6.0), 10.0)


class GridSheet:
    """The overview grid drawn at one view scale, over a device rect larger than the view."""

    def __init__(self, scale: tuple[object, ...], pixels: QImage, left: int, top: int, dx: float,
                 dy: float) -> None:
        self.scale = scale
        self.pixels = pixels
        self.left, self.top = left, top
        """Where the sheet's top-left pixel was (device) under the transform it was drawn with."""
        self.dx, self.dy = dx, dy
        """That transform's offsets: a pan moves the sheet by the change in them."""

    @classmethod
    def draw(cls, image: QImage, cells: tuple[float, float, float, int], view: QRectF,
             transform: tuple[float, float, float, float], dpr: float, scale: tuple[object, ...],
             marks: Callable[[QPainter, QRectF, tuple[float, float, float, float]], None]) -> GridSheet:
        """The grid's cells within half a view of the view on each side, as a scaled draw sets them,
        with `marks` (painter, the data rect covered, the transform into the sheet) drawn over them."""
        per_col, per_row, gx0, lanes = cells
        sx, sy, dx, dy = transform
        width, height = view.width(), view.height()
        # the margin in data units, clipped to the grid
        c0 = max(0, math.floor((view.left() - width / 2 - gx0) / per_col))
        c1 = min(image.width(), math.ceil((view.right() + width / 2 - gx0) / per_col))
        r0 = max(0, math.floor((view.top() - height / 4) / per_row))
        r1 = min(image.height(), math.ceil((view.bottom() + height / 4) / per_row))
        x0, x1 = (gx0 + c0 * per_col) * sx + dx, (gx0 + c1 * per_col) * sx + dx
        y0, y1 = r0 * per_row * sy + dy, min(r1 * per_row, lanes) * sy + dy
        left, top = math.floor(x0) - SHEET_PAD_PX, math.floor(y0) - SHEET_PAD_PX  # marks stick out
        w, h = max(1, math.ceil(x1) + SHEET_PAD_PX - left), max(1, math.ceil(y1) + SHEET_PAD_PX - top)
        pixels = QImage(max(1, math.ceil(w * dpr)), max(1, math.ceil(h * dpr)),
                        QImage.Format.Format_ARGB32_Premultiplied)
        pixels.setDevicePixelRatio(dpr)
        pixels.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixels)
        try:
            # moved by whole pixels: the sampling is the direct draw's (the marks reset the transform)
            x0, x1, y0, y1 = x0 - left, x1 - left, y0 - top, y1 - top
            if c1 > c0 and r1 > r0:
                painter.drawImage(QRectF(QPointF(x0, y0), QPointF(x1, y1)), image,
                                  QRectF(c0, r0, c1 - c0, r1 - r0))
            pad_x, pad_y = SHEET_PAD_PX / sx, SHEET_PAD_PX / sy
            wide = QRectF(QPointF(gx0 + c0 * per_col - pad_x, r0 * per_row - pad_y),
                          QPointF(gx0 + c1 * per_col + pad_x, r1 * per_row + pad_y))
            marks(painter, wide, (sx, sy, dx - left, dy - top))
        finally:
            painter.end()
        return cls(scale, pixels, left, top, dx, dy)

    def _at(self, dx: float, dy: float) -> tuple[int, int]:
        return self.left + round(dx - self.dx), self.top + round(dy - self.dy)

    def holds(self, x0: float, y0: float, x1: float, y1: float, dx: float, dy: float) -> bool:
        """Whether the sheet, moved to the transform's offsets, covers that device rect."""
        left, top = self._at(dx, dy)
        dpr = self.pixels.devicePixelRatio()
        right, bottom = left + self.pixels.width() / dpr, top + self.pixels.height() / dpr
        # a pixel of slack: the sheet moves by whole pixels, the rect's edges by fractions
        return left <= math.floor(x0) + 1 and top <= math.floor(y0) + 1 and math.ceil(x1) - 1 <= right \
            and math.ceil(y1) - 1 <= bottom

    def blit(self, p: QPainter, x0: float, y0: float, x1: float, y1: float, dx: float, dy: float) -> None:
        """The part over that device rect (whole pixels around it), unscaled, moved to the offsets."""
        left, top = self._at(dx, dy)
        dpr = self.pixels.devicePixelRatio()
        width, height = self.pixels.width() / dpr, self.pixels.height() / dpr
        pad = SHEET_PAD_PX  # the marks beside the cells
        a, b = max(0, math.floor(x0) - pad - left), max(0, math.floor(y0) - pad - top)
        w, h = min(math.ceil(x1) + pad - left, width) - a, min(math.ceil(y1) + pad - top, height) - b
        if w <= 0 or h <= 0:
            return
        p.drawImage(QRectF(left + a, top + b, w, h), self.pixels, QRectF(a * dpr, b * dpr, w * dpr, h * dpr))


class SpanItem(pg.GraphicsObject):
    """All of a run's spans; x is seconds since the run started, lane i spans y in [i, i + 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.data: TimelineData | None = None
        self.now = 0.0
        """Seconds since run start that open spans reach."""
        self.live = False
        self.selected = -1
        self.paint_ms: deque[float] = deque(maxlen=1000)
        self.painted: tuple[float, int] = (0.0, 0)
        """When the last paint ended (`time.perf_counter()`) and how many spans it had: the bench's
        "first spans drawn" is the first paint after the data arrived, not a later repaint."""
        self.text_colour = QColor("#202020")
        self.band_colour = QColor(0, 0, 0, 14)
        self.select_colour = QColor("#2f6fd0")
        self.background = QColor("#ffffff")
        # per lane and independent of the view, so a paint only slices and gathers them
        self._group = self._kind = np.zeros(0, dtype=np.int8)
        self._point = self._failed_bar = self._open = np.zeros(0, dtype=bool)
        self._ends = np.zeros(0)
        self._failed_lanes = self._open_lanes = np.zeros(0, dtype=np.intp)
        """The lanes of failed bars and of open spans (sorted): the grid draws marks for them alone."""
        self._bounds = QRectF()
        self._failed = False
        self.overview: Overview | None = None
        self._grids: dict[tuple[int, int], tuple[np.ndarray, QImage]] = {}
        self._sheet: GridSheet | None = None
        """The grid drawn at the view's scale over more than the view (see `_blit_grid`)."""
        self._grid_scale: tuple[object, ...] | None = None
        """The scale the grid was last drawn at: a second frame at it (a pan) starts a sheet."""
        self._lut = grid_colours(DRAW_ORDER)
        self._texts = StaticTexts()
        """Span names laid out once and drawn from their layout (the same names show frame after frame)."""
        self._on_bar, self._on_error = QColor("#101418"), QColor("#ffffff")
        self.path_lanes: np.ndarray | None = None
        """The critical path's lanes: drawn bright over everything else, faded; None when off."""
        self.match_lanes: np.ndarray | None = None
        """The find bar's matches: outlined; None when there is no search."""
        self.folded: np.ndarray | None = None
        """Per lane (row) drawn: how many spans are collapsed into it (None: nothing is)."""
        self.flag_lanes: np.ndarray | None = None
        """Lanes of spans an operator noted or labelled; None (most runs) costs a frame nothing."""

    # -- state ------------------------------------------------------------------------------
    def set_data(self, data: TimelineData | None, now: float) -> None:
        self.data, self.now = data, now
        self.refresh()

    def refresh(self) -> None:
        """Re-read the data (after an in-place update) and repaint."""
        data = self.data
        if data is not None:
            self._kind = data.kind.astype(np.int8)
            self._group = self._kind.copy()
            self._group[data.status == CANCELLED] = CANCELLED_GROUP
            self._group[data.status == ERROR] = ERROR_GROUP
            self._point, self._open = data.points, data.open
            self._failed_bar = (data.status == ERROR) & ~self._point  # a failed point is its own marker
            self._ends = data.ends(self.now)
            self._failed_lanes, self._open_lanes = np.flatnonzero(self._failed_bar), np.flatnonzero(self._open)
        self._sheet = None  # its failure marks and live edges are the old data's
        self._update_bounds()
        self.update()

    def set_overview(self, overview: Overview | None) -> None:
        """The zoomed-out grid of the data shown (built on the runner with the layout)."""
        self.overview = overview
        self._grids.clear()
        self._sheet = self._grid_scale = None
        self.update()

    def _grid_image(self, overview: Overview, fy: int, fx: int) -> QImage:
        """The grid pooled by `fy` x `fx` cells as an image (kept: a zoom returns to the same few)."""
        key = (fy, fx)
        if key not in self._grids:
            mask = overview.mask if key == (1, 1) else pooled(overview.mask, fy, fx)
            pixels = np.ascontiguousarray(self._lut[mask])
            image = QImage(pixels.data, pixels.shape[1], pixels.shape[0], pixels.shape[1] * 4,
                           QImage.Format.Format_ARGB32)
            self._grids[key] = pixels, image  # the image reads the array's memory: keep both
        return self._grids[key][1]

    def set_now(self, now: float) -> None:
        self.now = now
        if self.data is not None:
            self._ends = self.data.ends(now)
        self._sheet = None  # the live edges moved
        self._update_bounds()
        self.update()

    def set_path(self, lanes: np.ndarray | None) -> None:
        """Highlight the critical path (lanes) and fade the rest; None turns it off."""
        self.path_lanes = lanes
        self.update()

    def set_matches(self, lanes: np.ndarray | None) -> None:
        """Outline the find bar's matches (lanes); None clears them."""
        self.match_lanes = lanes
        self.update()

    def set_flags(self, lanes: np.ndarray | None) -> None:
        """Flag the lanes of noted or labelled spans; None (or none) draws nothing and costs nothing."""
        self.flag_lanes = lanes if lanes is not None and len(lanes) else None
        self.update()

    def select(self, lane: int) -> None:
        self.selected = lane
        self.update()

    def _update_bounds(self) -> None:
        data = self.data
        if data is None or not len(data):
            bounds = QRectF()
        else:
            x0, x1 = data.extent(self.now)
            bounds = QRectF(x0, 0.0, max(x1 - x0, 1e-9), float(len(data)))
        if bounds != self._bounds:
            self.prepareGeometryChange()
            self._bounds = bounds

    def boundingRect(self) -> QRectF:
        """The data with a wide margin: names and markers are drawn in pixels beside the spans.

        Independent of the view on purpose: a view-dependent rect would need
        prepareGeometryChange on every pan, which makes Qt paint every frame twice.
        """
        if self._bounds.isNull():
            return QRectF()
        width = self._bounds.width()
        return self._bounds.adjusted(-width, -1.0, width, 1.0)

    def dataBounds(self, ax: int, frac: float = 1.0, orthoRange: object = None) -> tuple[float, float] | None:
        if self._bounds.isNull():
            return None
        if ax == 0:
            return self._bounds.left(), self._bounds.right()
        return 0.0, self._bounds.bottom()

    # -- painting ---------------------------------------------------------------------------
    def paint(self, p: QPainter, *args: object) -> None:
        started = time.perf_counter()
        try:
            if self.data is not None and len(self.data):
                p.save()
                try:
                    self._paint(p, self.data)
                finally:
                    p.restore()
        except Exception:  # a paint error must not take the window down; say it once
            if not self._failed:
                log.exception("timeline paint failed")
                self._failed = True
        finally:
            ended = time.perf_counter()
            self.paint_ms.append((ended - started) * 1000.0)
            self.painted = (ended, spans_in(self.data))

    def _paint(self, p: QPainter, data: TimelineData) -> None:
        view = self.viewRect()
        tr = p.transform()
        sx, sy, dx, dy = tr.m11(), tr.m22(), tr.dx(), tr.dy()
        if view is None or sx <= 0 or sy == 0:
            return
        lo, hi = max(0, math.floor(view.top())), min(len(data), math.ceil(view.bottom()))
        if lo >= hi:
            return
        left, right = view.left() * sx + dx, view.right() * sx + dx
        p.resetTransform()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        if self.path_lanes is not None:
            p.setOpacity(DIM_OPACITY)  # everything off the critical path fades; the path is drawn over it
        self._base(p, data, view, lo, hi, (sx, sy, dx, dy), (left, right))
        p.setOpacity(1.0)
        if self.match_lanes is not None:
            self._highlight(p, data, self.match_lanes, view, (sx, sy, dx, dy), QColor(MATCH_COLOUR), False)
        if self.path_lanes is not None:
            self._highlight(p, data, self.path_lanes, view, (sx, sy, dx, dy), QColor(PATH_COLOUR), True)
        if self.flag_lanes is not None:
            self._flags(p, data, self.flag_lanes, view, (sx, sy, dx, dy))
        self._selection(p, data, lo, hi, sx, sy, dx, dy, left, right)

    def _base(self, p: QPainter, data: TimelineData, view: QRectF, lo: int, hi: int,
              transform: tuple[float, float, float, float], edges: tuple[float, float]) -> None:
        """Every span in view: the overview grid when zoomed far out, else the spans themselves."""
        sx, sy, dx, dy = transform
        left, right = edges
        if self._paint_grid(p, data, view, sx, sy, dx, dy):
            return
        # 100,000 lanes make every temporary array a page-faulting allocation: few, done in place
        visible = self._ends[lo:hi] >= view.left()
        visible &= data.start[lo:hi] <= view.right()
        lanes = np.flatnonzero(visible)
        lanes += lo
        clip = (max(left - 20, 0), right + 2)
        px0, px1 = _pixels(data.start[lanes], sx, dx, clip), _pixels(self._ends[lanes], sx, dx, clip)
        np.maximum(px1, px0 + 1.0, out=px1)
        lane_px = abs(sy)
        tops = lanes * sy
        tops += dy + min(sy, 0.0)
        self._bands(p, lo, hi, sy, dy, left, right)
        group = self._group[lanes]
        if lane_px >= 2:
            self._lanes(p, group, px0, px1, tops, lane_px)
        else:
            # merged rows show kinds; a failure is shown by its marker, or one failed span in a
            # hundred would paint every row red
            self._merged(p, self._kind[lanes], px0, px1, tops)
        if self.live:
            self._running(p, self._open[lanes], px0, px1, tops, lane_px)
        self._markers(p, self._failed_bar[lanes], px0, tops, max(lane_px, 1.0))
        self._points(p, self._point[lanes], group, px0, tops, max(lane_px, 1.0))
        if lane_px >= MIN_TEXT_LANE_PX and len(lanes) <= 400:
            durations = self._ends[lanes] - data.start[lanes]
            self._names(p, data, lanes, durations, px0, px1, tops, lane_px, (left, right))

    def _highlight(self, p: QPainter, data: TimelineData, lanes: np.ndarray, view: QRectF,
                   transform: tuple[float, float, float, float], colour: QColor, fill: bool) -> None:
        """Marked lanes in view (search matches, the critical path): drawn at full strength, at least a
        few pixels tall and wide so one span among a million still shows, with an outline."""
        sx, sy, dx, dy = transform
        lanes = lanes[(lanes >= math.floor(view.top())) & (lanes < math.ceil(view.bottom()))]
        lanes = lanes[(self._ends[lanes] >= view.left()) & (data.start[lanes] <= view.right())][:MAX_MARKED]
        if not len(lanes):
            return
        clip = (view.left() * sx + dx - 20, view.right() * sx + dx + 20)
        px0 = _pixels(data.start[lanes], sx, dx, clip)
        px1 = np.maximum(_pixels(self._ends[lanes], sx, dx, clip), px0 + 3.0)
        height = max(abs(sy), 3.0)
        tops = lanes * sy + dy + min(sy, 0.0) + (abs(sy) - height) / 2
        rects = np.column_stack((px0, tops, px1 - px0, np.full(len(lanes), height)))
        if fill:
            self._draw_groups(p, self._group[lanes], rects)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(colour, 1.5))
        outline = rects + np.array([-1.5, -1.5, 3.0, 3.0])
        for x, y, w, h in outline.tolist():
            p.drawRect(QRectF(x, y, w, h))

    def _flags(self, p: QPainter, data: TimelineData, lanes: np.ndarray, view: QRectF,
               transform: tuple[float, float, float, float]) -> None:
        """A flag (pole and pennant) just left of each flagged bar in view: few lanes, one rect pair each."""
        sx, sy, dx, dy = transform
        lanes = lanes[(lanes >= math.floor(view.top())) & (lanes < math.ceil(view.bottom()))]
        lanes = lanes[(self._ends[lanes] >= view.left()) & (data.start[lanes] <= view.right())][:MAX_MARKED]
        if not len(lanes):
            return
        height = max(abs(sy), 6.0)
        colour = self.text_colour  # no kind's colour and no failure's: the flag reads as a person's mark
        lefts = np.maximum(data.start[lanes] * sx + dx, view.left() * sx + dx) - 7.0
        tops = lanes * sy + dy + min(sy, 0.0) + (abs(sy) - height) / 2
        pennant = min(height / 2, 5.0)
        for x, y in zip(lefts.tolist(), tops.tolist(), strict=True):
            p.fillRect(QRectF(x, y, 1.0, height), colour)
            p.fillRect(QRectF(x + 1.0, y, 5.0, pennant), colour)

    def _paint_grid(self, p: QPainter, data: TimelineData, view: QRectF, sx: float, sy: float, dx: float,
                    dy: float) -> bool:
        """Draw the visible part of the overview grid, and the marks over it, when its cells are this
        small on screen."""
        ov = self.overview
        if ov is None or not ov.lanes or ov.lanes != len(data) or sy <= 0:
            return False
        row_px, col_px = sy * ov.lanes_per_row(), sx * ov.seconds_per_column()
        if row_px > GRID_CELL_PX or col_px > GRID_CELL_PX:
            return False
        # pool cells until one is about a pixel: an image scaled down by sampling loses rows
        fy, fx = (1 << max(0, math.floor(math.log2(1 / max(px, 1e-9)))) for px in (row_px, col_px))
        fy, fx = min(fy, ov.rows), min(fx, ov.columns)
        per_row, per_col = ov.lanes_per_row() * fy, ov.seconds_per_column() * fx
        image = self._grid_image(ov, fy, fx)
        c0 = max(0, math.floor((view.left() - ov.x0) / per_col))
        c1 = min(image.width(), math.ceil((view.right() - ov.x0) / per_col))
        r0 = max(0, math.floor(view.top() / per_row))
        r1 = min(image.height(), math.ceil(view.bottom() / per_row))
        if c1 > c0 and r1 > r0:
            self._blit_grid(p, data, image, (per_col, per_row, ov.x0, ov.lanes), (c0, c1, r0, r1), view,
                            (sx, sy, dx, dy))
        else:
            self._grid_marks(p, data, view, (sx, sy, dx, dy))
        return True

    def _grid_marks(self, p: QPainter, data: TimelineData, view: QRectF,
                    transform: tuple[float, float, float, float]) -> None:
        lo, hi = max(0, math.floor(view.top())), min(len(data), math.ceil(view.bottom()))
        if lo < hi:
            self._sparse_marks(p, data, lo, hi, view, *transform)

    def _blit_grid(self, p: QPainter, data: TimelineData, image: QImage, cells: tuple[float, float, float, int],
                   shown: tuple[int, int, int, int], view: QRectF,
                   transform: tuple[float, float, float, float]) -> None:
        """The visible cells of the grid image, scaled to the view: copied out of a sheet on a pan.

        Scaling the image (~1-2.5 ms a frame over a whole plot) repeats the same pixels while the
        scale stays: the second frame at a scale (a pan) draws the grid at it over half a view more
        on each side into a sheet, and the frames after copy it, moved by whole pixels (at most half
        a pixel off where a fresh draw puts a cell edge), until the view leaves it. A zoom changes
        the scale every frame, so it draws straight from the image as before. The failure marks and
        live edges over the grid are in the sheet too (a fresh one when they change: `refresh`,
        `set_now`); with the critical path shown everything is drawn straight, faded under it.
        """
        per_col, per_row, gx0, lanes = cells
        c0, c1, r0, r1 = shown
        sx, sy, dx, dy = transform
        dpr = p.device().devicePixelRatioF() if p.device() is not None else 1.0
        # a pan's range is computed afresh each frame: its scale may differ in the last bits
        scale = (image.cacheKey(), round(sx, -math.floor(math.log10(sx)) + 9),
                 round(sy, -math.floor(math.log10(sy)) + 9), per_col, per_row, gx0, lanes, dpr, self.live,
                 self.background.rgba())
        sheet = self._sheet
        # the device rect the visible cells cover, and that of the whole grid
        x0, x1 = (gx0 + c0 * per_col) * sx + dx, (gx0 + c1 * per_col) * sx + dx
        y0, y1 = r0 * per_row * sy + dy, min(r1 * per_row, lanes) * sy + dy
        if sheet is None or sheet.scale != scale or not sheet.holds(x0, y0, x1, y1, dx, dy):
            if self._grid_scale != scale or self.path_lanes is not None:  # a zoom, a first frame: no sheet
                self._grid_scale, self._sheet = scale, None
                p.drawImage(QRectF(QPointF(x0, y0), QPointF(x1, y1)), image, QRectF(c0, r0, c1 - c0, r1 - r0))
                self._grid_marks(p, data, view, transform)
                return
            sheet = self._sheet = GridSheet.draw(
                image, cells, view, transform, dpr, scale,
                lambda painter, wide, moved: self._grid_marks(painter, data, wide, moved))
        sheet.blit(p, x0, y0, x1, y1, dx, dy)


    def _sparse_marks(self, p: QPainter, data: TimelineData, lo: int, hi: int, view: QRectF, sx: float,
                      sy: float, dx: float, dy: float) -> None:
        """Over the grid: failure markers and live edges, for those few lanes only (not every lane)."""
        lane_px = max(abs(sy), 1.0)
        for which, draw in ((self._failed_lanes, self._markers), (self._open_lanes if self.live else None, None)):
            if which is None:
                continue
            lanes = which[slice(*np.searchsorted(which, (lo, hi)))]  # not a scan of every lane per frame
            lanes = lanes[(self._ends[lanes] >= view.left()) & (data.start[lanes] <= view.right())]
            if not len(lanes):
                continue
            clip = (-20.0, view.right() * sx + dx + 2)
            px0 = _pixels(data.start[lanes], sx, dx, clip)
            tops = lanes * sy + dy + min(sy, 0.0)
            if draw is not None:
                draw(p, np.ones(len(lanes), dtype=bool), px0, tops, lane_px)
            else:
                px1 = np.maximum(_pixels(self._ends[lanes], sx, dx, clip), px0 + 1.0)
                self._running(p, np.ones(len(lanes), dtype=bool), px0, px1, tops, lane_px)

    def _bands(self, p: QPainter, lo: int, hi: int, sy: float, dy: float, left: float, right: float) -> None:
        """Zebra stripes, so a lane can be followed from its label to its bar."""
        if abs(sy) < 8:
            return
        odd = np.arange(lo + (lo % 2 == 0), hi, 2)
        tops = np.minimum(odd * sy + dy, (odd + 1) * sy + dy)
        rects = np.column_stack((np.full(len(odd), left), tops, np.full(len(odd), right - left),
                                 np.full(len(odd), abs(sy))))
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(self.band_colour)
        draw_rects(p, rects)

    def _lanes(self, p: QPainter, group: np.ndarray, px0: np.ndarray, px1: np.ndarray, tops: np.ndarray,
               lane_px: float) -> None:
        pad = lane_px * 0.15 if lane_px >= 6 else 0.5 if lane_px >= 3 else 0.0
        rects = np.column_stack((px0, tops + pad, px1 - px0, np.full(len(px0), lane_px - 2 * pad)))
        self._draw_groups(p, group, rects)

    def _merged(self, p: QPainter, group: np.ndarray, px0: np.ndarray, px1: np.ndarray,
                tops: np.ndarray) -> None:
        """Lanes thinner than 2 px: merge each pixel row's spans into blocks per colour."""
        if not len(tops):
            return
        if tops[0] > tops[-1]:  # y not inverted: lanes run upwards
            group, px0, px1, tops = group[::-1], px0[::-1], px1[::-1], tops[::-1]
        rows = (tops - np.floor(tops[0])).astype(np.int32)  # pixel rows from the first, as floor() would
        band = ROWS_PER_BAND
        parts = []
        for first in range(0, int(rows[-1]) + 1, band):  # one band unless the view is > 1,800 px tall
            lo, hi = np.searchsorted(rows, (first, first + band))
            row, grp, x0, x1 = pixel_blocks(rows[lo:hi] - first, group[lo:hi], px0[lo:hi], px1[lo:hi],
                                            MERGE_GAP_PX)
            parts.append((row + first, grp, x0, x1))
        row, grp, x0, x1 = (np.concatenate(column) for column in zip(*parts, strict=True))
        top = np.floor(tops[0]) - (LOD_BLOCK_PX - 1) / 2
        rects = np.column_stack((x0, row + top, np.maximum(x1 - x0, 1), np.full(len(row), LOD_BLOCK_PX)))
        # blocks of one pixel row overlap: draw the commonest kind last, so a row shows its majority
        common_last = np.argsort(np.bincount(group, minlength=len(GROUP_COLOURS)), kind="stable").tolist()
        self._draw_groups(p, grp, rects.astype(np.float64), common_last)

    def _draw_groups(self, p: QPainter, group: np.ndarray, rects: np.ndarray,
                     draw_order: list[int] | None = None) -> None:
        p.setPen(Qt.PenStyle.NoPen)
        order = np.argsort(group, kind="stable")
        group, rects = group[order], rects[order]
        bounds = np.searchsorted(group, np.arange(len(GROUP_COLOURS) + 1))
        for g in draw_order or DRAW_ORDER:
            if bounds[g + 1] > bounds[g]:
                p.setBrush(QColor(GROUP_COLOURS[g]))
                draw_rects(p, rects[bounds[g]:bounds[g + 1]])

    def _running(self, p: QPainter, is_open: np.ndarray, px0: np.ndarray, px1: np.ndarray, tops: np.ndarray,
                 lane_px: float) -> None:
        """Open spans of a live run: a bright growing edge at the end that advances with the clock."""
        if not is_open.any():
            return
        x1, y = px1[is_open], tops[is_open]
        edge = np.minimum(4.0, x1 - px0[is_open])
        height = max(lane_px, 1.0)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(RUNNING_COLOUR))
        draw_rects(p, np.column_stack((x1 - edge, y, edge, np.full(len(x1), height))))

    def _markers(self, p: QPainter, is_error: np.ndarray, px0: np.ndarray, tops: np.ndarray,
                 lane_px: float) -> None:
        """A red diamond just left of each failed span (one per 10 px cell), so errors show at any zoom."""
        if not is_error.any():
            return
        size = MARKER_PX if lane_px >= 6 else MARKER_PX - 2
        cx = px0[is_error] - size * 0.5 - 3
        cy = tops[is_error] + lane_px * 0.5
        keep = one_per_cell(cx, cy, MARKER_CELL_PX if lane_px < 6 else 1.0)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setPen(QPen(self.background, 1.0))
        p.setBrush(QColor(ERROR_COLOUR))
        draw_diamonds(p, cx[keep], cy[keep], size)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)

    def _points(self, p: QPainter, is_point: np.ndarray, group: np.ndarray, px0: np.ndarray,
                tops: np.ndarray, lane_px: float) -> None:
        """Spans of no duration (point events, milestones): a diamond in their colour at their start."""
        if not is_point.any():
            return
        cx, cy, group = px0[is_point], tops[is_point] + lane_px * 0.5, group[is_point]
        keep = one_per_cell(cx, cy, MARKER_CELL_PX if lane_px < 6 else 1.0, group)
        cx, cy, group = cx[keep], cy[keep], group[keep]
        size = point_px(lane_px)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setPen(QPen(self.background, 1.0) if size >= 8 else Qt.PenStyle.NoPen)  # small: an outline is all
        for g in DRAW_ORDER:
            if (mine := group == g).any():
                p.setBrush(QColor(GROUP_COLOURS[g]))
                draw_diamonds(p, cx[mine], cy[mine], size)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)

    def _names(self, p: QPainter, data: TimelineData, lanes: np.ndarray, durations: np.ndarray,
               px0: np.ndarray, px1: np.ndarray, tops: np.ndarray, lane_px: float,
               edges: tuple[float, float]) -> None:
        """Names inside wide bars (dark on colour), else just right of the bar with the duration."""
        metrics = QFontMetrics(p.font())
        left, right = edges
        text_dy = (lane_px - metrics.height()) / 2  # as AlignVCenter centres a line in the lane
        texts = self._texts
        texts.start(p.font())
        rows = zip(lanes.tolist(), durations.tolist(), px0.tolist(), px1.tolist(), tops.tolist(), strict=True)
        for lane, duration, x0, x1, top in rows:
            name = one_line(data.names[lane])
            point = bool(self._point[lane])
            x1 += point_px(lane_px) / 2 if point else 0.0  # clear of the diamond
            inside_left = max(x0, left) + 4
            if x1 - inside_left - 4 >= texts.advance(name, metrics):
                p.setPen(self._on_error if self._group[lane] == ERROR_GROUP else self._on_bar)
                p.drawStaticText(QPointF(inside_left, top + text_dy), texts.text(name))
                continue
            label = name if point else f"{name}  {format_duration(duration)}"
            if self.folded is not None and self.folded[lane]:
                label += f"  ▸ {int(self.folded[lane]):,} inside"
            p.setPen(self.text_colour)
            width = int(max(0.0, right - x1 - 5))
            p.drawStaticText(QPointF(x1 + 5, top + text_dy), texts.fitted(label, width, metrics))

    def _selection(self, p: QPainter, data: TimelineData, lo: int, hi: int, sx: float, sy: float, dx: float,
                   dy: float, left: float, right: float) -> None:
        lane = self.selected
        if not lo <= lane < hi:
            return
        top = min(lane * sy + dy, (lane + 1) * sy + dy)
        height = max(abs(sy), 1.0)
        band = QColor(self.select_colour)
        band.setAlpha(40)
        p.fillRect(QRectF(left, top, right - left, height), band)
        x0 = data.start[lane] * sx + dx
        end = data.end[lane] if not math.isnan(data.end[lane]) else max(data.start[lane], self.now)
        x1 = max(end * sx + dx, x0 + 1)
        if self._point[lane]:  # around the diamond
            x0, x1 = x0 - point_px(height) / 2, x0 + point_px(height) / 2
        x0, x1 = max(x0, left - 3), min(x1, right + 3)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(self.select_colour, 1.0))
        cy = top + height / 2
        half = max(height / 2 + 1, 3.5)
        p.drawRect(QRectF(QPointF(x0 - 2.5, cy - half), QPointF(x1 + 2.5, cy + half)))
        p.drawRect(QRectF(QPointF(x0 - 3.5, cy - half - 1), QPointF(x1 + 3.5, cy + half + 1)))
