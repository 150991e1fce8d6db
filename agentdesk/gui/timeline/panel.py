"""The run timeline: a waterfall of every span, cumulative tokens and cost below it, details on the right.

`TimelineFeed` (model/) loads and follows the run off the GUI thread; this panel builds the widgets,
lays them out and wires the controllers that do the rest, each with its own state: where the view looks
(`FollowController`), find (`FindController`), the critical path (`PathController`), the minimap
(`MinimapController`) and the mouse (`HoverController`). The panel itself keeps the selection, the
collapsed sub-trees, the marks on the rows and the keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QColor, QCursor, QKeyEvent, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QMenu,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.shared.flow import HeightForWidth
from agentdesk.gui.timeline.axes import LaneAxis, waterfall_plot
from agentdesk.gui.timeline.details import SpanDetails
from agentdesk.gui.timeline.drawing import colour_axes, header_text, legend, set_background
from agentdesk.gui.timeline.find_controller import FindController
from agentdesk.gui.timeline.findbar import FindBar
from agentdesk.gui.timeline.follow_controller import FollowController
from agentdesk.gui.timeline.hover import HoverController
from agentdesk.gui.timeline.minimap import Minimap
from agentdesk.gui.timeline.minimap_controller import MinimapController
from agentdesk.gui.timeline.path_controller import PathController
from agentdesk.gui.timeline.path_panel import PathPanel
from agentdesk.gui.timeline.span_item import SpanItem
from agentdesk.gui.timeline.tokens import RIGHT_AXIS_WIDTH, TokensPlot
from agentdesk.model.messages.sending import messaging_refusal
from agentdesk.model.plain import shown_line
from agentdesk.model.services import Services
from agentdesk.model.timeline.feed import TimelineFeed
from agentdesk.store import readmodel as rm
from agentdesk.store.analysis.layout.counts import SpanCounts
from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.analysis.layout.rows import Rows

NARROW_PX = 1300
"""Narrower than this (up to a 1920 px screen with the docks open), the details go under the plots: beside
them they were a column too narrow for their tabs and the output's lines."""
COMPACT_PX = 1000
"""Narrower than this, the lane labels get a narrower column as well (names elide, indents show depth)."""
LABELS_PX, COMPACT_LABELS_PX, LABELS_MAX_PX = 190, 130, 360
DETAILS_SHARE = {True: 0.45, False: 0.3}
"""The span details' default share of the timeline: under the plots (True) and beside them (False)."""


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
        self.flagged_ids: frozenset[str] = frozenset()
        self._wanted_labels: tuple[tuple[int, int], int] = ((0, 0), 0)
        """(layout id, lanes measured) and the width the lane names want."""
        self.counts = SpanCounts()
        self._build()
        self._wire()
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

    def _run_and_data(self) -> tuple[str | None, TimelineData | None]:
        return self.run_id, self.data

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.header = QLabel(textFormat=Qt.TextFormat.PlainText)
        self.header.setWordWrap(True)
        HeightForWidth(self.header)
        self.lanes = LaneAxis(lambda: self.item.data, lambda: self.rows)
        self.plot = waterfall_plot(self.lanes, RIGHT_AXIS_WIDTH)
        self.plot.installEventFilter(self)
        self.setFocusProxy(self.plot)
        self.view = self.plot.getPlotItem().vb
        self.item = SpanItem()
        self.plot.addItem(self.item)
        self.tokens = TokensPlot(LABELS_PX)  # as wide as the lane labels: both plot areas start at one x
        self.tokens.setXLink(self.plot)
        self.details = SpanDetails(self.services)
        self.minimap = Minimap()
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
        # the critical path list is a tab beside the span's details: it fits under the plots too
        side = QTabWidget()
        side.setDocumentMode(True)
        side.addTab(self.details, "Span")
        side.addTab(self.path_panel, "Critical path")
        side.setTabVisible(1, False)
        self.side = side
        self.find_bar = FindBar()
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

    def _wire(self) -> None:
        """The controllers, each over the widgets it drives, and what each one's signals do here."""
        self.lanes.toggled.connect(self.toggle_row)
        self.map = MinimapController(self.minimap, self.plot, self)
        self.follow = FollowController(self.view, self.feed, self.item, self.tokens, self.row_of, self)
        self.map.moved.connect(self.follow.stop)
        self.hover = HoverController(self.plot, self.lanes, self.item, lambda: (self.data, self.rows),
                                     self.lane_of_row, self)
        self.hover.clicked.connect(self.select_lane)
        self.hover.menu_requested.connect(self._open_menu)
        self.finding = FindController(self.services, self.find_bar, self._run_and_data, self)
        self.finding.changed.connect(self._matches_changed)
        self.finding.chosen.connect(self._go_to)
        self.finding.closed.connect(self.plot.setFocus)
        self.critical = PathController(self.services, self.path_panel, self.side, self._run_and_data, self)
        self.critical.changed.connect(self._path_changed)
        self.critical.chosen.connect(self._go_to)
        self.critical.failed.connect(self._show_header)

    # -- public API -------------------------------------------------------------------------
    def show_run(self, run_id: str | None) -> None:
        """Show a run (None clears); showing the run already shown keeps the view as it is."""
        if run_id == self.run_id and run_id is not None and (self.data is not None or self.feed.busy):
            return
        self.feed.show(run_id)
        self.critical.reset()
        self.finding.reset()
        self.item.set_path(None)
        self.item.set_matches(None)
        self.map.clear_marks()
        self.follow.reset()
        self.item.set_data(None, 0.0)
        self.item.set_overview(None)
        self.map.set_overview(None)
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
        self.item.select(self.row_of(lane))
        if lane >= 0:
            self.follow.reveal(lane)

    def select_lane(self, lane: int) -> None:
        """What a click on a span does: select it, show its details, tell listeners."""
        if self.data is None or not 0 <= lane < len(self.data):
            return
        span_id = self.data.ids[lane]
        self.selected_id = span_id
        self.expand_to(lane)
        self.item.select(self.row_of(lane))
        self.details.show_span(span_id)
        self.span_selected.emit(span_id)

    def _go_to(self, lane: int) -> None:
        """A lane chosen in the path's list or by F3: selected (a collapsed ancestor expanded) and in view."""
        self.select_lane(lane)
        self.follow.reveal(lane)

    # the view, find and the path: the controllers' public API, as the window and the keys use it
    def fit(self) -> None:
        self.follow.fit()

    def follow_now(self) -> None:
        self.follow.follow_now()

    @property
    def following(self) -> bool:
        return self.follow.following

    def show_window(self, start_s: float, end_s: float, first_lane: float, last_lane: float) -> None:
        self.follow.show_window(start_s, end_s, first_lane, last_lane)

    def zoom(self, factor: float) -> None:
        self.follow.zoom(factor)

    def reveal(self, lane: int) -> None:
        self.follow.reveal(lane)

    def find_spans(self, query: str) -> None:
        self.finding.find_spans(query)

    def toggle_critical_path(self) -> None:
        self.critical.toggle()

    def tooltip(self, lane: int) -> str:
        return self.hover.tooltip(lane)

    # -- collapsed sub-trees ----------------------------------------------------------------
    def row_of(self, lane: int) -> int:
        """The lane's row on screen; -1 when none or hidden in a collapsed sub-tree."""
        rows = self.rows
        if lane < 0 or rows is None or rows.data is not self.data:
            return lane if rows is None else -1
        return rows.row(lane)

    def lane_of_row(self, row: int) -> int:
        rows = self.rows
        if row < 0 or rows is None or rows.data is not self.data:
            return row
        return int(rows.shown[row]) if row < len(rows) else -1

    def expand_to(self, lane: int) -> None:
        """Expand every collapsed ancestor of a lane, so it has a row (find, F3, the path list)."""
        rows = self.rows
        if rows is not None and rows.data is self.data and not rows.visible(lane):
            self.follow.unfit()  # the operator is looking at something: a live run's fit would move it
            self.feed.set_collapsed([up for up in rows.ancestors(lane) if rows.collapsed[up]], False)

    def set_collapsed(self, lane: int, collapsed: bool) -> None:
        """Collapse or expand one span's sub-tree (a click on its disclosure mark, or Left / Right)."""
        rows = self.rows
        if rows is None or rows.data is not self.data or not 0 <= lane < len(rows.data):
            return
        if bool(rows.collapsed[lane]) != collapsed and (rows.visible(lane) or not collapsed):
            self.follow.unfit()
            self.feed.set_collapsed([lane], collapsed)

    def toggle_row(self, row: int) -> None:
        """The disclosure mark of a row was clicked: fold or unfold its sub-tree."""
        lane = self.lane_of_row(row)
        rows = self.rows
        if lane >= 0 and rows is not None:
            self.set_collapsed(lane, not bool(rows.collapsed[lane]))

    def expand_all(self, expanded: bool = True) -> None:
        """Every sub-tree expanded (key *), or the default folding again (key /)."""
        self.feed.expand_all(expanded)

    # -- marks: the critical path, the matches, the flags -----------------------------------
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
        rows, path, matches = self.rows, self.critical.path, self.finding.matches
        for lanes, setter in ((path.lanes if path is not None else None, self.item.set_path),
                              (matches.lanes if matches is not None else None, self.item.set_matches),
                              (self._flag_lanes(), self.item.set_flags)):
            if lanes is None or rows is None or rows.data is not self.data:
                setter(lanes if rows is None else None)
            else:
                setter(np.unique(rows.rows_of(lanes)) if not rows.all_shown else lanes)

    def _path_changed(self) -> None:
        self._mark_rows()
        self.map.show_path(self.critical.path, self.item.now)
        self._show_header()

    def _matches_changed(self) -> None:
        self._mark_rows()
        self.map.show_matches(self.finding.matches)

    # -- following the feed -----------------------------------------------------------------
    def _on_feed(self, first: bool, changed_ids: frozenset[str] | None) -> None:
        data, now = self.data, self.feed.now()
        if data is None or self.feed.tokens is None:
            return
        self.hover.last_tip = -1
        self.item.live = self.feed.live
        rows = self.rows
        self.item.set_data(rows.view() if rows is not None and rows.data is data else data, now)
        self.item.folded = rows.folded if rows is not None and rows.data is data else None
        if self.item.overview is not self.feed.row_grid:
            self.item.set_overview(self.feed.row_grid)
        self.map.set_overview(self.feed.overview)
        self._mark_rows()
        self.tokens.set_series(self.feed.tokens, until=now, redraw=False)  # drawn once, after the fit
        self.item.select(self.row_of(data.lane_of.get(self.selected_id, -1)) if self.selected_id else -1)
        following = self.follow.before_feed(first)
        self.lanes.update()
        self.critical.refresh(data, changed_ids)
        self.finding.refresh(data)
        self._fit_layout(self.width())  # lane names sized to this run's
        self.counts.changed(data, None if first else changed_ids)  # a layout changed in place is the same object
        self._show_header()
        self.follow.after_feed(following)
        if first and self.selected_id is not None:
            if self.selected_id in data.lane_of:
                self.select_span(self.selected_id)
            else:
                self.selected_id = None
                self.details.clear()
        elif self.selected_id is not None and (changed_ids is None or self.selected_id in changed_ids):
            self.details.show_span(self.selected_id)

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


    def _open_menu(self, lane: int) -> None:
        menu = self.context_menu(lane)
        if menu is not None:
            menu.exec(QCursor.pos())
            menu.deleteLater()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.plot and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            key, mods = Qt.Key(event.key()), event.modifiers()
            if key == Qt.Key.Key_F and mods & Qt.KeyboardModifier.ControlModifier:
                self.find_bar.open_bar()
                return True
            if key == Qt.Key.Key_F3:
                self.finding.step(-1 if mods & Qt.KeyboardModifier.ShiftModifier else 1)
                return True
            if key == Qt.Key.Key_P and not mods & Qt.KeyboardModifier.ControlModifier:
                self.critical.toggle()
                return True
            if key in (Qt.Key.Key_Left, Qt.Key.Key_Right) and self._selected_lane() >= 0:
                self.set_collapsed(self._selected_lane(), key == Qt.Key.Key_Left)
                return True
            if key in (Qt.Key.Key_Asterisk, Qt.Key.Key_Slash):
                self.expand_all(key == Qt.Key.Key_Asterisk)
                return True
            follow = self.follow
            action = {Qt.Key.Key_F: follow.fit, Qt.Key.Key_End: follow.follow_now,
                      Qt.Key.Key_Plus: lambda: follow.zoom(0.5), Qt.Key.Key_Equal: lambda: follow.zoom(0.5),
                      Qt.Key.Key_Minus: lambda: follow.zoom(2.0)}.get(Qt.Key(event.key()))
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
        path = self.critical.summary()
        self.header.setText(text if path is None else f"{text} · {path}")
