"""A run's spans laid out for the waterfall, as numpy arrays (no Qt, so tests need no display).

One lane per span, in depth-first order: children sit under their parent and
siblings follow their start times. Because of that order the spans in a
vertical window are one contiguous slice, so culling is slicing. The drawing
item reads these arrays directly; nothing here touches a widget.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import overload

import numpy as np

from agentdesk.store import readmodel as rm
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.timeline.columns import SpanColumns, from_table
from agentdesk.store.timeline.id_index import Keys
from agentdesk.store.timeline.room import Room, insert_at, put, with_room
from agentdesk.store.timeline.strings import Coded, Gathered, take

KINDS: tuple[str, ...] = (rm.SpanKind.AGENT, rm.SpanKind.SUB_AGENT, rm.SpanKind.MODEL, rm.SpanKind.TOOL,
                          rm.SpanKind.GUARDRAIL, rm.SpanKind.GATE, rm.SpanKind.INTERNAL)
"""Lane kinds by code; a kind no view knows draws as `INTERNAL` (and keeps its name)."""
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
OTHER_KIND = KIND_CODES[rm.SpanKind.INTERNAL]
STATUSES: tuple[str, ...] = (rm.SpanStatus.OK, rm.SpanStatus.ERROR, rm.SpanStatus.CANCELLED, rm.SpanStatus.RUNNING)
OK, ERROR, CANCELLED, RUNNING = range(len(STATUSES))
STATUS_CODES = {status: code for code, status in enumerate(STATUSES)}
APPEND_AT_MOST = 64
"""More new spans than this at once are laid out with the run, not inserted one by one."""


def dfs_order(parent: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pre-order of a forest (parent index, -1 for roots); siblings by start, ties by input order.

    Returns the order and the parent array actually used: a span caught in a
    parent cycle (foreign data can hold one) is cut loose and becomes a root.
    Iterative, so a 100,000-deep chain is as safe as a flat run.
    """
    n = len(parent)
    parent = parent.copy()
    by_parent = np.lexsort((start, parent))
    bounds = np.searchsorted(parent[by_parent], np.arange(-1, n + 1)).tolist()
    children = by_parent.tolist()
    visited = bytearray(n)
    order: list[int] = []
    _walk(children[bounds[0]:bounds[1]], children, bounds, visited, order)
    if len(order) < n:
        for lost in np.argsort(start, kind="stable").tolist():
            if not visited[lost]:
                parent[lost] = -1
                _walk([lost], children, bounds, visited, order)
    return np.asarray(order, dtype=np.int64), parent


def _walk(roots: list[int], children: list[int], bounds: list[int], visited: bytearray,
          order: list[int]) -> None:
    stack = roots[::-1]
    pop, push, emit = stack.pop, stack.extend, order.append
    while stack:
        node = pop()
        if visited[node]:
            continue
        visited[node] = 1
        emit(node)
        lo, hi = bounds[node + 1], bounds[node + 2]
        if hi > lo:
            push(children[lo:hi][::-1])


def depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every node of a forest by pointer doubling: O(n log depth), no recursion."""
    depth = (parent >= 0).astype(np.int64)
    up = parent.copy()
    while (has := up >= 0).any():
        safe = np.where(has, up, 0)
        depth = depth + np.where(has, depth[safe], 0)
        up = np.where(has, up[safe], -1)
    return depth


def merge_blocks(key: np.ndarray, x0: np.ndarray, x1: np.ndarray,
                 gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge integer intervals of equal key that overlap or lie within `gap`; input sorted by (key, x0).

    Keys below 2**14 and x in [0, 65535]: key and x are packed into one int32, so
    a single running maximum walks every key at once without crossing between keys.
    """
    if len(key) == 0:
        return key, x0, x1
    high = key.astype(np.int32)
    high <<= 16
    a, b = x0.astype(np.int32), x1.astype(np.int32)
    a |= high
    b |= high
    reach = np.maximum.accumulate(b)
    reach += gap
    new = np.empty(len(a), dtype=bool)
    new[0] = True
    np.greater(a[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    return key[first], x0[first], np.maximum.reduceat(b, first) & 0xFFFF


def pixel_blocks(row: np.ndarray, group: np.ndarray, px0: np.ndarray, px1: np.ndarray,
                 gap: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Level of detail: one block per run of same-colour spans in a pixel row (row, group, x0, x1).

    Pixel columns are integers in [0, 65535] (clip to the viewport first) and
    rows * groups must stay below 2**14. Two stable 16-bit sorts (numpy
    radix-sorts those) order the spans by row, group and x without a comparison
    sort, so 100,000 spans cost a few milliseconds.
    """
    groups = int(group.max()) + 1 if len(group) else 1
    key = row.astype(np.uint16)  # small types, written in place: 100,000 spans make few temporaries
    key *= groups
    np.add(key, group, out=key, casting="unsafe")
    x0, x1 = (np.clip(px, 0, 65535, out=np.empty(len(px), np.uint16), casting="unsafe") for px in (px0, px1))
    by_x = np.argsort(x0, kind="stable")
    key, x0, x1 = key[by_x], x0[by_x], x1[by_x]
    by_key = np.argsort(key, kind="stable")
    k, b0, b1 = merge_blocks(key[by_key], x0[by_key], x1[by_key], gap)
    k = k.astype(np.int64)
    return k // groups, k % groups, b0.astype(np.int64), b1.astype(np.int64)


def step_samples(t: np.ndarray, x0: float, x1: float, columns: int) -> np.ndarray:
    """Indices of a cumulative step series (sorted `t`) that draw it as all of it would, `columns`
    pixels across [x0, x1]: the sample in force at the left edge, the last of each pixel column and
    the first past the right edge. A rising curve only climbs within a column, so those are enough.
    """
    if not len(t) or columns < 1 or not x1 > x0:
        return np.arange(len(t))
    last = np.searchsorted(t, np.linspace(x0, x1, columns + 1), side="right") - 1
    return np.unique(np.clip(np.append(last, last[-1] + 1), 0, len(t) - 1))


@dataclass(frozen=True, slots=True)
class TokenSeries:
    """Cumulative usage by span end time (seconds since run start), starting at zero."""

    t: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    cost: np.ndarray
    model_calls: int = field(default=-1, kw_only=True)
    """Model calls with usage in the layout (open ones too): while there are any, only they count
    (`TimelineData.token_series`). -1 when unknown: such a series is not extended, only rebuilt."""
    room: Room | None = field(default=None, compare=False, repr=False, kw_only=True)
    """The room after the arrays (a live span that ends after every other adds its sample there, not by
    copying four arrays of a million samples); None: appending copies."""


@dataclass(frozen=True, slots=True)
class Before:
    """Lanes about to change in place (`TimelineData.update`), as they were: what the grid and the
    token series take away before adding the spans as they are now."""

    lanes: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray
    status: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    cost: np.ndarray

    @classmethod
    def of(cls, data: TimelineData, lanes: np.ndarray | list[int]) -> Before:
        """These lanes' values now (copies), taken before they change."""
        at = np.asarray(lanes, dtype=np.int64)
        return cls(at, *(getattr(data, name)[at].copy() for name in
                         ("start", "end", "kind", "status", "input_tokens", "output_tokens", "cost")))

    def moved(self, lanes: np.ndarray) -> Before:
        """The same spans at other positions (spans were inserted before them, or as rows)."""
        return replace(self, lanes=np.asarray(lanes, dtype=np.int64))

    def picked(self, keep: np.ndarray) -> Before:
        """Only some of these spans (a boolean mask or indices into them)."""
        return Before(*(getattr(self, name)[keep] for name in
                        ("lanes", "start", "end", "kind", "status", "input_tokens", "output_tokens", "cost")))


def bounded_depths(parent: np.ndarray) -> np.ndarray | None:
    """`depths`, or None when a parent cycle (foreign data can hold one) keeps a span from any root."""
    depth = (parent >= 0).astype(np.int64)
    up = parent.copy()
    for _ in range(max(1, len(parent)).bit_length() + 1):
        has = up >= 0
        if not has.any():
            return depth
        safe = np.where(has, up, 0)
        depth += np.where(has, depth[safe], 0)
        up = np.where(has, up[safe], -1)
    return None if (up >= 0).any() else depth


def preorder(parent: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`dfs_order` without a Python loop per span: the order, the parents used and the depths (input order).

    A span's place in a pre-order is its parent's place + 1 + the sizes of the
    sibling sub-trees before it, so with sub-tree sizes summed bottom-up and
    places assigned top-down, one level at a time, every step is an array
    operation: a million spans cost a few hundred milliseconds instead of
    seconds. Parent cycles fall back to the iterative walk, which cuts them.
    """
    n = len(parent)
    depth = bounded_depths(parent)
    if depth is None:
        order, parent = dfs_order(parent, start)
        return order, parent, depths(parent)
    by_depth = np.argsort(depth, kind="stable")
    levels = np.searchsorted(depth[by_depth], np.arange(int(depth.max(initial=0)) + 2))
    size = np.ones(n, dtype=np.int64)
    for d in range(len(levels) - 2, 0, -1):
        nodes = by_depth[levels[d]:levels[d + 1]]
        np.add.at(size, parent[nodes], size[nodes])
    siblings = np.lexsort((start, parent))  # by parent, then start; ties keep the input order
    before = np.cumsum(size[siblings]) - size[siblings]  # sizes of everything earlier in this order
    group = parent[siblings]
    first = np.searchsorted(group, group)  # where each span's sibling group begins
    offset = np.empty(n, dtype=np.int64)
    offset[siblings] = before - before[first]
    place = np.empty(n, dtype=np.int64)
    roots = by_depth[levels[0]:levels[1]]
    place[roots] = offset[roots]
    for d in range(1, len(levels) - 1):
        nodes = by_depth[levels[d]:levels[d + 1]]
        place[nodes] = place[parent[nodes]] + 1 + offset[nodes]
    order = np.empty(n, dtype=np.int64)
    order[place] = np.arange(n)
    return order, parent, depth


class LaneIndex:
    """Span id → lane, shared by a layout and the layouts appended from it.

    Ids map to a key (see `Keys`; the read may hand them over, `SpanKeys`) in one dict that only grows;
    each layout has its own key → lane array. Appending a span therefore adds one
    dict entry and shifts an array, instead of rebuilding a million-entry dict,
    and the previous layout (still on screen) keeps answering for its own lanes.
    """

    __slots__ = ("_keys", "_lane")

    def __init__(self, keys: Keys, lane_of_key: np.ndarray) -> None:
        self._keys, self._lane = keys, lane_of_key

    def get(self, span_id: str | None, default: int = -1) -> int:
        key = self._keys.get(span_id) if span_id is not None else None
        if key is None or key >= len(self._lane):
            return default
        lane = int(self._lane[key])
        return default if lane < 0 else lane

    def __getitem__(self, span_id: str) -> int:
        lane = self.get(span_id)
        if lane < 0:
            raise KeyError(span_id)
        return lane

    def __contains__(self, span_id: object) -> bool:
        return isinstance(span_id, str) and self.get(span_id) >= 0

    def __len__(self) -> int:
        return int((self._lane >= 0).sum())


_ROOMY = ("start", "end", "input_tokens", "output_tokens", "cost", "parent", "depth", "kind", "status")
"""The per-lane arrays of a layout (besides ids, names, kinds, statuses and the lane index)."""


class _Growing(Sequence[str]):
    """Span ids that only grow at the end: every layout appended from one run shares this sequence.

    The read's ids (a list, or `FixedIds`: a numpy array, not a million str objects) are kept as
    they are, never copied; ids appended later go to a list after them."""

    __slots__ = ("_base", "_n", "_tail")

    def __init__(self, base: Sequence[str]) -> None:
        self._base, self._n = base, len(base)
        self._tail: list[str] = []

    def __len__(self) -> int:
        return self._n + len(self._tail)

    @overload
    def __getitem__(self, k: int) -> str: ...
    @overload
    def __getitem__(self, k: slice) -> list[str]: ...

    def __getitem__(self, k: int | slice) -> str | list[str]:
        if isinstance(k, slice):
            return self.gathered(np.arange(len(self))[k])
        if k < 0:
            k += len(self)
        return self._base[k] if 0 <= k < self._n else self._tail[k - self._n]

    def gathered(self, index: np.ndarray) -> list[str]:
        """`[self[k] for k in index]`, in C when all are the read's (`take`)."""
        if not len(index):
            return []
        if int(index.max()) < self._n and int(index.min()) >= 0:
            return take(self._base, index.tolist())
        return [self[k] for k in index.tolist()]

    def add(self, span_id: str) -> int:
        """Append; the new id's index (under a lock: two appends at once must not get one index)."""
        with _GROWING:
            self._tail.append(span_id)
            return len(self) - 1


_GROWING = threading.Lock()


class LaneIds(Gathered[str]):
    """Span ids by lane: one shared list of ids (`_Growing`) and this layout's lane → index array.

    A live span inserted into a million-span layout then appends one id to the shared list and
    copies an int64 array (~1 ms), where a list of ids per layout meant copying a million pointers
    and touching a million strings (~40 ms). Layouts made earlier never index past their own ids.
    """

    __slots__ = ()

    def __init__(self, ids: _Growing, at: np.ndarray) -> None:
        super().__init__(ids, at)

    @property
    def _ids(self) -> _Growing:
        values = self._values
        assert isinstance(values, _Growing)
        return values

    @property
    def _at(self) -> np.ndarray:
        return self._index

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return self._ids.gathered(self._at[i])
        return super().__getitem__(i)

    def __iter__(self) -> Iterator[str]:
        for a in range(0, len(self), SLICE):
            yield from self._ids.gathered(self._at[a:a + SLICE])

    def inserted(self, lane: int, span_id: str, room: int = 0) -> LaneIds:
        """A copy with `span_id` at `lane` (this one unchanged: it never reads past its own ids)."""
        return LaneIds(self._ids, insert_at(self._at, lane, self._ids.add(span_id), room))


class TimelineData:
    """The laid-out spans of one run; arrays are indexed by lane.

    Numbers are numpy arrays, names, kinds and statuses codes into their distinct
    strings (`Coded`), ids an index into one shared list (`LaneIds`): a million
    spans hold a few hundred megabytes, not a gigabyte of row objects, and a
    layout is reordered, copied or appended to in numpy, not by walking a million
    Python objects with the GIL held while the GUI thread waits for it. The
    arrays sit in buffers with room after them (`Room`), so a live span after
    the last lane is appended in place. An appended layout shares those buffers
    with the one it came from: `update` (in place) on either changes both.
    """

    def __init__(self, t0: float, cols: SpanColumns) -> None:
        """Lay out columns given in any order; their times relative to `t0`, end NaN while open."""
        self.t0 = t0
        n = len(cols)
        # Loops over a million spans run in slices: one C call over all of them would hold the GIL
        # (and freeze the GUI thread) for its whole duration, a slice only for milliseconds.
        if cols.keys is not None:  # built by the read (see `SpanKeys`)
            keys, key_of = cols.keys.keys, cols.keys.of_row
            row_of_key = np.full(keys.next_key, -1, dtype=np.int64)
            row_of_key[key_of] = np.arange(n)
            parent_key = cols.keys.parent_of_row
            parent = np.where(parent_key >= 0, row_of_key[np.maximum(parent_key, 0)], -1) if n else parent_key
        else:
            keys, key_of = Keys(n), np.arange(n)
            for a, b in _slices(n):
                keys.update(zip(cols.ids[a:b], range(a, b), strict=True))
            lookup: dict[str | None, int] = keys  # type: ignore[assignment]  # None is never a key: -1
            parent = np.concatenate([np.fromiter(map(lookup.get, cols.parent_ids[a:b], repeat(-1)), np.int64, b - a)
                                     for a, b in _slices(n)]) if n else np.zeros(0, dtype=np.int64)
        order, parent, depth = preorder(parent, cols.start)
        self.ids = LaneIds(_Growing(cols.ids), order)
        self.names, self.kind_names, self.status_names = (c.taken(order) for c in (cols.names, cols.kinds,
                                                                                   cols.statuses))
        inverse = np.empty_like(order)
        inverse[order] = np.arange(n)
        lane_of_key = np.full(keys.next_key, -1, dtype=np.int64)
        lane_of_key[key_of] = inverse
        self.lane_of = LaneIndex(keys, lane_of_key)
        up = parent[order]
        self.parent = np.where(up >= 0, inverse[np.maximum(up, 0)], -1)
        self.depth = depth[order]
        # a parent id no span of the run has (yet): kept, so that span is attached when it arrives
        self.unknown_parent = {int(inverse[i]): p for i in np.flatnonzero(parent < 0).tolist()
                               if (p := cols.parent_ids[i]) is not None}
        self.kind = self.kind_names.lookup(KIND_CODES, OTHER_KIND, np.int8)
        self.status = self.status_names.lookup(STATUS_CODES, OK, np.int8)
        self.start, self.end = cols.start[order], cols.end[order]
        self.input_tokens, self.output_tokens = cols.input_tokens[order], cols.output_tokens[order]
        self.cost = cols.cost[order]
        self.total = max(cols.total, n)
        """Spans the run has: more than `len(self)` while only its first spans are laid out."""
        self.version = 0
        self._make_room()

    def _make_room(self) -> None:
        """Move the arrays into buffers with room at the end (`Room`): the next spans appended there
        are written in place, not copied with a million others."""
        room = Room(len(self), len(self.lane_of._lane))  # lanes, and keys of the lane index
        lanes, keys = room.capacity
        for name in _ROOMY:
            setattr(self, name, with_room(getattr(self, name), lanes))
        self.ids = LaneIds(self.ids._ids, with_room(self.ids._at, lanes))
        self.names, self.kind_names, self.status_names = (
            Coded(with_room(c.codes, lanes), c._table) for c in (self.names, self.kind_names, self.status_names))
        self.lane_of = LaneIndex(self.lane_of._keys, with_room(self.lane_of._lane, keys))
        self._room = room

    @classmethod
    def from_table(cls, table: SpanTable, t0: float | None = None) -> TimelineData:
        """Lay out a run's span table; `t0` is the run's start (default: its first span's)."""
        return cls.from_columns(from_table(table), t0)

    @classmethod
    def from_columns(cls, cols: SpanColumns, t0: float | None = None) -> TimelineData:
        """Lay out a run's span columns (absolute times); `t0` is the run's start (default: its first span's)."""
        if t0 is None:
            t0 = float(cols.start.min()) if len(cols) else 0.0
        return cls(t0, replace(cols, start=cols.start - t0, end=cols.end - t0))

    def __len__(self) -> int:
        return len(self.start)

    @property
    def complete(self) -> bool:
        return len(self) >= self.total

    def parent_id(self, lane: int) -> str | None:
        up = int(self.parent[lane])
        return self.ids[up] if up >= 0 else self.unknown_parent.get(lane)

    @property
    def open(self) -> np.ndarray:
        """Spans without an end yet (running, or never closed)."""
        return np.isnan(self.end)

    @property
    def points(self) -> np.ndarray:
        """Closed spans of no duration: point events and milestones (vgxness has nothing else),
        drawn as markers at their start, as a bar they would be invisible."""
        return ~np.isnan(self.end) & (self.end <= self.start)

    def ends(self, now: float) -> np.ndarray:
        """End times with open spans reaching `now` (seconds since run start)."""
        return np.where(np.isnan(self.end), np.maximum(self.start, now), self.end)

    def extent(self, now: float) -> tuple[float, float]:
        """From the run start (or an earlier span) to the last end, open spans reaching `now`.

        Kept per version: the panel asks on every tick and fit, and at a million spans
        each full pass over the ends is tens of milliseconds on the GUI thread.
        """
        if not len(self):
            return 0.0, 0.0
        key = (self.version, len(self))
        if getattr(self, "_extent_key", None) != key:
            open_lanes = np.flatnonzero(np.isnan(self.end))
            last_closed = float(np.fmax.reduce(self.end)) if len(open_lanes) < len(self) else math.nan
            self._extent = (min(0.0, float(self.start.min())), -math.inf if math.isnan(last_closed) else last_closed,
                            float(self.start[open_lanes].max()) if len(open_lanes) else None)
            self._extent_key = key  # (fmax skips the open spans' NaN without copying the closed ones out)
        first, last_closed, last_open_start = self._extent
        last = last_closed if last_open_start is None else max(last_closed, last_open_start, now)
        return first, last if math.isfinite(last) else first

    def update(self, rows: SpanTable) -> TimelineData:
        """Apply changed or new spans: in place when the tree is unchanged, else a new layout.

        Returns the data to use from now on (self, or the re-laid-out copy).
        """
        if self.needs_relayout(rows):
            return self.relaid_out(rows)
        for i, span_id in enumerate(rows.ids):
            lane = self.lane_of[span_id]
            self.names[lane], self.kind_names[lane] = rows.names[i], rows.kinds[i]
            self.status_names[lane] = rows.statuses[i]
            self.kind[lane] = KIND_CODES.get(rows.kinds[i], OTHER_KIND)
            self.status[lane] = STATUS_CODES.get(rows.statuses[i], OK)
            end = rows.ends[i]
            self.end[lane] = math.nan if end is None else end - self.t0
            self.input_tokens[lane], self.output_tokens[lane] = rows.input_tokens[i], rows.output_tokens[i]
            self.cost[lane] = rows.costs[i]
        self.version += 1
        return self

    def needs_relayout(self, rows: SpanTable) -> bool:
        """Whether these rows add spans or move one in the tree (else they update lanes in place)."""
        for i, span_id in enumerate(rows.ids):
            lane = self.lane_of.get(span_id)
            if lane < 0 or self.parent_id(lane) != rows.parent_ids[i]:
                return True
            if self.start[lane] != rows.starts[i] - self.t0:
                return True
        return False

    def relaid_out(self, rows: SpanTable) -> TimelineData:
        """A new layout with these rows added or replaced; this one is left untouched (thread-safe).

        New spans that fall at the end of their parent's sub-tree (a live run's
        new spans almost always do) are inserted (`appended`); anything else lays
        the whole run out again.
        """
        quick = self.appended(rows)
        if quick is not None:
            return quick
        replaced = set(rows.ids)
        keep = [lane for lane, span_id in enumerate(self.ids) if span_id not in replaced]
        new = from_table(rows)
        kept = _take_columns(self.columns(), keep, self.t0)
        start, end, input_tokens, output_tokens, cost = (
            np.concatenate((a, b)) for a, b in zip(_numbers(kept), _numbers(new), strict=True))
        merged = SpanColumns([*kept.ids, *new.ids], [*kept.parent_ids, *new.parent_ids], kept.kinds + new.kinds,
                             kept.names + new.names, kept.statuses + new.statuses, start, end, input_tokens,
                             output_tokens, cost, total=0)
        data = TimelineData.from_columns(merged, self.t0)
        data.total = max(self.total, len(data))
        data.version = self.version + 1
        return data

    def appended(self, rows: SpanTable) -> TimelineData | None:
        """This layout with new spans inserted where a full layout would put them; None when one
        is needed (a span changed parent or start, or lands before a later sibling).

        Only the lanes after the insertion point move: a live run's new spans
        sit near the end, so a million-span run takes milliseconds, not a relayout.
        """
        if not len(rows) or len(rows) > APPEND_AT_MOST or any(span_id in self.lane_of for span_id in rows.ids):
            return None
        if self.unknown_parent and not set(rows.ids).isdisjoint(self.unknown_parent.values()):
            return None  # a span some laid-out span names as its parent: they join up in a full layout
        data = self
        for i in np.argsort(np.asarray(rows.starts, dtype=np.float64), kind="stable").tolist():
            data = data._insert_one(rows, i)  # type: ignore[assignment]
            if data is None:
                return None
        data.version = self.version + 1
        return data

    def _insert_one(self, rows: SpanTable, i: int) -> TimelineData | None:
        n, start = len(self), rows.starts[i] - self.t0
        up = self.lane_of.get(rows.parent_ids[i]) if rows.parent_ids[i] is not None else -1
        if rows.parent_ids[i] is not None and up < 0:
            return None  # its parent is not laid out yet: attaching it later needs the full layout
        if up >= 0:
            later = np.flatnonzero(self.depth[up + 1:] <= self.depth[up])
            at = up + 1 + (int(later[0]) if len(later) else n - up - 1)
            siblings = np.flatnonzero(self.parent[up + 1:at] == up)
        else:
            at = n
            siblings = np.flatnonzero(self.parent < 0)
        if len(siblings) and self.start[siblings[-1] + (up + 1 if up >= 0 else 0)] > start:
            return None
        return self._with_lane(at, up, rows, i)

    def _with_lane(self, at: int, up: int, rows: SpanTable, i: int) -> TimelineData:
        new = object.__new__(TimelineData)
        new.t0, new.total, new.version = self.t0, self.total + 1, self.version
        key = self.lane_of._keys.add(rows.ids[i])
        if at == len(self) and self._room.claim(at, key):  # the span goes after the last lane, its key last
            self._append(new, up, key, rows, i)
            return new
        old = self.lane_of._lane
        room = new._room = Room(len(self) + 1, max(len(old), key + 1))
        spare = room.capacity[0] - room.length[0]
        new.ids = self.ids.inserted(at, rows.ids[i], spare)
        new.names = self.names.inserted(at, rows.names[i], spare)
        new.kind_names = self.kind_names.inserted(at, rows.kinds[i], spare)
        new.status_names = self.status_names.inserted(at, rows.statuses[i], spare)
        lanes = np.empty(room.capacity[1], dtype=old.dtype)[:room.length[1]]
        lanes[:len(old)] = old
        lanes[len(old):] = -1
        if at < len(self):  # lanes from `at` on move down one (none do for a span at the end)
            lanes[lanes >= at] += 1
        lanes[key] = at
        new.lane_of = LaneIndex(self.lane_of._keys, lanes)
        parent = insert_at(self.parent, at, up, spare)
        tail = parent[at + 1:]  # a parent's lane is below its children's: only these can point past `at`
        tail[tail >= at] += 1
        new.parent = parent
        new.depth = insert_at(self.depth, at, self.depth[up] + 1 if up >= 0 else 0, spare)
        new.unknown_parent = {lane + (lane >= at): p for lane, p in self.unknown_parent.items()}
        new.kind = insert_at(self.kind, at, KIND_CODES.get(rows.kinds[i], OTHER_KIND), spare)
        new.status = insert_at(self.status, at, STATUS_CODES.get(rows.statuses[i], OK), spare)
        end = rows.ends[i]
        new.start = insert_at(self.start, at, rows.starts[i] - self.t0, spare)
        new.end = insert_at(self.end, at, math.nan if end is None else end - self.t0, spare)
        new.input_tokens = insert_at(self.input_tokens, at, rows.input_tokens[i], spare)
        new.output_tokens = insert_at(self.output_tokens, at, rows.output_tokens[i], spare)
        new.cost = insert_at(self.cost, at, rows.costs[i], spare)
        return new

    def _append(self, new: TimelineData, up: int, key: int, rows: SpanTable, i: int) -> None:
        """`new` as this layout with the span after its last lane, written into the room its arrays
        share (`Room.claim` said it is free): no array is copied, this layout still ends where it did."""
        at, end = len(self), rows.ends[i]
        new._room = self._room
        new.ids = LaneIds(self.ids._ids, put(self.ids._at, self.ids._ids.add(rows.ids[i])))
        new.names, new.kind_names, new.status_names = (
            Coded(put(c.codes, c._table[value]), c._table)
            for c, value in ((self.names, rows.names[i]), (self.kind_names, rows.kinds[i]),
                             (self.status_names, rows.statuses[i])))
        new.lane_of = LaneIndex(self.lane_of._keys, put(self.lane_of._lane, at))
        new.parent = put(self.parent, up)
        new.depth = put(self.depth, self.depth[up] + 1 if up >= 0 else 0)
        new.unknown_parent = dict(self.unknown_parent)
        new.kind = put(self.kind, KIND_CODES.get(rows.kinds[i], OTHER_KIND))
        new.status = put(self.status, STATUS_CODES.get(rows.statuses[i], OK))
        new.start = put(self.start, rows.starts[i] - self.t0)
        new.end = put(self.end, math.nan if end is None else end - self.t0)
        new.input_tokens = put(self.input_tokens, rows.input_tokens[i])
        new.output_tokens = put(self.output_tokens, rows.output_tokens[i])
        new.cost = put(self.cost, rows.costs[i])

    def columns(self) -> SpanColumns:
        """This layout's spans as columns (lane order, times relative to t0)."""
        parents = [self.parent_id(lane) for lane in range(len(self))]
        return SpanColumns(list(self.ids), parents, self.kind_names, self.names, self.status_names, self.start,
                           self.end, self.input_tokens, self.output_tokens, self.cost, total=self.total)

    def token_series(self) -> TokenSeries:
        """Usage of model calls when they carry any (some runtimes repeat it on the agent span
        around them, which would count it twice); otherwise of every span."""
        used = (self.input_tokens > 0) | (self.output_tokens > 0) | (self.cost > 0)
        model_calls = used & (self.kind == KIND_CODES["model"])
        models = int(model_calls.sum())
        done = ~np.isnan(self.end) & (model_calls if models else used)
        by_end = np.argsort(self.end[done], kind="stable")
        room = Room(int(done.sum()) + 1)
        (capacity,) = room.capacity

        def cumulative(values: np.ndarray) -> np.ndarray:
            return with_room(np.concatenate(([0], np.cumsum(values[done][by_end]))), capacity)

        t = with_room(np.concatenate(([0.0], self.end[done][by_end])), capacity)
        return TokenSeries(t, cumulative(self.input_tokens), cumulative(self.output_tokens),
                           cumulative(self.cost), model_calls=models, room=room)

    def token_series_after(self, old: TokenSeries, inserted: np.ndarray | None = None,
                           before: Before | None = None) -> TokenSeries:
        """`token_series()` derived from `old`, the series before the spans at `inserted` (positions
        in this layout) were added and `before.lanes` changed in place.

        A live span almost always ends after every other, so its sample goes at the end: written
        into the room after the arrays, microseconds where the whole series costs tens of
        milliseconds at a million spans. A sample anywhere else (or a tie in end time, a changed
        sample, a run whose first model call with usage now outranks every other span) rebuilds it.
        """
        inserted = np.zeros(0, dtype=np.int64) if inserted is None else np.asarray(inserted, dtype=np.int64)
        changed = np.zeros(0, dtype=np.int64) if before is None else before.lanes
        if old.model_calls < 0:
            return self.token_series()
        model = KIND_CODES["model"]

        def usage(kind: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            used = (values[0] > 0) | (values[1] > 0) | (values[2] > 0)
            return used, used & (kind == model)

        lanes = np.concatenate((inserted, changed))
        used, calls = usage(self.kind[lanes], self.input_tokens[lanes], self.output_tokens[lanes], self.cost[lanes])
        models = old.model_calls + int(calls.sum())
        was_counted = np.zeros(0, dtype=bool)
        if before is not None:
            was_used, was_call = usage(before.kind, before.input_tokens, before.output_tokens, before.cost)
            models -= int(was_call.sum())
            was_counted = ~np.isnan(before.end) & (was_call if old.model_calls else was_used)
        if (models > 0) != (old.model_calls > 0):
            return self.token_series()  # what counts changed for every span
        counts = ~np.isnan(self.end[lanes]) & (calls if models else used)
        if before is not None and was_counted.any():
            counted_now = counts[len(inserted):]
            same = counted_now & (before.end == self.end[changed])
            for name in ("input_tokens", "output_tokens", "cost"):
                same &= getattr(before, name) == getattr(self, name)[changed]
            if not same[was_counted].all():
                return self.token_series()  # a sample already in the series moved or changed
            counts[len(inserted):] = counted_now & ~was_counted  # unchanged samples stay where they are
        add = np.sort(lanes[counts])
        if not len(add):
            return old if models == old.model_calls else replace(old, model_calls=models)
        ends = self.end[add]
        order = np.argsort(ends, kind="stable")  # ties by lane, as the whole series has them
        add, ends = add[order], ends[order]
        n = len(old.t)
        if n > 1 and not ends[0] > old.t[-1]:
            return self.token_series()
        room = old.room if old.room is not None and old.room.claim(n, more=len(add)) else None
        if room is None:
            room = Room(n + len(add))
            arrays = [with_room(a, room.capacity[0]) for a in (old.t, old.input_tokens, old.output_tokens, old.cost)]
        else:
            arrays = [old.t, old.input_tokens, old.output_tokens, old.cost]
        out = []
        for i, values in enumerate((ends, self.input_tokens[add], self.output_tokens[add], self.cost[add])):
            array = arrays[i]
            if i:  # running sums, added one by one as the whole series adds them
                values = np.cumsum(np.concatenate((array[n - 1:n], values)))[1:]
            out.append(put(array, values))
        return TokenSeries(out[0], out[1], out[2], out[3], model_calls=models, room=room)

    def hit(self, x: float, y: float, tol_x: float, tol_y: float, now: float) -> int:
        """The lane under a point (data units, with tolerances), nearest first; -1 when none."""
        lo = max(0, math.floor(y - tol_y))
        hi = min(len(self), math.floor(y + tol_y) + 1)
        if hi <= lo:
            return -1
        start, end = self.start[lo:hi], self.ends(now)[lo:hi]
        dx = np.where(x < start, start - x, np.where(x > end, x - end, 0.0))
        dy = np.abs(np.arange(lo, hi) + 0.5 - y)
        near = (dx <= tol_x) & (dy <= tol_y + 0.5)
        if not near.any():
            return -1
        score = np.where(near, dx / max(tol_x, 1e-12) + dy / max(tol_y, 1e-12), np.inf)
        return lo + int(np.argmin(score))


SLICE = 65_536


def _slices(n: int) -> list[tuple[int, int]]:
    return [(a, min(a + SLICE, n)) for a in range(0, n, SLICE)]


def _numbers(cols: SpanColumns) -> tuple[np.ndarray, ...]:
    return cols.start, cols.end, cols.input_tokens, cols.output_tokens, cols.cost


def _take_columns(cols: SpanColumns, keep: list[int], t0: float) -> SpanColumns:
    """Some rows of columns relative to `t0`, made absolute again for `from_columns`."""
    rows = np.asarray(keep, dtype=np.int64)
    return SpanColumns(take(cols.ids, keep), take(cols.parent_ids, keep), cols.kinds.taken(rows),
                       cols.names.taken(rows), cols.statuses.taken(rows), cols.start[keep] + t0, cols.end[keep] + t0,
                       cols.input_tokens[keep], cols.output_tokens[keep], cols.cost[keep], total=0)
