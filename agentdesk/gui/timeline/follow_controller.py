"""Where the waterfall looks: the whole run fitted, pinned to now, or wherever the operator moved it.

A live run grows under the view: fitted, its new spans and its end stay in view; pinned (End, or a zoom
that kept the run's end in view) the time window keeps its width and slides with the run's end; moved
anywhere else, the view stays put. A timer lets open spans grow with the clock while the run is live.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QObject, QTimer

from agentdesk.gui.timeline.axes import MIN_LABEL_LANE_PX
from agentdesk.gui.timeline.span_item import SpanItem
from agentdesk.gui.timeline.tokens import TokensPlot
from agentdesk.model.timeline.feed import TimelineFeed
from agentdesk.store.analysis.layout.data import TimelineData

TICK_MS = 200
FIT_LANE_PX = 24
TICKED_SAMPLES = 20_000
"""A live token series longer than this is not redrawn on every tick (keeps ticks cheap)."""


class FollowController(QObject):
    def __init__(self, view: pg.ViewBox, feed: TimelineFeed, item: SpanItem, tokens: TokensPlot,
                 row_of: Callable[[int], int], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.view, self.feed, self.item, self.tokens, self._row_of = view, feed, item, tokens, row_of
        self._fitted = True
        """Fitted: a live run's new spans and its growing end keep the whole run in view."""
        self._pinned = False
        """Pinned to now (End, or a zoom that kept the end in view): the time window keeps its width and
        slides with the run's end; the lanes follow new spans when the last one was in view."""
        self._pinned_rows = 0.0
        self._view_height = 0.0
        self.timer = QTimer(self)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self.tick)
        view.sigRangeChangedManually.connect(self.stop_following)
        view.sigResized.connect(self.keep_lane_height)

    @property
    def data(self) -> TimelineData | None:
        return self.feed.data

    def _shown_rows(self) -> float:
        shown = self.item.data if self.item.data is not None else self.data
        return float(shown.total) if shown is not None else 0.0

    @property
    def following(self) -> bool:
        """Whether a live run's growth moves the view (fitted or pinned to now)."""
        return self._fitted or self._pinned

    def reset(self) -> None:
        """Another run: fitted again, nothing ticking."""
        self._fitted, self._pinned = True, False
        self.timer.stop()

    def stop(self) -> None:
        """The view moves somewhere the operator chose: neither fitted nor pinned."""
        self._fitted = self._pinned = False

    def unfit(self) -> None:
        """The operator is looking at something (a sub-tree folded or unfolded): a fit would move it."""
        self._fitted = False

    # -- moves ------------------------------------------------------------------------------
    def fit(self) -> None:
        """Show the whole run: every lane, from its start to its end (or now)."""
        self._fitted, self._pinned = True, False
        data = self.data
        if data is None or not len(data):
            return
        self.update_limits()
        x0, x1 = data.extent(self.item.now)
        if not data.complete:  # only the first spans so far: frame the whole run already
            x1 = max(x1, self.feed.now())
        height = max(self.view.height(), 1.0)
        lanes = max(self._shown_rows(), height / FIT_LANE_PX)
        self.view.setRange(xRange=(x0, max(x1, x0 + 1e-3)), yRange=(0, lanes), padding=0.02)

    def follow_now(self) -> None:
        """Key End: follow the run again. Zoomed in, the time window keeps its width and ends at now (and
        the last lanes come into view); zoomed out, the whole run is fitted."""
        if self.data is None or not len(self.data):
            self.fit()
            return
        (left, right), _ = self.view.viewRange()
        x0, x1 = self.run_span()
        if right - left >= (x1 - x0) * 0.98:
            self.fit()
            return
        self._fitted, self._pinned = False, True
        self.pin(tail=True)

    def show_window(self, start_s: float, end_s: float, first_lane: float, last_lane: float) -> None:
        """Show a time window (seconds since run start) and a lane range; a live run stops being followed."""
        self.stop()
        self.view.setRange(xRange=(start_s, end_s), yRange=(first_lane, last_lane), padding=0)

    def zoom(self, factor: float) -> None:
        """Zoom both axes around the view's centre (factor < 1 zooms in)."""
        self.stop()
        self.view.scaleBy((factor, factor))

    def reveal(self, lane: int) -> None:
        """Bring a lane's row (and its bar) into view."""
        data, row = self.data, self._row_of(lane)
        if data is None or row < 0:
            return
        rows_shown = len(self.item.data) if self.item.data is not None else len(data)
        (left, right), (top, bottom) = self.view.viewRange()
        lane_px = self.view.height() / max(bottom - top, 1e-9)
        count = (bottom - top) if lane_px >= MIN_LABEL_LANE_PX else self.view.height() / 20
        if lane_px < MIN_LABEL_LANE_PX or not top <= row <= bottom - 1:
            self.stop()  # the view moves to the span: stop following the run
            top = min(max(0.0, row + 0.5 - count / 2), max(0.0, rows_shown - count))
            self.view.setYRange(top, top + count, padding=0)
        start, end = float(data.start[lane]), float(data.ends(self.item.now)[lane])
        px_per_s = self.view.width() / max(right - left, 1e-12)
        if start < left or end > right or (end - start) * px_per_s < 8:
            self.stop()
            pad = max((end - start) * 0.5, 1e-3)
            self.view.setXRange(start - pad, end + pad, padding=0)

    # -- following a live run ---------------------------------------------------------------
    def run_span(self) -> tuple[float, float]:
        """The run's time range in view terms: its first start to its last end, or now while it runs."""
        assert self.data is not None
        x0, x1 = self.data.extent(self.item.now)
        if self.feed.live or not self.data.complete:
            x1 = max(x1, self.feed.now())
        return x0, x1

    def pin(self, *, tail: bool = False) -> None:
        """Slide the time window so that it ends at the run's end (now); show the newest lanes when the
        last lane was already in view (or `tail`)."""
        if self.data is None or not len(self.data):
            return
        self.update_limits()
        (left, right), (top, bottom) = self.view.viewRange()
        _, x1 = self.run_span()
        width = right - left
        shown = self.item.data if self.item.data is not None else self.data
        rows = float(len(shown))
        lanes = bottom - top
        at_bottom = tail or bottom >= self._pinned_rows - 0.5
        self._pinned_rows = rows
        if at_bottom and rows > bottom:
            top, bottom = max(0.0, rows - lanes + 1), max(rows + 1, lanes)
        self.view.setRange(xRange=(x1 - width * 0.98, x1 + width * 0.02), yRange=(top, bottom), padding=0)

    def update_limits(self) -> None:
        data = self.data
        if data is None or not len(data):
            return
        x0, x1 = data.extent(self.item.now)
        x1 = max(x1, self.feed.now())
        pad = max((x1 - x0) * 0.1, 1.0)
        lanes = max(self._shown_rows() + 1, self.view.height() / FIT_LANE_PX)  # a short run fits at 24 px/lane
        self.view.setLimits(xMin=x0 - pad, xMax=x1 + pad, yMin=-1, yMax=lanes, minXRange=1e-6, minYRange=2)

    def stop_following(self, *_args: object) -> None:
        """The operator moved the view (drag, wheel): following stops, unless the view still ends at the
        run's end, where it stays pinned to now (a zoom into the last seconds keeps scrolling)."""
        self.stop()
        data = self.data
        if data is None or not len(data) or not (self.feed.live or not data.complete):
            return
        (left, right), (_, bottom) = self.view.viewRange()
        if right >= self.run_span()[1] - (right - left) * 0.01:
            self._pinned = True
            self._pinned_rows = float(bottom)

    def keep_lane_height(self, *_args: object) -> None:
        """A resized waterfall keeps its rows as tall as they were and shows more or fewer of them.

        pyqtgraph keeps the visible range in data units, so shrinking the window would squeeze the
        same rows into fewer pixels until their names give way to "zoom in"; a fitted view refits.
        """
        height, before = float(self.view.height()), self._view_height
        self._view_height = height
        if self.data is None or not len(self.data) or before <= 0 or height <= 0 or height == before:
            return
        top, bottom = self.view.viewRange()[1]  # before the new limits clamp it
        self.update_limits()
        if self._fitted:
            self.fit()
            return
        lane_px = before / max(bottom - top, 1e-9)
        self.view.setYRange(top, top + height / lane_px, padding=0)

    def before_feed(self, first: bool) -> bool:
        """A new layout arrives: whether it will be fitted (the first one always is). Limits are set now
        when the view stays put (`fit` and `pin` set them first thing)."""
        following = first or self._fitted
        if not following and not self._pinned:
            self.update_limits()
        return following

    def after_feed(self, following: bool) -> None:
        """The new layout is shown: fit it or slide to its end, and tick while the run is live."""
        if following:
            self.fit()
        elif self._pinned:
            self.pin()
        self.tokens.refresh()
        if self.item.live:
            self.timer.start()
        else:
            self.timer.stop()

    def tick(self) -> None:
        """A live run: open spans grow with the clock (and the view follows it unless moved)."""
        if self.data is None or not self.feed.live:
            self.timer.stop()
            return
        self.item.set_now(self.feed.now())
        series = self.tokens.series
        if series is not None and len(series.t) < TICKED_SAMPLES:
            self.tokens.set_series(series, until=self.item.now)
        self.update_limits()
        if self._fitted:
            self.fit()
        elif self._pinned:
            self.pin()
