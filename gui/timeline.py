"""The run timeline: a waterfall of every span, cumulative tokens and cost below it, details on the right.

All store reads and layouts run on the store runner; the GUI thread only swaps
in finished arrays. Bus changes for the shown run are collected for a short
while, then only the changed spans are fetched: a span that merely finished
updates its lane in place, a new span triggers a fresh layout off the GUI thread.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QCursor, QKeyEvent, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QToolTip, QVBoxLayout, QWidget

from model.services import Services
from model.timeline_data import ERROR, TimelineData, TokenSeries
from store import readmodel as rm
from store.bus import RESET, Change
from store.native import NativeSource
from store.source import SpanTable

from .palette import ERROR_COLOUR, RUNNING_COLOUR, SPAN_KIND_COLOURS
from .span_details import SpanDetails
from .timeline_axes import MIN_LABEL_LANE_PX, LaneAxis, TimeAxis
from .timeline_item import SpanItem
from .timeline_tokens import RIGHT_AXIS_WIDTH, TokensPlot
from .timeline_util import format_duration

LANE_AXIS_WIDTH = 230
REFRESH_MS = 150
TICK_MS = 200
FULL_RELOAD_OVER = 2000
"""More changed spans than this in one go: reload the run instead of fetching rows."""
FIT_LANE_PX = 24
LIVE_STATUSES = ("pending", "running", "waiting")


@dataclass(frozen=True, slots=True)
class Loaded:
    run: rm.Run
    data: TimelineData
    tokens: TokenSeries


@dataclass(frozen=True, slots=True)
class Changed:
    run: rm.Run | None
    rows: SpanTable
    relaid: tuple[TimelineData, TokenSeries] | None


def load_run(source: NativeSource, run_id: str) -> Loaded:
    run: Any = source.node("run", run_id)
    data = TimelineData.from_table(source.span_table(run_id), run.started_at.timestamp())
    return Loaded(run, data, data.token_series())


def load_changes(source: NativeSource, data: TimelineData, run_id: str, span_ids: list[str],
                 run_changed: bool) -> Changed:
    """Fetch changed rows; when they reshape the tree, lay out a copy here, off the GUI thread."""
    rows = source.span_table(run_id, span_ids)
    run: Any = source.node("run", run_id) if run_changed else None
    relaid = None
    if data.needs_relayout(rows):
        new = data.relaid_out(rows)
        relaid = (new, new.token_series())
    return Changed(run, rows, relaid)


class TimelinePanel(QWidget):
    span_selected = Signal(str)
    """A span the operator clicked (not emitted by `select_span`)."""

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.run_id: str | None = None
        self.run: rm.Run | None = None
        self.data: TimelineData | None = None
        self.selected_id: str | None = None
        self._generation = 0
        self._busy = False
        self._dirty: set[str] = set()
        self._run_dirty = False
        self._reload = False
        self._follow = True
        self._last_tip = -1
        self._build()
        self._refresh_timer = _timer(self, REFRESH_MS, self._refresh, single=True)
        self._tick_timer = _timer(self, TICK_MS, self._tick, single=False)
        services.bridge.changes.connect(self._on_changes)
        self._apply_palette()
        self._show_header()

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.header = QLabel(textFormat=Qt.TextFormat.PlainText)
        self.header.setWordWrap(True)
        self.lanes = LaneAxis(lambda: self.data)
        self.plot = pg.PlotWidget(axisItems={"left": self.lanes, "bottom": TimeAxis("bottom")})
        self.plot.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.plot.installEventFilter(self)
        item = self.plot.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setLabel("bottom", "time since run start")
        item.showAxis("right")
        item.getAxis("right").setStyle(showValues=False, tickLength=0)
        item.getAxis("right").setTicks([[], []])
        item.getAxis("right").setWidth(RIGHT_AXIS_WIDTH)
        self.view = item.vb
        self.view.invertY(True)
        self.view.disableAutoRange()
        self.view.sigRangeChangedManually.connect(self._stop_following)
        _paint_once_per_change(self.view)
        self.item = SpanItem()
        self.plot.addItem(self.item)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.tokens = TokensPlot(LANE_AXIS_WIDTH)
        self.tokens.setXLink(self.plot)
        _paint_once_per_change(self.tokens.getPlotItem().vb)
        self.details = SpanDetails(self.services)
        plots = QSplitter(Qt.Orientation.Vertical)
        plots.addWidget(self.plot)
        plots.addWidget(self.tokens)
        plots.setStretchFactor(0, 5)
        plots.setStretchFactor(1, 1)
        plots.setSizes([520, 130])
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(plots)
        self.splitter.addWidget(self.details)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([900, 360])
        top = QHBoxLayout()
        top.addWidget(self.header, 1)
        top.addWidget(_legend())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.splitter, 1)

    # -- public API -------------------------------------------------------------------------
    def show_run(self, run_id: str | None) -> None:
        """Show a run (None clears); showing the run already shown keeps the view as it is."""
        if run_id == self.run_id and run_id is not None:
            return
        self._generation += 1
        self.run_id, self.run, self.data = run_id, None, None
        self._busy, self._reload, self._run_dirty, self._follow = False, False, False, True
        self._dirty.clear()
        self._tick_timer.stop()
        self.item.set_data(None, 0.0)
        self.tokens.set_series(None)
        if self.selected_id is None:
            self.details.clear()
        self._show_header("Loading…" if run_id else None)
        if run_id is not None:
            self._submit(load_run, self.services.source, run_id, on_done=self._loaded)

    def select_span(self, span_id: str) -> None:
        """Select a span, bring it into view and show its details (applied after loading if needed)."""
        self.selected_id = span_id
        self.details.show_span(span_id)
        lane = self.data.lane_of.get(span_id, -1) if self.data is not None else -1
        self.item.select(lane)
        if lane >= 0:
            self.reveal(lane)

    def fit(self) -> None:
        """Show the whole run: every lane, from its start to its end (or now)."""
        self._follow = True
        if self.data is None or not len(self.data):
            return
        x0, x1 = self.data.extent(self.item.now)
        height = max(self.view.height(), 1.0)
        lanes = max(float(len(self.data)), height / FIT_LANE_PX)
        self.view.setRange(xRange=(x0, max(x1, x0 + 1e-3)), yRange=(0, lanes), padding=0.02)

    def show_window(self, start_s: float, end_s: float, first_lane: float, last_lane: float) -> None:
        """Show a time window (seconds since run start) and a lane range; a live run stops being followed."""
        self._follow = False
        self.view.setRange(xRange=(start_s, end_s), yRange=(first_lane, last_lane), padding=0)

    def zoom(self, factor: float) -> None:
        """Zoom both axes around the view's centre (factor < 1 zooms in)."""
        self._follow = False
        self.view.scaleBy((factor, factor))

    def reveal(self, lane: int) -> None:
        data = self.data
        if data is None:
            return
        self._follow = False
        (left, right), (top, bottom) = self.view.viewRange()
        lane_px = self.view.height() / max(bottom - top, 1e-9)
        count = (bottom - top) if lane_px >= MIN_LABEL_LANE_PX else self.view.height() / 20
        if lane_px < MIN_LABEL_LANE_PX or not top <= lane <= bottom - 1:
            top = min(max(0.0, lane + 0.5 - count / 2), max(0.0, len(data) - count))
            self.view.setYRange(top, top + count, padding=0)
        start, end = float(data.start[lane]), float(data.ends(self.item.now)[lane])
        px_per_s = self.view.width() / max(right - left, 1e-12)
        if start < left or end > right or (end - start) * px_per_s < 8:
            pad = max((end - start) * 0.5, 1e-3)
            self.view.setXRange(start - pad, end + pad, padding=0)

    # -- loading ----------------------------------------------------------------------------
    def _submit(self, fn: Callable[..., Any], *args: Any, on_done: Callable[[Any], None]) -> None:
        generation = self._generation
        self._busy = True

        def done(result: Any) -> None:
            if generation == self._generation:
                self._busy = False
                on_done(result)
                self._arm()

        def failed(exc: BaseException) -> None:
            if generation == self._generation:
                self._busy = False
                self._show_header(f"Could not load the run: {exc}")

        self.services.runner.submit(fn, *args, on_done=done, on_error=failed)

    def _loaded(self, loaded: Loaded) -> None:
        first = self.data is None
        self.run = loaded.run
        self._install(loaded.data, loaded.tokens)
        if first:
            self.fit()
        if self.selected_id is not None:
            if self.selected_id in loaded.data.lane_of:
                self.select_span(self.selected_id)
            elif first:
                self.selected_id = None
                self.details.clear()

    def _install(self, data: TimelineData, tokens: TokenSeries) -> None:
        self.data = data
        self.item.live = self._live()
        self.item.set_data(data, self._now())
        self.tokens.set_series(tokens, until=self._now())
        lane = data.lane_of.get(self.selected_id, -1) if self.selected_id else -1
        self.item.select(lane)
        self._update_limits()
        self.lanes.picture = None
        self.lanes.update()
        self._show_header()
        if self._follow:
            self.fit()
        if self.item.live:
            self._tick_timer.start()
        else:
            self._tick_timer.stop()

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if self.run_id is None:
            return
        for change in changes:
            if change.op == RESET or (change.entity == "span" and change.op == "delete"
                                      and change.parent("run") == self.run_id):
                self._reload = True
            elif change.entity == "span" and change.parent("run") == self.run_id:
                self._dirty.add(change.id)
            elif change.entity == "run" and change.id == self.run_id:
                self._run_dirty = True
        self._arm()

    def _arm(self) -> None:
        if (self._dirty or self._run_dirty or self._reload) and not self._refresh_timer.isActive():
            self._refresh_timer.start()

    def _refresh(self) -> None:
        if self._busy or self.run_id is None:
            return
        source = self.services.source
        if self._reload or self.data is None or len(self._dirty) > FULL_RELOAD_OVER:
            self._reload, self._run_dirty = False, False
            self._dirty.clear()
            self._submit(load_run, source, self.run_id, on_done=self._loaded)
            return
        ids, run_changed = sorted(self._dirty), self._run_dirty
        self._dirty.clear()
        self._run_dirty = False
        self._submit(load_changes, source, self.data, self.run_id, ids, run_changed,
                     on_done=lambda changed: self._changed(changed, set(ids)))

    def _changed(self, changed: Changed, ids: set[str]) -> None:
        if changed.run is not None:
            self.run = changed.run
        if changed.relaid is not None:
            self._install(*changed.relaid)
        elif self.data is not None:
            self.data.update(changed.rows)
            self._install(self.data, self.data.token_series())
        if self.selected_id in ids:
            self.details.show_span(self.selected_id)

    # -- time -------------------------------------------------------------------------------
    def _live(self) -> bool:
        return self.run is not None and self.run.status in LIVE_STATUSES

    def _now(self) -> float:
        """Where open spans end: the clock while the run is live, else the run's end."""
        if self.run is None or self.data is None:
            return 0.0
        if self._live():
            return time.time() - self.data.t0
        if self.run.ended_at is not None:
            return self.run.ended_at.timestamp() - self.data.t0
        finished = self.data.end[~self.data.open]
        return float(finished.max()) if len(finished) else 0.0

    def _tick(self) -> None:
        if self.data is None or not self.item.live:
            self._tick_timer.stop()
            return
        self.item.set_now(self._now())
        if self.tokens.series is not None and len(self.tokens.series.t) < 20_000:  # keep ticks cheap
            self.tokens.set_series(self.tokens.series, until=self.item.now)
        self._update_limits()
        if self._follow:
            self.fit()

    def _update_limits(self) -> None:
        if self.data is None or not len(self.data):
            return
        x0, x1 = self.data.extent(self.item.now)
        pad = max((x1 - x0) * 0.1, 1.0)
        self.view.setLimits(xMin=x0 - pad, xMax=x1 + pad, yMin=-1, yMax=len(self.data) + 1,
                            minXRange=1e-6, minYRange=2)

    def _stop_following(self, *args: object) -> None:
        self._follow = False

    # -- mouse and keys ---------------------------------------------------------------------
    def _lane_at(self, scene_pos: QPointF) -> int:
        if self.data is None or not self.view.sceneBoundingRect().contains(scene_pos):
            return -1
        point = self.view.mapSceneToView(scene_pos)
        px_w, px_h = self.view.viewPixelSize()
        return self.data.hit(point.x(), point.y(), 4 * px_w, 2 * px_h, self.item.now)

    def _hover(self, scene_pos: QPointF) -> None:
        lane = self._lane_at(scene_pos)
        if lane == self._last_tip:
            return
        self._last_tip = lane
        if lane < 0:
            QToolTip.hideText()
        else:
            QToolTip.showText(QCursor.pos(), self.tooltip(lane), self.plot)

    def tooltip(self, lane: int) -> str:
        """Hover text for a lane: agent text escaped, so it always shows literally."""
        assert self.data is not None
        data = self.data
        end = data.ends(self.item.now)[lane]
        duration = format_duration(float(end - data.start[lane]))
        lines = [data.names[lane][:200], f"{data.kind_names[lane]} · {data.status_names[lane]}",
                 f"{'running for' if data.open[lane] else 'took'} {duration}, "
                 f"from +{format_duration(float(data.start[lane]))}",
                 f"tokens {int(data.input_tokens[lane]):,} in / {int(data.output_tokens[lane]):,} out · "
                 f"${float(data.cost[lane]):.4f}"]
        if data.status[lane] == ERROR:
            lines.append("failed — click for the error")
        body = "<br>".join(html.escape(line) for line in lines)
        return f"<p style='white-space:pre'>{body}</p>"

    def _clicked(self, event: Any) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        lane = self._lane_at(event.scenePos())
        if lane >= 0:
            self.select_lane(lane)

    def select_lane(self, lane: int) -> None:
        """What a click on a span does: select it, show its details, tell listeners."""
        if self.data is None or not 0 <= lane < len(self.data):
            return
        span_id = self.data.ids[lane]
        self.selected_id = span_id
        self.item.select(lane)
        self.details.show_span(span_id)
        self.span_selected.emit(span_id)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.plot and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            action = {Qt.Key.Key_F: self.fit, Qt.Key.Key_Plus: lambda: self.zoom(0.5),
                      Qt.Key.Key_Equal: lambda: self.zoom(0.5), Qt.Key.Key_Minus: lambda: self.zoom(2.0)
                      }.get(Qt.Key(event.key()))
            if action is not None and not event.modifiers() & Qt.KeyboardModifier.ControlModifier:
                action()
                return True
        return super().eventFilter(watched, event)

    # -- looks ------------------------------------------------------------------------------
    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_palette()
        super().changeEvent(event)

    def _apply_palette(self) -> None:
        pal = self.palette()
        background, text = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
        muted = QColor(text)
        muted.setAlpha(110)
        self.plot.setBackground(background)
        for name in ("left", "bottom", "right"):
            axis = self.plot.getPlotItem().getAxis(name)
            axis.setPen(muted)
            axis.setTextPen(text)
        self.lanes.text_colour, self.lanes.muted_colour = text, muted
        band = QColor(text)
        band.setAlpha(14)
        self.item.text_colour, self.item.band_colour, self.item.background = text, band, background
        self.item.select_colour = QColor(pal.color(QPalette.ColorRole.Highlight))
        self.item.update()
        self.tokens.apply_colours(background, text, muted)

    def _show_header(self, message: str | None = None) -> None:
        run, data = self.run, self.data
        if message is not None or run is None or data is None:
            self.header.setText(message or "Select a run to see its timeline.")
            return
        errors, running = int((data.status == ERROR).sum()), int(data.open.sum())
        usage = run.usage
        parts = [run.title[:200], run.status, f"{len(data):,} spans"]
        parts += [f"{errors:,} failed"] if errors else []
        parts += [f"{running:,} open"] if running else []
        parts += [f"{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens",
                  f"${usage.cost_usd:,.4f}"]
        self.header.setText(" · ".join(parts))


def _paint_once_per_change(view: pg.ViewBox) -> None:
    """Apply a new range's transform at once: left to the next paint (pyqtgraph's default) it
    moves the items during that paint and Qt paints the whole view a second time."""
    view.sigRangeChanged.connect(lambda *args: view.updateMatrix())


def _timer(parent: QObject, ms: int, slot: Callable[[], None], *, single: bool) -> QTimer:
    timer = QTimer(parent)
    timer.setInterval(ms)
    timer.setSingleShot(single)
    timer.timeout.connect(slot)
    return timer


def _legend() -> QWidget:
    """Kind colours, error and running marks, so the waterfall reads without a manual."""
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(8)
    entries = [(kind.replace("_", " "), colour) for kind, colour in SPAN_KIND_COLOURS.items()]
    entries += [("failed", ERROR_COLOUR), ("running", RUNNING_COLOUR)]
    for name, colour in entries:
        swatch = QLabel("■", textFormat=Qt.TextFormat.PlainText)
        swatch.setStyleSheet(f"color: {colour};")
        row.addWidget(swatch)
        row.addWidget(QLabel(name, textFormat=Qt.TextFormat.PlainText))
        row.addSpacing(4)
    return box

