"""Drawing, formatting and labelling helpers shared by the timeline's items, axes, panel and details."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen, QStaticText, QTransform
from PySide6.QtWidgets import QGraphicsItem, QGraphicsTextItem, QGraphicsView, QHBoxLayout, QLabel, QWidget
from shiboken6 import Shiboken

from agentdesk.gui.shared.flow import FlowLayout, HeightForWidth
from agentdesk.gui.shared.palette import ERROR_COLOUR, RUNNING_COLOUR, SPAN_KIND_COLOURS
from agentdesk.model.plain import shown_line, shown_tooltip
from agentdesk.store import readmodel as rm
from agentdesk.store.analysis.layout.data import ERROR, TimelineData
from agentdesk.store.text.durations import format_duration


def draw_rects(p: QPainter, rects: np.ndarray) -> None:
    """Draw an (n, 4) array of x, y, w, h in one call: QPainter reads the numpy memory as QRectF[n]."""
    if len(rects):
        rects = np.ascontiguousarray(rects, dtype=np.float64)
        first: Any = Shiboken.wrapInstance(rects.ctypes.data, QRectF)
        p.drawRects(first, len(rects))


_PLAIN = (QTransform.TransformationType.TxNone, QTransform.TransformationType.TxTranslate)


def draw_lines(p: QPainter, ends: np.ndarray) -> None:
    """Draw an (n, 4) array of x1, y1, x2, y2 in one call, read as QLineF[n] (see `draw_rects`)."""
    if len(ends):
        ends = np.ascontiguousarray(ends, dtype=np.float64)
        first: Any = Shiboken.wrapInstance(ends.ctypes.data, QLineF)
        p.drawLines(first, len(ends))


def draw_hv_line(p: QPainter, pen: QPen, x0: float, y0: float, x1: float, y1: float) -> None:
    """`p.setPen(pen); p.drawLine(...)` for a level or upright line, as the pixels the raster engine
    sets for it (row floor(y), columns floor(x0)..floor(x1), without antialiasing) but filled:
    Qt draws a translucent line 100 times slower than it fills the same rectangle (~100 µs for
    an axis line, which the axes redraw on every zoom). Anything else draws the line itself."""
    transform = p.transform()
    plain = (transform.type() in _PLAIN and transform.dx().is_integer()
             and transform.dy().is_integer() and not p.testRenderHint(QPainter.RenderHint.Antialiasing))
    if plain and pen.style() == Qt.PenStyle.SolidLine and pen.brush().style() == Qt.BrushStyle.SolidPattern \
            and pen.widthF() <= 1.0 and (x0 == x1 or y0 == y1):
        left, top = math.floor(min(x0, x1)), math.floor(min(y0, y1))
        p.fillRect(QRect(left, top, math.floor(max(x0, x1)) - left + 1, math.floor(max(y0, y1)) - top + 1),
                   pen.color())
        return
    p.setPen(pen)
    p.drawLine(QPointF(x0, y0), QPointF(x1, y1))


def draw_diamonds(p: QPainter, cx: np.ndarray, cy: np.ndarray, size: float) -> None:
    """Diamonds `size` px tall centred on device points, in one call: squares in a frame turned 45°."""
    side = size / math.sqrt(2)
    u, v = (cx + cy) / math.sqrt(2), (cy - cx) / math.sqrt(2)
    p.save()
    p.resetTransform()
    p.rotate(45)
    sides = np.full(len(u), side)
    draw_rects(p, np.column_stack((u - side / 2, v - side / 2, sides, sides)))
    p.restore()


def one_per_cell(cx: np.ndarray, cy: np.ndarray, cell: float, group: np.ndarray | None = None) -> np.ndarray:
    """Indices of the first point in each `cell`-px square (per group): thousands of markers stay few."""
    keys = np.floor(cx / cell) * 1e6 + np.floor(cy / cell)
    if group is not None:
        keys = keys * 16 + group
    return np.unique(keys, return_index=True)[1]


class StaticTexts:
    """Label texts laid out once (QStaticText) and drawn from that layout on every later paint.

    Laying a label out (`drawText` in a rectangle, `elidedText`) cost more than drawing it; the
    rows in view repeat from frame to frame, so their laid-out texts are kept, per font, up to
    `LIMIT` of them.
    """

    LIMIT = 4096

    def __init__(self) -> None:
        self._font = ""
        self._texts: dict[str, QStaticText] = {}
        self._elided: dict[tuple[str, int], QStaticText] = {}
        self._advances: dict[str, float] = {}

    def start(self, font: QFont) -> None:
        """Before a paint: another font (or too many kept) starts afresh."""
        key = font.toString()
        if key != self._font or len(self._texts) + len(self._elided) > self.LIMIT:
            self._font, self._texts, self._elided, self._advances = key, {}, {}, {}

    def text(self, text: str) -> QStaticText:
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = _prepared(text)
        return found

    def advance(self, text: str, metrics: QFontMetrics) -> float:
        """How wide the text is (`QFontMetrics.horizontalAdvance`), remembered."""
        found = self._advances.get(text)
        if found is None:
            found = self._advances[text] = metrics.horizontalAdvance(text)
        return found

    def fitted(self, text: str, width: int, metrics: QFontMetrics) -> QStaticText:
        """The text whole when it fits in `width` px, else cut with an ellipsis to it."""
        return self.text(text) if self.advance(text, metrics) <= width else self.elided(text, width, metrics)

    def elided(self, text: str, width: int, metrics: QFontMetrics) -> QStaticText:
        """The text cut with an ellipsis to `width` px, as `QFontMetrics.elidedText` cuts it."""
        key = (text, width)
        found = self._elided.get(key)
        if found is None:
            found = self._elided[key] = _prepared(metrics.elidedText(text, Qt.TextElideMode.ElideRight, width))
        return found


def _prepared(text: str) -> QStaticText:
    static = QStaticText(text)
    static.setTextFormat(Qt.TextFormat.PlainText)  # agent text: never rich text
    static.setPerformanceHint(QStaticText.PerformanceHint.ModerateCaching)
    return static


def paint_once_per_change(view: pg.ViewBox) -> None:
    """Apply a new range's transform at once: left to the next paint (pyqtgraph's default) it
    moves the items during that paint and Qt paints the whole view a second time."""
    view.sigRangeChanged.connect(lambda *args: view.updateMatrix())


def unlink_hidden_axes(item: pg.PlotItem, names: tuple[str, ...]) -> None:
    """Hidden axes stop following the view: linked, each pan sets their range, drops their picture
    and (with SI prefixes on) lays out their label's HTML again, for nothing anyone sees."""
    for name in names:
        axis = item.getAxis(name)
        axis.hide()
        axis.unlinkFromView()


