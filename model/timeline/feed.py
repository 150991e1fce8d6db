"""Keeps one run's laid-out spans current: loads on the store runner, then follows the bus.

All store reads and layouts run on the runner; the GUI thread only swaps in
finished arrays. Bus changes for the shown run are collected for a short while,
then only the changed spans are fetched (`span_table(run_id, span_ids)`, the same
for every source): a span that merely finished updates its
lane in place, a new span triggers a fresh layout, also off the GUI thread. One
request is in flight at a time, and answers for a run no longer shown are dropped
(`model.latest.Latest`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from agentdesk.model.latest import Latest
from agentdesk.model.services import Services
from agentdesk.model.timeline.data import TimelineData, TokenSeries
from agentdesk.model.timeline.overview import Overview, overview
from agentdesk.store import readmodel as rm
from agentdesk.store.bus import RESET, Change
from agentdesk.store.source import Source, SpanTable
from agentdesk.store.timeline_columns import span_columns

REFRESH_MS = 150
FIRST_SPANS = 10_000
"""A bigger run shows its earliest spans this many at once, then the whole run when it is laid out."""
FULL_RELOAD_OVER = 2000
"""More changed spans than this at once: reload the run instead of fetching rows."""
LIVE_STATUSES = (rm.RunStatus.PENDING, rm.RunStatus.RUNNING, rm.RunStatus.WAITING)


@dataclass(frozen=True, slots=True)
class Loaded:
    run: rm.Run
    data: TimelineData
    tokens: TokenSeries
    overview: Overview | None
    """None for the first spans of a big run: the grid is worth its cost for the whole run only."""


@dataclass(frozen=True, slots=True)
class Changed:
    run: rm.Run | None
    rows: SpanTable
    relaid: tuple[TimelineData, TokenSeries, Overview | None] | None


def load_run(source: Source, run_id: str, first: int | None = None) -> Loaded:
    """The run laid out; with `first`, only its earliest spans (`data.complete` says which)."""
    run = source.run(run_id)
    data = TimelineData.from_columns(span_columns(source, run_id, first), run.started_at.timestamp())
    grid = overview(data, _now(run, data)) if data.complete else None
    return Loaded(run, data, data.token_series(), grid)


def _now(run: rm.Run, data: TimelineData) -> float:
    """Where open spans end for the overview: the clock while live, else the run's end."""
    if run.status in LIVE_STATUSES:
        return time.time() - data.t0
    return run.ended_at.timestamp() - data.t0 if run.ended_at is not None else 0.0


def load_changes(source: Source, data: TimelineData, run_id: str, span_ids: list[str],
                 run_changed: bool) -> Changed:
    """Fetch changed rows; when they reshape the tree, lay out a copy here, off the GUI thread."""
    rows = source.span_table(run_id, span_ids)
    run = source.run(run_id) if run_changed else None
    relaid = None
    if data.needs_relayout(rows):
        new = data.relaid_out(rows)
        relaid = (new, new.token_series(), overview(new, time.time() - new.t0))
    return Changed(run, rows, relaid)


class TimelineFeed(QObject):
    changed = Signal(bool, object)
    """(first load of this run, ids of the changed spans or None for all): data, tokens or run are new."""
    failed = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.run_id: str | None = None
        self.run: rm.Run | None = None
        self.data: TimelineData | None = None
        self.tokens: TokenSeries | None = None
        self.overview: Overview | None = None
        self._latest = Latest(services.runner)
        self._busy = False
        self._dirty: set[str] = set()
        self._run_dirty = False
        self._reload = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._refresh)
        services.bridge.changes.connect(self._on_changes)

    def show(self, run_id: str | None) -> None:
        self._latest.cancel()
        self.run_id, self.run, self.data, self.tokens, self.overview = run_id, None, None, None, None
        self._busy, self._reload, self._run_dirty = False, False, False
        self._dirty.clear()
        if run_id is not None:
            self._submit(load_run, self.services.source, run_id, FIRST_SPANS, on_done=self._loaded)

    @property
    def busy(self) -> bool:
        """A load or a refresh is on its way."""
        return self._busy

    @property
    def complete(self) -> bool:
        """The whole run is laid out (not only its first spans, shown while the rest loads)."""
        return self.data is not None and self.data.complete

    @property
    def live(self) -> bool:
        return self.run is not None and self.run.status in LIVE_STATUSES

    def now(self) -> float:
        """Where open spans end, in seconds since run start: the clock while live, else the run's end."""
        if self.run is None or self.data is None:
            return 0.0
        if self.live:
            return time.time() - self.data.t0
        if self.run.ended_at is not None:
            return self.run.ended_at.timestamp() - self.data.t0
        finished = self.data.end[~self.data.open]
        return float(finished.max()) if len(finished) else 0.0

    # -- requests ---------------------------------------------------------------------------
    def _submit(self, fn: Callable[..., Any], *args: Any, on_done: Callable[[Any], None]) -> None:
        """One request at a time; `show` (another run) drops the answer of one in flight."""
        self._busy = True

        def done(result: Any) -> None:
            self._busy = False
            on_done(result)
            self._arm()

        def failed(exc: BaseException) -> None:
            self._busy = False
            self.failed.emit(f"Could not load the run: {exc}")

        self._latest.submit(fn, *args, on_done=done, on_error=failed)

    def _loaded(self, loaded: Loaded) -> None:
        first = self.data is None
        self.run, self.data, self.tokens, self.overview = loaded.run, loaded.data, loaded.tokens, loaded.overview
        self.changed.emit(first, None)
        if not loaded.data.complete and self.run_id is not None:  # now the whole run, off the GUI thread
            self._submit(load_run, self.services.source, self.run_id, on_done=self._loaded)

    def _changed(self, changed: Changed, ids: frozenset[str]) -> None:
        if changed.run is not None:
            self.run = changed.run
        if changed.relaid is not None:
            self.data, self.tokens, self.overview = changed.relaid
        elif self.data is not None:
            self.data.update(changed.rows)
            self.tokens = self.data.token_series()
        self.changed.emit(False, ids)

    # -- following the bus ------------------------------------------------------------------
    def _on_changes(self, changes: Sequence[Change]) -> None:
        if self.run_id is None:
            return
        for change in changes:
            ours = change.parent("run") == self.run_id
            bulk = change.entity == "span_batch" and ours  # bulk OTel writes: one change per batch
            if change.op == RESET or bulk or (change.entity == "span" and change.op == "delete" and ours):
                self._reload = True
            elif change.entity == "span" and ours:
                self._dirty.add(change.id)
            elif change.entity == "run" and change.id == self.run_id:
                self._run_dirty = True
        self._arm()

    def _arm(self) -> None:
        if (self._dirty or self._run_dirty or self._reload) and not self._timer.isActive():
            self._timer.start()

    def _refresh(self) -> None:
        if self._busy or self.run_id is None:
            return
        source = self.services.source
        if self._reload or self.data is None or not self.data.complete or len(self._dirty) > FULL_RELOAD_OVER:
            self._reload, self._run_dirty = False, False
            self._dirty.clear()
            self._submit(load_run, source, self.run_id, on_done=self._loaded)
            return
        ids, run_changed = frozenset(self._dirty), self._run_dirty
        self._dirty.clear()
        self._run_dirty = False
        self._submit(load_changes, source, self.data, self.run_id, sorted(ids), run_changed,
                     on_done=lambda changed: self._changed(changed, ids))
