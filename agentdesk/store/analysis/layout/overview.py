"""A run's spans summarised on a fixed grid, for the zoomed-out waterfall and the minimap.

Zoomed out over a million lanes, a pixel row holds hundreds of spans: drawing
them one by one costs a frame per pan. The grid is built on the runner: bands of
`band` consecutive lanes (at most `GRID_ROWS` bands) by slices of `step` seconds
(at most `GRID_COLUMNS`), each cell a bit mask of the span kinds present in it (a
span marks every cell its time covers). A frame then draws the visible part of
one image, so its cost follows the screen's pixels, not the span count. The
minimap reads the per-column totals: how many spans are active and how many
failed there.

A live run grows by a span at a time, so the geometry is chosen to stay put
while it grows: `band` and `step` are rounded up to a coarse ladder (`_lanes_ladder`,
`_time_ladder`, steps of at most ~9 %), and lanes and seconds map to cells by
those alone (`lane // band`, `(t - x0) // step`), not by the run's size. A grid
then grows (`grown`) by OR-ing in the cells of the new spans (and the open spans
that reached further with the clock), adding bands and columns at its end as the
run gets longer; only the bands whose lanes moved (a span inserted before the
end) or whose spans shrank (a span finished before `now`) are recomputed. When
the ladder steps (the run grew ~9 % longer or larger than the grid holds) the
grid is rebuilt: about once per 9 % of growth, not per span. Either way the
result is exactly `overview(data, now)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from agentdesk.store.analysis.layout.data import ERROR, KINDS, Before, TimelineData

GRID_ROWS = 1024
GRID_COLUMNS = 1024
LADDER = 8
"""Time steps per doubling (`_time_ladder`): a grid is rebuilt when the run grows past ~9 %."""


@dataclass(frozen=True, slots=True)
class Overview:
    """Kinds present per (lane band, time slice); per time slice, spans active and failures started."""

    x0: float
    x1: float
    """The time range the columns cover (seconds since run start): `x0 + columns * step`."""
    lanes: int
    mask: np.ndarray
    """(rows, columns) uint8; bit k set when a span of kind `KINDS[k]` covers the cell."""
    active: np.ndarray
    """(columns,) spans active in each time slice."""
    failed: np.ndarray
    """(columns,) failed spans that started in each time slice."""
    band: int = 0
    """Lanes per row (the last row may hold fewer); 0: `lanes / rows`."""
    step: float = 0.0
    """Seconds per column; 0: `(x1 - x0) / columns`."""
    now: float = 0.0
    """Where open spans ended when the grid was made (`grown` extends them to the next now)."""

    @property
    def rows(self) -> int:
        return int(self.mask.shape[0])

    @property
    def columns(self) -> int:
        return int(self.mask.shape[1])

    def lanes_per_row(self) -> float:
        return float(self.band) if self.band else self.lanes / max(self.rows, 1)

    def seconds_per_column(self) -> float:
        return self.step if self.step else (self.x1 - self.x0) / max(self.columns, 1)


def _lanes_ladder(lanes: int, rows: int) -> int:
    """Lanes per band: the smallest m * 2**e (m in 16..31) with `lanes` in `rows` bands; exact integers."""
    need = max(1, -(-lanes // max(rows, 1)))
    if need < 32:
        return need
    shift = need.bit_length() - 5
    m = -(-need // (1 << shift))
    return m << shift if m < 32 else 16 << (shift + 1)


def _time_ladder(seconds: float) -> float:
    """Seconds per column: the smallest 2**(k / LADDER) not below `seconds` (the same value for the
    same input, so a grid and its rebuild agree)."""
    k = math.ceil(LADDER * math.log2(seconds))
    while 2.0 ** (k / LADDER) < seconds:
        k += 1
    while 2.0 ** ((k - 1) / LADDER) >= seconds:
        k -= 1
    return 2.0 ** (k / LADDER)


@dataclass(frozen=True, slots=True)
class _Geometry:
    x0: float
    step: float
    columns: int
    band: int
    rows: int


def _geometry(data: TimelineData, now: float, rows: int, columns: int) -> _Geometry:
    n = len(data)
    x0, x1 = data.extent(now)
    x1 = max(x1, x0 + 1e-6)
    step = _time_ladder((x1 - x0) / columns)
    used = min(columns, int((x1 - x0) / step) + 1)
    band = _lanes_ladder(n, rows)
    return _Geometry(x0, step, used, band, max(1, -(-n // band)))


def _cells(data: TimelineData, lanes: np.ndarray | None, now: float,
           geo: _Geometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First and last column of these lanes' spans (all lanes when None), and the kind codes."""
    start = data.start if lanes is None else data.start[lanes]
    end = data.end if lanes is None else data.end[lanes]
    ends = np.where(np.isnan(end), np.maximum(start, now), end)
    return _column(start, geo), _column(ends, geo), data.kind if lanes is None else data.kind[lanes]


