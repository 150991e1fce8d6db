"""Keeps one run's laid-out spans current: loads on the store runner, then follows the bus.

All store reads and layouts run on the runner; the GUI thread only swaps in
finished arrays. Bus changes for the shown run are collected for a short while,
then only the changed spans are fetched (`span_table(run_id, span_ids)`, the same
for every source): a span that merely finished updates its lane in place, a new
span is inserted into the layout, and the grid, token series and rows are derived
from the ones shown (`load_changes`), all on the runner: at a million spans a live
span costs ~10 ms there and nothing but the swap on the GUI thread. One request is
in flight at a time, and answers for a run no longer shown are dropped
(`model.tasks.LatestTask`).

The feed also keeps which lanes are rows (`Rows`: deep sub-trees of a big run
collapsed by default, the operator's expand / collapse choices kept by span id
across re-layouts); the rows of a new layout are worked out with it on the runner.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal

from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store import readmodel as rm
from agentdesk.store.analysis.layout.data import APPEND_AT_MOST, Before, TimelineData, TokenSeries
from agentdesk.store.analysis.layout.overview import Overview, grown, overview
from agentdesk.store.analysis.layout.rows import Rows
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.source import Source
from agentdesk.store.timeline.read import span_columns

REFRESH_MS = 150
FIRST_SPANS = 10_000
"""A bigger run shows its earliest spans this many at once, then the whole run when it is laid out."""
GRID_OVER_ROWS = 20_000
"""Fewer rows than this are drawn as spans at every zoom: no grid needed."""
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
    rows: Rows | None = None
    row_grid: Overview | None = None
    """The rows shown (sub-trees collapsed by default, the operator's choices applied) and their grid."""


@dataclass(frozen=True, slots=True)
class Changed:
    run: rm.Run | None
    rows: SpanTable
    relaid: tuple[TimelineData, TokenSeries, Overview | None]
    """The layout (the same object when the spans changed in place), its token series and grid."""
    shown: tuple[Rows, Overview | None] | None = None
    inserted: np.ndarray | None = None
    """Where new spans went in a layout that only gained them (sorted lanes), else None."""


@dataclass(frozen=True, slots=True)
class Shown:
    """What the feed shows when it asks for changes: the results it keeps are derived from these."""

    run: rm.Run | None
    tokens: TokenSeries | None
    overview: Overview | None
    rows: Rows | None
    row_grid: Overview | None


def load_run(source: Source, run_id: str, first: int | None = None,
             overrides: dict[str, bool] | None = None) -> Loaded:
    """The run laid out; with `first`, only its earliest spans (`data.complete` says which).

    The rows (collapsed sub-trees, `overrides` the operator's choices by span id) and their grid
    are worked out here too, off the GUI thread.
    """
    run = source.run(run_id)
    data = TimelineData.from_columns(span_columns(source, run_id, first), run.started_at.timestamp())
    now = _now(run, data)
    grid = overview(data, now) if data.complete else None
    rows = Rows.default(data, overrides)
    loaded = Loaded(run, data, data.token_series(), grid, rows, row_grid(rows, grid, now))
    give_back_memory()
    return loaded


def give_back_memory() -> None:
    """Hand the heap the read and the layout freed back to the system (glibc's `malloc_trim`).

    A million-span read frees more than 100 MB of short-lived strings and row objects, which glibc
    keeps in the process; trimming returns it in ~15 ms (measured: 479 → 361 MB after a 1M load).
    Elsewhere (macOS, Windows, musl) there is nothing to call and this does nothing.
    """
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM: Any = None


def row_grid(rows: Rows, grid: Overview | None, now: float) -> Overview | None:
    """The zoomed-out grid of the rows shown: the run's own when nothing is collapsed. None for the
    first spans of a big run (as there), or for few rows (drawing them is cheaper than a grid)."""
    if rows.all_shown or grid is None:
        return grid
    return overview(rows.view(), now) if len(rows) > GRID_OVER_ROWS else None


def _now(run: rm.Run, data: TimelineData) -> float:
    """Where open spans end for the overview: the clock while live, else the run's end."""
    if run.status in LIVE_STATUSES:
        return time.time() - data.t0
    return run.ended_at.timestamp() - data.t0 if run.ended_at is not None else 0.0


def load_changes(source: Source, data: TimelineData, run_id: str, span_ids: list[str],
                 run_changed: bool, overrides: dict[str, bool] | None = None, shown: Shown | None = None) -> Changed:
    """Fetch changed rows and work out everything the feed shows from them, here, off the GUI thread.

    Spans that only changed (a span finished) are updated in place; new ones are inserted
    (`TimelineData.appended`); the grid, the token series and the rows are then derived from those
    `shown` had (`overview.grown`, `token_series_after`, `Rows.inserted`): milliseconds for a live
    span at a million. A span that moved in the tree, or new spans that cannot be inserted, lay the
    run out again and everything is worked out from scratch. The GUI thread only swaps the results in.
    """
    table = source.span_table(run_id, span_ids)
    run = source.run(run_id) if run_changed else None
    known = run or (shown.run if shown is not None else None)
    now = _now(known, data) if known is not None else time.time() - data.t0
    split = _split(data, table)
    if split is None:  # a span moved in the tree: lay the run out again
        return _relaid(run, table, data.relaid_out(table), now, overrides)
    updates, inserts = split
    before = Before.of(data, [data.lane_of[span_id] for span_id in updates.ids]) if len(updates) else None
    if before is not None:
        data.update(updates)  # in place: the tree is unchanged
    new, inserted = data, np.zeros(0, dtype=np.int64)
    if len(inserts):
        quick = data.appended(inserts)
        if quick is None:
            return _relaid(run, table, data.relaid_out(inserts), now, overrides)
        new, inserted = quick, np.sort(np.asarray([quick.lane_of[span_id] for span_id in inserts.ids], dtype=np.int64))
        if before is not None:
            before = before.moved(np.asarray([new.lane_of[span_id] for span_id in updates.ids], dtype=np.int64))
    if shown is None or shown.tokens is None or shown.rows is None or shown.rows.data is not data:
        return _relaid(run, table, new, now, overrides)
    tokens = new.token_series_after(shown.tokens, inserted, before)
    grid = grown(shown.overview, new, now, inserted, before)
    rows = shown.rows.inserted(new, inserted, overrides) if len(inserted) else \
        shown.rows.refreshed(before.lanes) if before is not None else shown.rows
    grid_of_rows = _grown_row_grid(shown, rows, grid, now, inserted, before)
    rows.view()  # made here, not on the GUI thread
    return Changed(run, table, (new, tokens, grid), (rows, grid_of_rows), inserted if len(inserted) else None)


def _relaid(run: rm.Run | None, table: SpanTable, new: TimelineData, now: float,
            overrides: dict[str, bool] | None) -> Changed:
    """Everything worked out from scratch for a new layout."""
    grid = overview(new, now)
    rows = Rows.default(new, overrides)
    shown = (rows, row_grid(rows, grid, now))
    rows.view()
    if len(table) > APPEND_AT_MOST:  # a full re-layout, not a few spans inserted
        give_back_memory()
    return Changed(run, table, (new, new.token_series(), grid), shown)


def _split(data: TimelineData, table: SpanTable) -> tuple[SpanTable, SpanTable] | None:
    """The rows as (spans changed in place, new spans); None when one moved in the tree (its parent
    or start changed), which needs a new layout."""
    changed, new = [], []
    for i, span_id in enumerate(table.ids):
        lane = data.lane_of.get(span_id)
        if lane < 0:
            new.append(i)
        elif data.parent_id(lane) != table.parent_ids[i] or data.start[lane] != table.starts[i] - data.t0:
            return None
        else:
            changed.append(i)
    return _pick(table, changed), _pick(table, new)


def _pick(table: SpanTable, rows: list[int]) -> SpanTable:
    if len(rows) == len(table):
        return table
    return SpanTable(*([getattr(table, f.name)[i] for i in rows] for f in fields(SpanTable)))


def _grown_row_grid(shown: Shown, rows: Rows, grid: Overview | None, now: float, inserted: np.ndarray,
                    before: Before | None) -> Overview | None:
    """`row_grid(rows, grid, now)`, grown from the rows' grid before when there was one."""
    if rows.all_shown or grid is None or len(rows) <= GRID_OVER_ROWS:
        return row_grid(rows, grid, now)
    old = shown.row_grid if shown.rows is not None and not shown.rows.all_shown else None
    new_rows = rows.row_at[inserted].astype(np.int64)
    new_rows = new_rows[rows.shown[new_rows] == inserted]  # the new spans that got a row
    if before is not None:
        seen = rows.shown[rows.row_at[before.lanes]] == before.lanes
        before = before.picked(seen).moved(rows.row_at[before.lanes[seen]])
    return grown(old, rows.view(), now, new_rows, before)


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
        self.rows: Rows | None = None
        self.row_grid: Overview | None = None
        self.overrides: dict[str, bool] = {}
        """The operator's expand (False) / collapse (True) choices by span id, kept across re-layouts."""
        self._overrides_version = 0
        self.error: str | None = None
        """Why the shown run could not be loaded (the sentence `failed` carried), None while it loads or loaded."""
        self._latest = LatestTask(services.runner)
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
        self.rows, self.row_grid = None, None
        self.overrides = {}
        self._overrides_version += 1
        self._busy, self._reload, self._run_dirty = False, False, False
        self.error = None
        self._dirty.clear()
        if run_id is not None:
            self._load(FIRST_SPANS)

    def set_collapsed(self, lanes: list[int], collapsed: bool) -> None:
        """Collapse or expand these lanes' sub-trees (the operator's choice, kept by span id)."""
        if self.data is None or self.rows is None or not lanes:
            return
        for lane in lanes:
            self.overrides[self.data.ids[lane]] = collapsed
        self._overrides_version += 1
        self._set_rows(self.rows.with_state(lanes, collapsed))
        self.changed.emit(False, frozenset())

    def expand_all(self, expanded: bool = True) -> None:
        """Every sub-tree expanded (or back to the default folding)."""
        if self.data is None:
            return
        self.overrides = {}
        self._overrides_version += 1
        collapsed = np.zeros(len(self.data), dtype=bool)
        self._set_rows(Rows.build(self.data, collapsed) if expanded else Rows.default(self.data))
        self.changed.emit(False, frozenset())

    def _set_rows(self, rows: Rows, grid: Overview | bool | None = False) -> None:
        """New rows; their grid worked out here unless given (from the runner)."""
        if self.rows is not None and self.rows is not rows:
            self.rows.forget_view()
        self.rows = rows
        self.row_grid = row_grid(rows, self.overview, self.now()) if grid is False else grid  # type: ignore[assignment]

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
        self._latest.start(self._request(fn, args, on_done))

    async def _request(self, fn: Callable[..., Any], args: tuple[Any, ...], on_done: Callable[[Any], None]) -> None:
        try:
            result = await self.services.runner.run(fn, *args)
        except Exception as exc:
            self._busy = False
            reason = str(exc).strip().rstrip(".") or type(exc).__name__  # never "Could not load the run: "
            self.error = f"Could not load the run {self.run_id}: {reason}."
            self.failed.emit(self.error)
            return
        self._busy = False
        self.error = None
        on_done(result)
        self._arm()

    def _loaded(self, loaded: Loaded, version: int | None = None) -> None:
        first = self.data is None
        self.run, self.data, self.tokens, self.overview = loaded.run, loaded.data, loaded.tokens, loaded.overview
        if loaded.rows is not None and version == self._overrides_version:
            self._set_rows(loaded.rows, loaded.row_grid)
        else:  # the operator folded something while this was on its way
            self._set_rows(Rows.default(loaded.data, self.overrides))
        self.changed.emit(first, None)
        if not loaded.data.complete and self.run_id is not None:  # now the whole run, off the GUI thread
            self._load()

    def _load(self, first: int | None = None) -> None:
        assert self.run_id is not None
        version = self._overrides_version
        self._submit(load_run, self.services.source, self.run_id, first, dict(self.overrides),
                     on_done=lambda loaded: self._loaded(loaded, version))

    def _changed(self, changed: Changed, ids: frozenset[str], version: int) -> None:
        """Swap in what `load_changes` worked out on the runner (no pass over the spans here)."""
        if changed.run is not None:
            self.run = changed.run
        before = self.data
        self.data, self.tokens, self.overview = changed.relaid
        if changed.shown is not None and version == self._overrides_version:
            self._set_rows(*changed.shown)
        elif self.rows is not None and self.data is before:  # the operator folded meanwhile; spans changed in place
            self._set_rows(self.rows.refreshed())
        elif self.rows is not None and changed.inserted is not None and self.rows.data is before:
            self._set_rows(self.rows.inserted(self.data, changed.inserted, self.overrides))
        else:
            self._set_rows(Rows.default(self.data, self.overrides))
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
            self._load()
            return
        ids, run_changed = frozenset(self._dirty), self._run_dirty
        self._dirty.clear()
        self._run_dirty = False
        version = self._overrides_version
        shown = Shown(self.run, self.tokens, self.overview, self.rows, self.row_grid)
        self._submit(load_changes, source, self.data, self.run_id, sorted(ids), run_changed, dict(self.overrides),
                     shown, on_done=lambda changed: self._changed(changed, ids, version))