def repaint_as_one_rect(view: pg.GraphicsView) -> None:
    """Repaint the bounding rectangle of what changed, not the exact region (pyqtgraph's default):
    a pan changes nearly the whole plot anyway, and under a many-piece region each tall axis
    picture was copied ~4x slower (0.3 ms instead of 0.1 for the lane labels)."""
    view.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.BoundingRectViewportUpdate)


def cache_text_items(view: pg.GraphicsView) -> None:
    """Keep the scene's text items (axis titles, legend labels) as device pixmaps, drawn again only
    when their text, colour or transform changes: a pan repaints the whole plot, and each
    QGraphicsTextItem otherwise lays out and draws its QTextDocument on every frame."""
    for item in view.scene().items():
        if isinstance(item, QGraphicsTextItem):
            item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


def set_background(view: pg.GraphicsView, colour: QColor) -> None:
    """The plot's background, painted once per frame: an opaque colour is filled straight into the
    frame (no cached background pixmap copied over it, and no palette fill under it first);
    ~0.5 ms of every pan and zoom frame per plot. A translucent one keeps pyqtgraph's way."""
    view.setBackground(colour)
    opaque = view.backgroundBrush().isOpaque()
    view.setCacheMode(QGraphicsView.CacheModeFlag.CacheNone if opaque else QGraphicsView.CacheModeFlag.CacheBackground)
    view.viewport().setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, opaque)
    view.viewport().setAutoFillBackground(not opaque)


def colour_axes(item: pg.PlotItem, names: tuple[str, ...], text: QColor, muted: QColor) -> None:
    for name in names:
        axis = item.getAxis(name)
        axis.setPen(muted)
        axis.setTextPen(text)


