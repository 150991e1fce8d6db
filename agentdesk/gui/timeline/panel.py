"""The run timeline: a waterfall of every span, cumulative tokens and cost below it, details on the right.

`TimelineFeed` (model/) loads and follows the run off the GUI thread; this
panel only shows what it hands over, keeps the view (fit, follow a live run,
reveal a selection) and turns mouse and keys into selections and zooms.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QObject, QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QCursor, QKeyEvent, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QMenu,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.shared.flow import HeightForWidth
from agentdesk.gui.timeline.axes import MIN_LABEL_LANE_PX, LaneAxis, waterfall_plot
from agentdesk.gui.timeline.details import SpanDetails
from agentdesk.gui.timeline.drawing import colour_axes, header_text, legend, set_background, span_tooltip
from agentdesk.gui.timeline.findbar import FindBar
from agentdesk.gui.timeline.minimap import Minimap
from agentdesk.gui.timeline.path_panel import PathPanel
from agentdesk.gui.timeline.span_item import SpanItem
from agentdesk.gui.timeline.tokens import RIGHT_AXIS_WIDTH, TokensPlot
from agentdesk.model.messages.sending import messaging_refusal
from agentdesk.model.plain import shown_line
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.model.timeline.feed import TimelineFeed
from agentdesk.store import readmodel as rm
from agentdesk.store.analysis.layout.counts import SpanCounts
from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.analysis.layout.rows import Rows
from agentdesk.store.analysis.layout.tools import Matches, PathLanes, find, path_of

NARROW_PX = 1300
"""Narrower than this (up to a 1920 px screen with the docks open), the details go under the plots: beside
them they were a column too narrow for their tabs and the output's lines."""
COMPACT_PX = 1000
"""Narrower than this, the lane labels get a narrower column as well (names elide, indents show depth)."""
LABELS_PX, COMPACT_LABELS_PX, LABELS_MAX_PX = 190, 130, 360
DETAILS_SHARE = {True: 0.45, False: 0.3}
"""The span details' default share of the timeline: under the plots (True) and beside them (False)."""
TICK_MS = 200
FIT_LANE_PX = 24
class TimelinePanel(QWidget):
    span_selected = Signal(str)
    """A span the operator clicked (not emitted by `select_span`)."""
    message_requested = Signal(str, str)
    """(agent id, agent name or its id): "Send a message…" in the run's context menu (right click)."""

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.feed = TimelineFeed(services, self)
        self.feed.changed.connect(self._on_feed)
        self.feed.failed.connect(self._show_header)
        self.selected_id: str | None = None
        self.path: PathLanes | None = None
        self.path_on = False
        self.matches: Matches | None = None
        self.match_index = -1
        self._path_latest = LatestTask(
            services.runner, on_error=lambda exc: self._show_header(f"Could not find the critical path: {exc}"))
        self._find_latest = LatestTask(services.runner, on_error=self._find_failed)
        self._follow = True
        """Fitted: a live run's new spans and its growing end keep the whole run in view."""
        self._pinned = False
        """Pinned to now (End, or a zoom that kept the end in view): the time window keeps its width and
        slides with the run's end; the lanes follow new spans when the last one was in view."""
        self._pinned_rows = 0.0
        self._wanted_labels: tuple[tuple[int, int], int] = ((0, 0), 0)
        """(layout id, lanes measured) and the width the lane names want."""
        self._last_tip = -1
        self.counts = SpanCounts()
        self._build()
        self._tick_timer = QTimer(self)
        self._tick_timer.setInterval(TICK_MS)
        self._tick_timer.timeout.connect(self._tick)
        self._apply_palette()
        self._show_header()

    @property
    def run_id(self) -> str | None:
        return self.feed.run_id

    @property
    def run(self) -> rm.Run | None:
        return self.feed.run

    @property
    def data(self) -> TimelineData | None:
        """The run's layout: arrays by lane (every span, collapsed or not)."""
        return self.feed.data

    @property
    def rows(self) -> Rows | None:
        """The lanes shown as rows (sub-trees may be collapsed); y in the waterfall is a row."""
        return self.feed.rows

    @property
    def shown(self) -> TimelineData | None:
        """The rows as the waterfall draws them (the layout itself when nothing is collapsed)."""
        return self.item.data

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.header = QLabel(textFormat=Qt.TextFormat.PlainText)
        self.header.setWordWrap(True)
        HeightForWidth(self.header)
        self.lanes = LaneAxis(lambda: self.item.data, lambda: self.rows)
        self.lanes.toggled.connect(self.toggle_row)
        self.plot = waterfall_plot(self.lanes, RIGHT_AXIS_WIDTH)
        self.plot.installEventFilter(self)
        self.setFocusProxy(self.plot)
        self.view = self.plot.getPlotItem().vb
        self.view.sigRangeChangedManually.connect(self._stop_following)
        self.item = SpanItem()
        self.plot.addItem(self.item)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.tokens = TokensPlot(LABELS_PX)  # as wide as the lane labels: both plot areas start at one x
        self.tokens.setXLink(self.plot)
        self.details = SpanDetails(self.services)
        self.flagged_ids: frozenset[str] = frozenset()
        self.minimap = Minimap()
        self.minimap.window_moved.connect(self._minimap_moved)
        self.view.sigXRangeChanged.connect(self._sync_minimap)
        self.view.sigResized.connect(self._sync_minimap)
        self.view.sigResized.connect(self._keep_lane_height)
        self._view_height = 0.0
        waterfall = QWidget()
        column = QVBoxLayout(waterfall)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(self.minimap)
        column.addWidget(self.plot, 1)
        plots = QSplitter(Qt.Orientation.Vertical)
        plots.addWidget(waterfall)
        plots.addWidget(self.tokens)
        plots.setStretchFactor(0, 5)
        plots.setStretchFactor(1, 1)
        plots.setSizes([520, 130])
        self.path_panel = PathPanel()
        self.path_panel.lane_clicked.connect(self._path_lane_clicked)
        # the critical path list is a tab beside the span's details: it fits under the plots too
        side = QTabWidget()
        side.setDocumentMode(True)
        side.addTab(self.details, "Span")
        side.addTab(self.path_panel, "Critical path")
        side.setTabVisible(1, False)
        self.side = side
        self.find_bar = FindBar()
        self.find_bar.search.connect(self.find_spans)
        self.find_bar.step.connect(self.step_match)
        self.find_bar.closed.connect(self._find_closed)
        column.insertWidget(0, self.find_bar)
        # in a scroll area, so that under the plots (a narrow window) the details can be short
        holder = QScrollArea()
        holder.setWidgetResizable(True)
        holder.setFrameShape(QFrame.Shape.NoFrame)
        holder.setWidget(side)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(plots)
        self.splitter.addWidget(holder)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([1000, 300])
        self._split_shares: dict[str, float] = {}
        """The details pane's share of the splitter, per orientation, as the operator last dragged it."""
        self.splitter.splitterMoved.connect(self._remember_split)
        self._details_filled = False
        self.details.filled.connect(self._details_fill_changed)
        # Title and figures on one full-width line, the colour key under it: side by side, a long
        # run title was squeezed into a one-word-wide column.
        top = QVBoxLayout()
        top.setSpacing(2)
        top.addWidget(self.header)
        top.addWidget(legend())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.splitter, 1)

    # -- public API -------------------------------------------------------------------------
    def show_run(self, run_id: str | None) -> None:
        """Show a run (None clears); showing the run already shown keeps the view as it is."""
        if run_id == self.run_id and run_id is not None and (self.data is not None or self.feed.busy):
            return
        self.feed.show(run_id)
        self._path_latest.cancel()
        self._find_latest.cancel()
        self.path, self.matches, self.match_index = None, None, -1
        self.item.set_path(None)
        self.item.set_matches(None)
        self.minimap.set_marks(np.zeros(0), np.zeros((0, 2)))
        self.path_panel.show_path(None)
        self._follow, self._pinned = True, False
        self._tick_timer.stop()
        self.item.set_data(None, 0.0)
        self.item.set_overview(None)
        self.minimap.set_overview(None)
        self.tokens.set_series(None)
        if run_id is None:
            self.selected_id = None
        if self.selected_id is None:
            self.details.clear()
        self._show_header("Loading…" if run_id else None)

    def select_span(self, span_id: str) -> None:
        """Select a span, bring it into view and show its details (applied after loading if needed)."""
        self.selected_id = span_id
        self.details.show_span(span_id)
        lane = self.data.lane_of.get(span_id, -1) if self.data is not None else -1
        if lane >= 0:
            self.expand_to(lane)
        self.item.select(self._row(lane))
        if lane >= 0:
            self.reveal(lane)

    # -- collapsed sub-trees ----------------------------------------------------------------
    def _row(self, lane: int) -> int:
        """The lane's row on screen; -1 when none or hidden in a collapsed sub-tree."""
        rows = self.rows
        if lane < 0 or rows is None or rows.data is not self.data:
            return lane if rows is None else -1
        return rows.row(lane)

    def _lane(self, row: int) -> int:
        rows = self.rows
        if row < 0 or rows is None or rows.data is not self.data:
            return row
        return int(rows.shown[row]) if row < len(rows) else -1

    def expand_to(self, lane: int) -> None:
        """Expand every collapsed ancestor of a lane, so it has a row (find, F3, the path list)."""
        rows = self.rows
        if rows is not None and rows.data is self.data and not rows.visible(lane):
            self._follow = False  # the operator is looking at something: a live run's fit would move it
            self.feed.set_collapsed([up for up in rows.ancestors(lane) if rows.collapsed[up]], False)

    def set_collapsed(self, lane: int, collapsed: bool) -> None:
        """Collapse or expand one span's sub-tree (a click on its disclosure mark, or Left / Right)."""
        rows = self.rows
        if rows is None or rows.data is not self.data or not 0 <= lane < len(rows.data):
            return
        if bool(rows.collapsed[lane]) != collapsed and (rows.visible(lane) or not collapsed):
            self._follow = False
            self.feed.set_collapsed([lane], collapsed)

    def toggle_row(self, row: int) -> None:
        """The disclosure mark of a row was clicked: fold or unfold its sub-tree."""
        lane = self._lane(row)
        rows = self.rows
        if lane >= 0 and rows is not None:
            self.set_collapsed(lane, not bool(rows.collapsed[lane]))

    def expand_all(self, expanded: bool = True) -> None:
        """Every sub-tree expanded (key *), or the default folding again (key /)."""
        self.feed.expand_all(expanded)

    @property
    def following(self) -> bool:
        """Whether a live run's growth moves the view (fitted or pinned to now)."""
        return self._follow or self._pinned

    def follow_now(self) -> None:
        """Key End: follow the run again. Zoomed in, the time window keeps its width and ends at now (and
        the last lanes come into view); zoomed out, the whole run is fitted."""
        if self.data is None or not len(self.data):
            self.fit()
            return
        (left, right), _ = self.view.viewRange()
        x0, x1 = self._run_span()
        if right - left >= (x1 - x0) * 0.98:
            self.fit()
            return
        self._follow, self._pinned = False, True
        self._pin(tail=True)

    def _run_span(self) -> tuple[float, float]:
        """The run's time range in view terms: its first start to its last end, or now while it runs."""
        assert self.data is not None
        x0, x1 = self.data.extent(self.item.now)
        if self.feed.live or not self.data.complete:
            x1 = max(x1, self.feed.now())
        return x0, x1

    def _pin(self, *, tail: bool = False) -> None:
        """Slide the time window so that it ends at the run's end (now); show the newest lanes when the
        last lane was already in view (or `tail`)."""
        if self.data is None or not len(self.data):
            return
        self._update_limits()
        (left, right), (top, bottom) = self.view.viewRange()
        _, x1 = self._run_span()
        width = right - left
        shown = self.item.data if self.item.data is not None else self.data
        rows = float(len(shown))
        lanes = bottom - top
        at_bottom = tail or bottom >= self._pinned_rows - 0.5
        self._pinned_rows = rows
        if at_bottom and rows > bottom:
            top, bottom = max(0.0, rows - lanes + 1), max(rows + 1, lanes)
        self.view.setRange(xRange=(x1 - width * 0.98, x1 + width * 0.02), yRange=(top, bottom), padding=0)

    def fit(self) -> None:
        """Show the whole run: every lane, from its start to its end (or now)."""
        self._follow, self._pinned = True, False
        if self.data is None or not len(self.data):
            return
        self._update_limits()
        x0, x1 = self.data.extent(self.item.now)
        if not self.data.complete:  # only the first spans so far: frame the whole run already
            x1 = max(x1, self.feed.now())
        height = max(self.view.height(), 1.0)
        shown = self.item.data if self.item.data is not None else self.data
        lanes = max(float(shown.total), height / FIT_LANE_PX)
        self.view.setRange(xRange=(x0, max(x1, x0 + 1e-3)), yRange=(0, lanes), padding=0.02)

    def show_window(self, start_s: float, end_s: float, first_lane: float, last_lane: float) -> None:
        """Show a time window (seconds since run start) and a lane range; a live run stops being followed."""
        self._follow = self._pinned = False
        self.view.setRange(xRange=(start_s, end_s), yRange=(first_lane, last_lane), padding=0)

    def zoom(self, factor: float) -> None:
        """Zoom both axes around the view's centre (factor < 1 zooms in)."""
        self._follow = self._pinned = False
        self.view.scaleBy((factor, factor))

    def reveal(self, lane: int) -> None:
        """Bring a lane's row (and its bar) into view."""
        data, row = self.data, self._row(lane)
        if data is None or row < 0:
            return
        rows_shown = len(self.item.data) if self.item.data is not None else len(data)
        (left, right), (top, bottom) = self.view.viewRange()
        lane_px = self.view.height() / max(bottom - top, 1e-9)
        count = (bottom - top) if lane_px >= MIN_LABEL_LANE_PX else self.view.height() / 20
        if lane_px < MIN_LABEL_LANE_PX or not top <= row <= bottom - 1:
            self._follow = self._pinned = False  # the view moves to the span: stop following the run
            top = min(max(0.0, row + 0.5 - count / 2), max(0.0, rows_shown - count))
            self.view.setYRange(top, top + count, padding=0)
        start, end = float(data.start[lane]), float(data.ends(self.item.now)[lane])
        px_per_s = self.view.width() / max(right - left, 1e-12)
        if start < left or end > right or (end - start) * px_per_s < 8:
            self._follow = self._pinned = False
            pad = max((end - start) * 0.5, 1e-3)
            self.view.setXRange(start - pad, end + pad, padding=0)

    # -- critical path ----------------------------------------------------------------------
    def toggle_critical_path(self) -> None:
        """Key P: highlight the chain of spans that set the run's end time, list it, fade the rest."""
        self.path_on = not self.path_on
        if self.path_on:
            self._compute_path()
        else:
            self._path_latest.cancel()
            self.path = None
            self.item.set_path(None)
            self.minimap.set_marks(path=np.zeros((0, 2)))
            self.path_panel.show_path(None)
            self.side.setTabVisible(1, False)
            self.side.setCurrentIndex(0)
        self._show_header()

    def _compute_path(self) -> None:
        if self.data is None or self.run_id is None:
            return
        self._path_latest.start(self._find_path(self.run_id, self.data))

    async def _find_path(self, run_id: str, data: TimelineData) -> None:
        self._path_ready(await self.services.runner.run(path_of, self.services.source, run_id, data))

    def _path_ready(self, path: PathLanes) -> None:
        if not self.path_on or path.data is not self.data:
            return
        self.path = path
        data = path.data
        self._mark_rows()
        ends = data.ends(self.item.now)
        self.minimap.set_marks(path=np.column_stack((data.start[path.lanes], ends[path.lanes])))
        self.path_panel.show_path(path)
        if not self.side.isTabVisible(1):
            self.side.setTabVisible(1, True)
            self.side.setCurrentIndex(1)
        self._show_header()

    def _path_lane_clicked(self, lane: int) -> None:
        self.select_lane(lane)
        self.reveal(lane)

    # -- find -------------------------------------------------------------------------------
    def find_spans(self, query: str, keep_place: bool = False) -> None:
        """Search the run (the store's query language, on the runner); matches outlined and counted."""
        self._find_latest.cancel()
        if not query.strip() or self.run_id is None or self.data is None:
            self.matches, self.match_index = None, -1
            self.item.set_matches(None)
            self.minimap.set_marks(matches=np.zeros(0))
            self.find_bar.show_message("")
            return
        self.find_bar.show_message("searching…")
        place = self.match_index if keep_place else -1
        self._find_latest.start(self._find(self.run_id, query, self.data, place))

    async def _find(self, run_id: str, query: str, data: TimelineData, place: int) -> None:
        self._found(await self.services.runner.run(find, self.services.source, run_id, query, data), place)

    def _found(self, matches: Matches, place: int) -> None:
        if matches.data is not self.data:
            self.find_spans(matches.query, keep_place=True)
            return
        self.matches = matches
        self._mark_rows()
        self.minimap.set_marks(matches=matches.data.start[matches.lanes])
        self.match_index = min(place, len(matches.lanes) - 1)
        if place < 0 and len(matches.lanes):
            self.step_match(1)
        else:
            self.find_bar.show_count(self.match_index, matches.total, len(matches.lanes))

    def set_flagged(self, span_ids: frozenset[str]) -> None:
        """Spans an operator noted or labelled (the window's marks cache): flagged in the waterfall."""
        self.flagged_ids = span_ids
        self._mark_rows()

    def _flag_lanes(self) -> np.ndarray | None:
        data = self.data
        if not self.flagged_ids or data is None:
            return None
        lanes = [lane for span in self.flagged_ids if (lane := data.lane_of.get(span, -1)) >= 0]
        return np.array(sorted(lanes), dtype=np.intp) if lanes else None

    def _mark_rows(self) -> None:
        """The critical path, the matches and the flags on the rows shown: a span folded away marks the row
        of the collapsed span it is in."""
        rows = self.rows
        for lanes, setter in ((self.path.lanes if self.path is not None else None, self.item.set_path),
                              (self.matches.lanes if self.matches is not None else None, self.item.set_matches),
                              (self._flag_lanes(), self.item.set_flags)):
            if lanes is None or rows is None or rows.data is not self.data:
                setter(lanes if rows is None else None)
            else:
                setter(np.unique(rows.rows_of(lanes)) if not rows.all_shown else lanes)

    def _find_failed(self, exc: BaseException) -> None:
        self.matches = None
        self.item.set_matches(None)
        self.minimap.set_marks(matches=np.zeros(0))
        self.find_bar.show_message(str(exc), error=True)

    def step_match(self, direction: int) -> None:
        """F3 / Shift+F3: select the next / previous match and bring it into view."""
        matches = self.matches
        if matches is None or not len(matches.lanes) or matches.data is not self.data:
            return
        self.match_index = (self.match_index + direction) % len(matches.lanes)
        lane = int(matches.lanes[self.match_index])
        self.select_lane(lane)  # expands a collapsed ancestor first
        self.reveal(lane)
        self.find_bar.show_count(self.match_index, matches.total, len(matches.lanes))

    def _find_closed(self) -> None:
        self.find_spans("")
        self.plot.setFocus()

    # -- minimap ----------------------------------------------------------------------------
    def _sync_minimap(self, *args: object) -> None:
        """The minimap's window is the waterfall's time range, its strip aligned with the plot area."""
        area = self.view.mapRectToScene(self.view.boundingRect())
        left = int(self.plot.mapFromScene(area.topLeft()).x())
        right = int(self.plot.width() - self.plot.mapFromScene(area.topRight()).x())
        self.minimap.set_margins(left, max(0, right))
        self.minimap.set_window(*self.view.viewRange()[0])

    def _minimap_moved(self, start: float, end: float) -> None:
        self._follow = self._pinned = False
        self.view.setXRange(start, end, padding=0)

    # -- following the feed -----------------------------------------------------------------
    def _on_feed(self, first: bool, changed_ids: frozenset[str] | None) -> None:
        data, now = self.data, self.feed.now()
        if data is None or self.feed.tokens is None:
            return
        self._last_tip = -1
        self.item.live = self.feed.live
        rows = self.rows
        self.item.set_data(rows.view() if rows is not None and rows.data is data else data, now)
        self.item.folded = rows.folded if rows is not None and rows.data is data else None
        if self.item.overview is not self.feed.row_grid:
            self.item.set_overview(self.feed.row_grid)
        if self.minimap.overview is not self.feed.overview:
            self.minimap.set_overview(self.feed.overview)
            self._sync_minimap()
        self._mark_rows()
        self.tokens.set_series(self.feed.tokens, until=now, redraw=False)  # drawn once, after the fit
        self.item.select(self._row(data.lane_of.get(self.selected_id, -1)) if self.selected_id else -1)
        following = first or self._follow
        if not following and not self._pinned:  # `fit` and `_pin` set them first thing
            self._update_limits()
        self.lanes.update()
        if self.path_on and (self.path is None or self.path.data is not data or changed_ids is None or changed_ids):
            self._compute_path()
        if self.matches is not None and self.matches.data is not data:
            self.find_spans(self.matches.query, keep_place=True)
        self._fit_layout(self.width())  # lane names sized to this run's
        self.counts.changed(data, None if first else changed_ids)  # a layout changed in place is the same object
        self._show_header()
        if following:
            self.fit()
        elif self._pinned:
            self._pin()
        self.tokens.refresh()
        if self.item.live:
            self._tick_timer.start()
        else:
            self._tick_timer.stop()
        if first and self.selected_id is not None:
            if self.selected_id in data.lane_of:
                self.select_span(self.selected_id)
            else:
                self.selected_id = None
                self.details.clear()
        elif self.selected_id is not None and (changed_ids is None or self.selected_id in changed_ids):
            self.details.show_span(self.selected_id)

    def _tick(self) -> None:
        """A live run: open spans grow with the clock (and the view follows it unless moved)."""
        if self.data is None or not self.feed.live:
            self._tick_timer.stop()
            return
        self.item.set_now(self.feed.now())
        series = self.tokens.series
        if series is not None and len(series.t) < 20_000:  # keep ticks cheap
            self.tokens.set_series(series, until=self.item.now)
        self._update_limits()
        if self._follow:
            self.fit()
        elif self._pinned:
            self._pin()

    def _keep_lane_height(self, *args: object) -> None:
        """A resized waterfall keeps its rows as tall as they were and shows more or fewer of them.

        pyqtgraph keeps the visible range in data units, so shrinking the window would squeeze the
        same rows into fewer pixels until their names give way to "zoom in"; a fitted view refits.
        """
        height, before = float(self.view.height()), self._view_height
        self._view_height = height
        if self.data is None or not len(self.data) or before <= 0 or height <= 0 or height == before:
            return
        top, bottom = self.view.viewRange()[1]  # before the new limits clamp it
        self._update_limits()
        if self._follow:
            self.fit()
            return
        lane_px = before / max(bottom - top, 1e-9)
        self.view.setYRange(top, top + height / lane_px, padding=0)

    def _update_limits(self) -> None:
        if self.data is None or not len(self.data):
            return
        x0, x1 = self.data.extent(self.item.now)
        x1 = max(x1, self.feed.now())
        pad = max((x1 - x0) * 0.1, 1.0)
        shown = self.item.data if self.item.data is not None else self.data
        lanes = max(shown.total + 1, self.view.height() / FIT_LANE_PX)  # a short run fits at 24 px/lane
        self.view.setLimits(xMin=x0 - pad, xMax=x1 + pad, yMin=-1, yMax=lanes, minXRange=1e-6, minYRange=2)

    def _stop_following(self, *args: object) -> None:
        """The operator moved the view (drag, wheel): following stops, unless the view still ends at the
        run's end, where it stays pinned to now (a zoom into the last seconds keeps scrolling)."""
        self._follow = self._pinned = False
        if self.data is None or not len(self.data) or not (self.feed.live or not self.data.complete):
            return
        (left, right), (_, bottom) = self.view.viewRange()
        if right >= self._run_span()[1] - (right - left) * 0.01:
            self._pinned = True
            self._pinned_rows = float(bottom)

    # -- mouse and keys ---------------------------------------------------------------------
    key_help: tuple[tuple[str, str, str], ...] = (
        ("Timeline", "F", "Fit the whole run (and follow it while it grows)"),
        ("Timeline", "End", "Follow the run's end (now), keeping the zoom; panning stops following"),
        ("Timeline", "+ or = / -", "Zoom in / out (the wheel zooms, a drag pans)"),
        ("Timeline", "P", "Critical path: highlight and list the spans that set the run's end (again: hide)"),
        ("Timeline", "Ctrl+F", "Find spans (words, kind:, status:, dur>2s, key:value)"),
        ("Timeline", "F3 / Shift+F3", "Next / previous match"),
        ("Timeline", "Left / Right", "Collapse / expand the selected span's sub-tree"),
        ("Timeline", "* / /", "Expand every sub-tree / back to the default folding"),
    )
    """The keys the waterfall handles itself (`eventFilter`), for the F1 sheet; a test presses each one."""

    def _lane_at(self, scene_pos: QPointF) -> int:
        """The lane under a point of the waterfall, or of its label (the label's whole row counts)."""
        shown = self.item.data
        if self.data is None or shown is None:
            return -1
        if self.lanes.sceneBoundingRect().contains(scene_pos):
            row = self.lanes.row_at(self.lanes.mapFromScene(scene_pos).y())
            return self._lane(row) if row >= 0 else -1
        if not self.view.sceneBoundingRect().contains(scene_pos):
            return -1
        point = self.view.mapSceneToView(scene_pos)
        px_w, px_h = self.view.viewPixelSize()
        return self._lane(shown.hit(point.x(), point.y(), 4 * px_w, 2 * px_h, self.item.now))

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
        assert self.data is not None
        rows = self.rows
        folded = 0
        if rows is not None and rows.data is self.data and rows.collapsed[lane] and rows.visible(lane):
            folded = int(rows.folded[rows.row(lane)])
        return span_tooltip(self.data, lane, self.item.now, folded)

    def context_menu(self, lane: int = -1) -> QMenu | None:
        """The run's menu: "Send a message to <agent>…", the run's agent (named by the agent span right-clicked, else
        by the run's first agent span; a sub-agent span is another agent, whose id the layout does not carry)."""
        run = self.run
        if run is None:
            return None
        name = run.agent_id
        data = self.data
        if data is not None:
            def is_agent(n: int) -> bool:
                return str(data.kind_names[n]) == "agent"
            chosen = lane if 0 <= lane < len(data) and is_agent(lane) else next(
                (n for n in range(len(data)) if is_agent(n)), -1)  # the root agent span comes first
            if chosen >= 0:
                name = str(data.names[chosen])
        menu = QMenu(self)
        action = menu.addAction(f"Send a message to {shown_line(name, 60)}…")
        refusal = messaging_refusal(self.services)
        action.setEnabled(refusal is None)
        action.setToolTip(refusal or "Queued for the agent's next model call; cancellable until then")
        menu.setToolTipsVisible(True)
        agent_id = run.agent_id
        action.triggered.connect(lambda _=False: self.message_requested.emit(agent_id, name))
        return menu

    def _clicked(self, event: Any) -> None:
        if event.button() == Qt.MouseButton.RightButton:
            menu = self.context_menu(self._lane_at(event.scenePos()))
            if menu is not None:
                menu.exec(QCursor.pos())
                menu.deleteLater()
            return
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
        self.expand_to(lane)
        self.item.select(self._row(lane))
        self.details.show_span(span_id)
        self.span_selected.emit(span_id)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.plot and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            key, mods = Qt.Key(event.key()), event.modifiers()
            if key == Qt.Key.Key_F and mods & Qt.KeyboardModifier.ControlModifier:
                self.find_bar.open_bar()
                return True
            if key == Qt.Key.Key_F3:
                self.step_match(-1 if mods & Qt.KeyboardModifier.ShiftModifier else 1)
                return True
            if key == Qt.Key.Key_P and not mods & Qt.KeyboardModifier.ControlModifier:
                self.toggle_critical_path()
                return True
            if key in (Qt.Key.Key_Left, Qt.Key.Key_Right) and self._selected_lane() >= 0:
                self.set_collapsed(self._selected_lane(), key == Qt.Key.Key_Left)
                return True
            if key in (Qt.Key.Key_Asterisk, Qt.Key.Key_Slash):
                self.expand_all(key == Qt.Key.Key_Asterisk)
                return True
            action = {Qt.Key.Key_F: self.fit, Qt.Key.Key_End: self.follow_now, Qt.Key.Key_Plus: lambda: self.zoom(0.5),
                      Qt.Key.Key_Equal: lambda: self.zoom(0.5), Qt.Key.Key_Minus: lambda: self.zoom(2.0)
                      }.get(Qt.Key(event.key()))
            if action is not None and not event.modifiers() & Qt.KeyboardModifier.ControlModifier:
                action()
                return True
        return super().eventFilter(watched, event)

    def _selected_lane(self) -> int:
        if self.data is None or self.selected_id is None:
            return -1
        return self.data.lane_of.get(self.selected_id, -1)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._fit_layout(self.width())

    def _fit_layout(self, width: int) -> None:
        """Keep the waterfall wide enough to read: narrower labels, then the details under the plots."""
        labels = self._label_width(width)
        if int(self.lanes.width()) != labels:
            self.lanes.setWidth(labels)
            self.tokens.getPlotItem().getAxis("left").setWidth(labels)  # both plot areas start at one x
        orientation = Qt.Orientation.Vertical if width < NARROW_PX else Qt.Orientation.Horizontal
        if self.splitter.orientation() != orientation:
            self.splitter.setOrientation(orientation)
            self._apply_split()

    def _label_width(self, width: int) -> int:
        """As wide as the names shown need, between the compact width and a quarter of the panel (at most
        LABELS_MAX_PX): short names leave the bars the room, long agent names are read whole."""
        floor = COMPACT_LABELS_PX if width < COMPACT_PX else LABELS_PX
        data = self.data
        if data is None or not len(data):
            return floor
        key = (id(data), min(len(data), 2_000))
        if self._wanted_labels[0] != key:
            self._wanted_labels = (key, self.lanes.wanted_width(data))
        ceiling = max(floor, min(LABELS_MAX_PX, width // 4))
        return max(COMPACT_LABELS_PX, min(ceiling, self._wanted_labels[1]))

    def _orientation_key(self) -> str:
        return "vertical" if self.splitter.orientation() == Qt.Orientation.Vertical else "horizontal"

    def _details_fill_changed(self, filled: bool) -> None:
        if filled != self._details_filled:
            self._details_filled = filled
            self._apply_split()

    def _apply_split(self) -> None:
        """The details' share as last dragged in this orientation, else the default: under the plots, close
        to half the height (the output and what a model saw need lines); beside them, a quarter. With no
        span selected, under the plots, the details fold to their one line and the waterfall gets the room."""
        vertical = self.splitter.orientation() == Qt.Orientation.Vertical
        total = max(self.height() - 90, 200) if vertical else max(self.width(), 200)
        if vertical and not self._details_filled:
            folded = self.details.title.sizeHint().height() + self.side.tabBar().sizeHint().height() + 24
            self.splitter.setSizes([max(total - folded, 1), folded])
            return
        share = self._split_shares.get(self._orientation_key(), DETAILS_SHARE[vertical])
        self.splitter.setSizes([int(total * (1 - share)), int(total * share)])

    def _remember_split(self, *_args: object) -> None:
        if not self._details_filled and self.splitter.orientation() == Qt.Orientation.Vertical:
            return  # a drag of the folded pane says nothing about the room a span's details want
        sizes = self.splitter.sizes()
        if sum(sizes) > 0:
            self._split_shares[self._orientation_key()] = round(sizes[1] / sum(sizes), 3)

    def split_shares(self) -> dict[str, float]:
        """The details pane's size as dragged, per orientation (what the window keeps in its settings)."""
        return dict(self._split_shares)

    def restore_split_shares(self, shares: dict[str, float]) -> None:
        self._split_shares = {k: min(0.9, max(0.1, float(v))) for k, v in shares.items()
                              if k in ("vertical", "horizontal") and isinstance(v, (int, float))}
        if self._orientation_key() in self._split_shares:
            self._apply_split()

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
        set_background(self.plot, background)
        colour_axes(self.plot.getPlotItem(), ("left", "bottom", "right"), text, muted)
        self.lanes.text_colour, self.lanes.muted_colour, self.lanes.background = text, muted, background
        band = QColor(text)
        band.setAlpha(14)
        self.item.text_colour, self.item.band_colour, self.item.background = text, band, background
        self.item.select_colour = QColor(pal.color(QPalette.ColorRole.Highlight))
        self.minimap.frame_colour = QColor(pal.color(QPalette.ColorRole.Highlight))
        self.minimap.bar_colour = muted
        self.minimap.update()
        self.item.update()
        self.tokens.apply_colours(background, text, muted)

    def _show_header(self, message: str | None = None) -> None:
        run, data = self.run, self.data
        if message is not None or run is None or data is None:
            self.header.setText(message or "Select a run to see its timeline.")
            return
        if self.counts.data is not data:
            self.counts.count(data)
        text = header_text(run, data, (self.counts.errors, self.counts.open))
        if self.path_on and self.path is not None:
            text += " · " + self.path.summary()
        elif self.path_on:
            text += " · critical path: working it out…"
        self.header.setText(text)