def _column(t: np.ndarray, geo: _Geometry) -> np.ndarray:
    return np.clip(((t - geo.x0) / geo.step).astype(np.int64), 0, geo.columns - 1)


def _cover(row: np.ndarray, c0: np.ndarray, c1: np.ndarray, kind: np.ndarray, rows: int,
           columns: int) -> np.ndarray:
    """(rows, columns) kind bits of spans in these (local) rows and column ranges: a difference array
    and a running sum per kind, no Python loop per span."""
    width = columns + 1
    mask = np.zeros((rows, columns), dtype=np.uint8)
    for code in range(len(KINDS)):
        mine = np.flatnonzero(kind == code)
        if not len(mine):
            continue
        base = row[mine] * width
        cover = np.bincount(base + c0[mine], minlength=rows * width)
        cover -= np.bincount(base + c1[mine] + 1, minlength=rows * width)
        occupied = np.cumsum(cover.reshape(rows, width), axis=1)[:, :columns] > 0
        mask |= occupied.astype(np.uint8) << code
    return mask


def overview(data: TimelineData, now: float, rows: int = GRID_ROWS, columns: int = GRID_COLUMNS) -> Overview:
    """The grid for this layout (see the module docstring); O(spans + cells), no Python loop per span.
    `rows` and `columns` are the most the grid has."""
    n = len(data)
    geo = _geometry(data, now, rows, columns)
    x1 = geo.x0 + geo.columns * geo.step
    if n == 0:
        empty = np.zeros(geo.columns, dtype=np.int64)
        return Overview(geo.x0, x1, 0, np.zeros((1, geo.columns), dtype=np.uint8), empty, empty, geo.band,
                        geo.step, now)
    c0, c1, kind = _cells(data, None, now, geo)
    row = np.arange(n, dtype=np.int64) // geo.band
    mask = _cover(row, c0, c1, kind, geo.rows, geo.columns)
    width = geo.columns + 1
    active = np.cumsum(np.bincount(c0, minlength=width) - np.bincount(c1 + 1, minlength=width))[:geo.columns]
    failed = np.bincount(c0[data.status == ERROR], minlength=geo.columns)[:geo.columns]
    return Overview(geo.x0, x1, n, mask, active, failed, geo.band, geo.step, now)


