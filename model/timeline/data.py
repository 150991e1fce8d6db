"""A run's spans laid out for the waterfall, as numpy arrays (no Qt, so tests need no display).

One lane per span, in depth-first order: children sit under their parent and
siblings follow their start times. Because of that order the spans in a
vertical window are one contiguous slice, so culling is slicing. The drawing
item reads these arrays directly; nothing here touches a widget.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np

from agentdesk.store import readmodel as rm
from agentdesk.store.source import SpanTable

KINDS: tuple[str, ...] = (rm.SpanKind.AGENT, rm.SpanKind.SUB_AGENT, rm.SpanKind.MODEL, rm.SpanKind.TOOL,
                          rm.SpanKind.GUARDRAIL, rm.SpanKind.GATE, rm.SpanKind.INTERNAL)
"""Lane kinds by code; a kind no view knows draws as `INTERNAL` (and keeps its name)."""
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
OTHER_KIND = KIND_CODES[rm.SpanKind.INTERNAL]
STATUSES: tuple[str, ...] = (rm.SpanStatus.OK, rm.SpanStatus.ERROR, rm.SpanStatus.CANCELLED, rm.SpanStatus.RUNNING)
OK, ERROR, CANCELLED, RUNNING = range(len(STATUSES))
STATUS_CODES = {status: code for code, status in enumerate(STATUSES)}
_KIND_LOOKUP: defaultdict[str, int] = defaultdict(lambda: OTHER_KIND, KIND_CODES)
_STATUS_LOOKUP: defaultdict[str, int] = defaultdict(lambda: OK, STATUS_CODES)
T = TypeVar("T")


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


class TimelineData:
    """The laid-out spans of one run; arrays are indexed by lane."""

    def __init__(self, t0: float, ids: list[str], parent_ids: list[str | None], names: list[str],
                 kinds: list[str], statuses: list[str], start: np.ndarray, end: np.ndarray,
                 input_tokens: np.ndarray, output_tokens: np.ndarray, cost: np.ndarray) -> None:
        """Lay out columns given in any order; `start`/`end` relative to `t0`, end NaN while open."""
        self.t0 = t0
        self.lane_of = {span_id: i for i, span_id in enumerate(ids)}
        lookup: dict[str | None, int] = self.lane_of  # type: ignore[assignment]
        parent = np.array([lookup.get(p, -1) for p in parent_ids], dtype=np.int64)
        order, parent = dfs_order(parent, start)
        lanes = order.tolist()
        self.ids, self.parent_ids = _take(ids, lanes), _take(parent_ids, lanes)
        self.names, self.kind_names, self.status_names = (_take(names, lanes), _take(kinds, lanes),
                                                          _take(statuses, lanes))
        self.lane_of = {span_id: i for i, span_id in enumerate(self.ids)}
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        up = parent[order]
        self.parent = np.where(up >= 0, inverse[np.maximum(up, 0)], -1)
        self.depth = depths(self.parent)
        self.kind = np.fromiter(map(_KIND_LOOKUP.__getitem__, self.kind_names), np.int8, len(order))
        self.status = np.fromiter(map(_STATUS_LOOKUP.__getitem__, self.status_names), np.int8, len(order))
        self.start, self.end = start[order], end[order]
        self.input_tokens, self.output_tokens = input_tokens[order], output_tokens[order]
        self.cost = cost[order]
        self.version = 0

    @classmethod
    def from_table(cls, table: SpanTable, t0: float | None = None) -> TimelineData:
        """Lay out a run's span table; `t0` is the run's start (default: its first span's)."""
        if t0 is None:
            t0 = float(min(table.starts)) if len(table) else 0.0
        return cls(t0, *_columns(table, t0))

    def __len__(self) -> int:
        return len(self.ids)

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
        if not len(self):
            return 0.0, 0.0
        return min(0.0, float(self.start.min())), float(self.ends(now).max())

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
            if lane is None or self.parent_ids[lane] != rows.parent_ids[i]:
                return True
            if self.start[lane] != rows.starts[i] - self.t0:
                return True
        return False

    def relaid_out(self, rows: SpanTable) -> TimelineData:
        """A new layout with these rows added or replaced; this one is left untouched (thread-safe)."""
        replaced = set(rows.ids)
        keep = [lane for lane, span_id in enumerate(self.ids) if span_id not in replaced]
        old = (_take(self.ids, keep), _take(self.parent_ids, keep), _take(self.names, keep),
               _take(self.kind_names, keep), _take(self.status_names, keep), self.start[keep], self.end[keep],
               self.input_tokens[keep], self.output_tokens[keep], self.cost[keep])
        new = _columns(rows, self.t0)
        merged: list[Any] = [a + b if isinstance(a, list) else np.concatenate((a, b))  # type: ignore[operator]
                  for a, b in zip(old, new, strict=True)]
        data = TimelineData(self.t0, *merged)
        data.version = self.version + 1
        return data

    def token_series(self) -> TokenSeries:
        """Usage of model calls when they carry any (some runtimes repeat it on the agent span
        around them, which would count it twice); otherwise of every span."""
        used = (self.input_tokens > 0) | (self.output_tokens > 0) | (self.cost > 0)
        model_calls = used & (self.kind == KIND_CODES["model"])
        done = ~np.isnan(self.end) & (model_calls if model_calls.any() else used)
        by_end = np.argsort(self.end[done], kind="stable")

        def cumulative(values: np.ndarray) -> np.ndarray:
            return np.concatenate(([0], np.cumsum(values[done][by_end])))

        t = np.concatenate(([0.0], self.end[done][by_end]))
        return TokenSeries(t, cumulative(self.input_tokens), cumulative(self.output_tokens),
                           cumulative(self.cost))

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


def _take(seq: list[T], indices: list[int]) -> list[T]:
    if not indices:
        return []
    if len(indices) == 1:
        return [seq[indices[0]]]
    return list(itemgetter(*indices)(seq))


def _columns(t: SpanTable, t0: float) -> tuple[Any, ...]:
    """A span table as the constructor's columns, times relative to `t0` (open ends NaN)."""
    ends = np.array(t.ends, dtype=np.float64).reshape(-1)  # None becomes NaN
    return (list(t.ids), list(t.parent_ids), list(t.names), list(t.kinds), list(t.statuses),
            np.asarray(t.starts, dtype=np.float64).reshape(-1) - t0, ends - t0,
            np.asarray(t.input_tokens, dtype=np.int64).reshape(-1),
            np.asarray(t.output_tokens, dtype=np.int64).reshape(-1),
            np.asarray(t.costs, dtype=np.float64).reshape(-1))