def time_label(value: float, spacing: float) -> str:
    """A tick label for seconds since run start, as precise as the tick spacing: 45 s, 2 m 30 s, 12 h."""
    sign, value = ("-" if value < 0 else ""), abs(value)
    places = max(0, math.ceil(-math.log10(spacing))) if 0 < spacing < 1 else 0
    hours, rest = divmod(value, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours >= 1:
        parts.append(f"{int(hours)} h")
    if minutes >= 1 and spacing < 3600:
        parts.append(f"{int(minutes)} m")
    if spacing < 60 and (secs >= 0.5 * 10 ** -places or not parts):
        parts.append(f"{secs:.{places}f} s")
    return sign + " ".join(parts or ["0 s"])


def compact(value: float) -> str:
    """1.2k, 3.4M, 5.6G: axis numbers that stay narrow."""
    size = abs(value)
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


@lru_cache(maxsize=65_536)
def one_line(text: str, limit: int = 200) -> str:
    """Agent text for a label: one line, hidden characters marked, at most `limit` characters
    (huge names stay cheap to draw: only a prefix is looked at; remembered, as frames repeat names)."""
    return shown_line(text[:limit * 4], limit)


def span_tooltip(data: TimelineData, lane: int, now: float, folded: int = 0) -> str:
    """Hover text for a lane; agent text shows literally (`model.plain.tooltip`); `folded`: spans
    collapsed into it."""
    start, is_open = float(data.start[lane]), bool(data.open[lane])
    end = max(start, now) if is_open else float(data.end[lane])
    when = (f"an instant, at +{format_duration(start)}" if end <= start and not is_open else
            f"{'running for' if is_open else 'took'} {format_duration(end - start)}, "
            f"from +{format_duration(start)}")
    lines = [one_line(data.names[lane]),
             f"{one_line(data.kind_names[lane], 40)} · {one_line(data.status_names[lane], 40)}", when,
             f"tokens {int(data.input_tokens[lane]):,} in / {int(data.output_tokens[lane]):,} out · "
             f"${float(data.cost[lane]):.4f}"]
    if data.status[lane] == ERROR:
        lines.append("failed — click for the error")
    if folded:
        lines.append(f"{folded:,} spans inside, collapsed (Right, or click ▸ beside its name, to expand)")
    return shown_tooltip(*lines)  # every line is already one_line'd (visible)


def header_text(run: rm.Run, data: TimelineData, counts: tuple[int, int] | None = None) -> str:
    """The run in one line: title, status, spans, failures, open spans, tokens and cost. `counts`
    (failed, open) as kept by `SpanCounts`; counted over every span when not given."""
    errors, running = counts if counts is not None else (int((data.status == ERROR).sum()), int(data.open.sum()))
    usage = run.usage
    spans = f"{len(data):,} spans" if data.complete else f"first {len(data):,} spans (loading the rest…)"
    parts = [one_line(run.title), one_line(run.status, 40), spans]
    parts += [f"{errors:,} failed"] if errors else []
    parts += [f"{running:,} open"] if running else []
    if usage.total_tokens or usage.cost_usd:
        parts += [f"{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens", f"${usage.cost_usd:,.4f}"]
    else:  # say it is absent rather than show a zero that looks measured
        parts += ["no token or cost data"]
    return " · ".join(parts)


def legend() -> QWidget:
    """Kind colours, error and running marks, so the waterfall reads without a manual."""
    entries = [(kind.replace("_", " "), colour) for kind, colour in SPAN_KIND_COLOURS.items()]
    entries += [("failed", ERROR_COLOUR), ("running", RUNNING_COLOUR)]
    box = QWidget()
    flow = FlowLayout(box, spacing=10)  # a narrow timeline wraps the key instead of cutting names off
    for name, colour in entries:
        entry = QWidget(box)
        row = QHBoxLayout(entry)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(3)  # swatch to its name
        swatch = QLabel("■", textFormat=Qt.TextFormat.PlainText)
        swatch.setStyleSheet(f"color: {colour};")
        row.addWidget(swatch)
        row.addWidget(QLabel(name, textFormat=Qt.TextFormat.PlainText))
        flow.addWidget(entry)
    HeightForWidth(box)
    return box