def grown(old: Overview | None, data: TimelineData, now: float, inserted: np.ndarray | None = None,
          before: Before | None = None, rows: int = GRID_ROWS, columns: int = GRID_COLUMNS) -> Overview:
    """`overview(data, now)` derived from `old`, the grid of this layout before `inserted` (sorted
    positions in `data` of the spans added since) were added and `before.lanes` changed in place.

    Costs the changed spans, the open ones (they reach `now`) and the bands recomputed (those from the
    first insertion before the end, those of spans changed in place): milliseconds for a live span
    at a million. Rebuilds from scratch when the geometry stepped (see the module docstring), or
    when the clock went back.
    """
    n = len(data)
    inserted = np.zeros(0, dtype=np.int64) if inserted is None else np.asarray(inserted, dtype=np.int64)
    changed = np.zeros(0, dtype=np.int64) if before is None else before.lanes
    geo = _geometry(data, now, rows, columns)
    if (old is None or not n or old.lanes != n - len(inserted) or not old.lanes or old.band != geo.band
            or old.step != geo.step or old.x0 != geo.x0 or geo.columns < old.columns or now < old.now):
        return overview(data, now, rows, columns)
    mask = np.zeros((geo.rows, geo.columns), dtype=np.uint8)
    mask[:old.rows, :old.columns] = old.mask
    is_open = np.isnan(data.end)
    is_open[inserted] = False
    is_open[changed] = False
    still_open = np.flatnonzero(is_open)  # open before and now: they reach from the old now to this one
    # active and failed: the old counts, less what changed and open spans covered, plus what they cover now
    old_geo = _Geometry(old.x0, old.step, geo.columns, old.band, old.rows)
    delta = np.zeros(geo.columns + 1, dtype=np.int64)
    failed = np.zeros(geo.columns, dtype=np.int64)
    failed[:old.columns] = old.failed
    for lanes in (inserted, changed, still_open):
        if len(lanes):
            c0, c1, _ = _cells(data, lanes, now, geo)
            _count(delta, c0, c1, 1)
            if lanes is not still_open:  # an open span's start and status are as they were
                failed += np.bincount(c0[data.status[lanes] == ERROR], minlength=geo.columns)
    if before is not None and len(changed):
        ends = np.where(np.isnan(before.end), np.maximum(before.start, old.now), before.end)
        c0 = _column(before.start, old_geo)
        _count(delta, c0, _column(ends, old_geo), -1)
        failed -= np.bincount(c0[before.status == ERROR], minlength=geo.columns)
    if len(still_open):
        start = data.start[still_open]
        _count(delta, _column(start, old_geo), _column(np.maximum(start, old.now), old_geo), -1)
    active = np.zeros(geo.columns, dtype=np.int64)
    active[:old.columns] = old.active
    active += np.cumsum(delta)[:geo.columns]
    # the mask: bands whose lanes moved or whose spans shrank are recomputed, the rest only gain cells
    dirty = set((changed // geo.band).tolist())
    moved_from = _first_moved(inserted, old.lanes)
    if moved_from < n:
        dirty.update(range(moved_from // geo.band, geo.rows))
    if dirty:
        bands = np.asarray(sorted(dirty), dtype=np.int64)
        lanes = np.concatenate([np.arange(b * geo.band, min((b + 1) * geo.band, n)) for b in bands.tolist()])
        c0, c1, kind = _cells(data, lanes, now, geo)
        mask[bands] = _cover(np.searchsorted(bands, lanes // geo.band), c0, c1, kind, len(bands), geo.columns)
    gain = np.concatenate((inserted, still_open))
    if len(gain):
        bands, local = np.unique(gain // geo.band, return_inverse=True)
        c0, c1, kind = _cells(data, gain, now, geo)
        mask[bands] |= _cover(local, c0, c1, kind, len(bands), geo.columns)
    return Overview(geo.x0, geo.x0 + geo.columns * geo.step, n, mask, active, failed, geo.band, geo.step, now)


def _count(delta: np.ndarray, c0: np.ndarray, c1: np.ndarray, sign: int) -> None:
    """Add (or take away) spans covering columns c0..c1 to a difference array of active spans."""
    width = len(delta)
    delta += sign * (np.bincount(c0, minlength=width) - np.bincount(c1 + 1, minlength=width))


def _first_moved(inserted: np.ndarray, n_old: int) -> int:
    """The first position whose lane differs from before: the first insertion that is not part of
    the run of insertions at the very end (those move nothing)."""
    n = n_old + len(inserted)
    at_end = inserted == np.arange(n - len(inserted), n)  # sorted: the tail ones are n_old.., n-1
    inner = inserted[~at_end]
    return int(inner[0]) if len(inner) else n


def pooled(mask: np.ndarray, fy: int, fx: int) -> np.ndarray:
    """The mask with each `fy` x `fx` block of cells OR-ed into one: scaling a grid down by sampling
    would drop most rows (and the spans in them); pooling keeps every kind that is present."""
    rows, columns = mask.shape
    padded = np.zeros((-(-rows // fy) * fy, -(-columns // fx) * fx), dtype=mask.dtype)
    padded[:rows, :columns] = mask
    by_rows = np.bitwise_or.reduce(padded.reshape(-1, fy, padded.shape[1]), axis=1)
    return np.bitwise_or.reduce(by_rows.reshape(by_rows.shape[0], -1, fx), axis=2)
