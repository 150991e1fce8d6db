"""The critical path of a run: the chain of spans that determined when it ended.

Walked backwards from the end, the way Jaeger and Perfetto do it. Inside a span
the cursor starts at the span's end; the last-finishing child that started
before the cursor is on the path (clipped to the cursor, for a child that
outlived its parent), the cursor jumps to that child's start, and the walk goes
on with the children that had finished by then. Children that overlapped the
chosen one ran in parallel and finished earlier, so the parent was not waiting
on them: a span waiting on parallel tool calls or sub-agents is on the path
only through its last-finishing child. Whatever time inside a span no chosen
child covers is that span's self time.

A sequential agent run puts nearly every span on the path, so walking it
span by span in Python costs seconds at a million spans. Instead the walk is
two links per span computed for all spans at once, with one sort of exact
integer keys and a binary search: `last[p]`, the child p waited on last, and
`pred[c]`, the sibling that had finished when c started. The path is then the
closure of the virtual root under those links, found by pointer doubling (no
recursion, no Python loop per span: depth 10,000 and a million spans are a few
dozen numpy passes), and self time is a span's length minus its path
children's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CriticalPath:
    """The spans on the path, in chronological order, with the self time each contributed."""

    indices: np.ndarray
    """int64 span indices (into the arrays given to `critical_path`), ordered by start."""
    self_time: np.ndarray
    """float64 seconds each path element contributed (time on the path not covered by its path child)."""
    total: float
    """Seconds on the path: the sum of `self_time` (gaps between top-level spans count for no span)."""
    duration: float = 0.0
    """Seconds from the first span's start to the last span's end: the run's length, for "% of run"."""

    def __len__(self) -> int:
        return int(self.indices.size)

    def share(self) -> np.ndarray:
        """Each element's self time as a fraction of the run's duration (0 for an empty run)."""
        if self.duration <= 0:
            return np.zeros(self.indices.size)
        return self.self_time / self.duration


EMPTY = CriticalPath(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64), 0.0, 0.0)


TICKS_PER_S = 1_000_000
"""Times are compared in whole microseconds (coarser only for a run too long to pack, see `_resolution`),
so (parent, time) pairs pack into one exact int64 sort key: parent << shift | ticks << 1 | zero-length flag."""


def _resolution(n: int, duration_s: float) -> tuple[float, int]:
    """Ticks per second and the parent shift: the parent takes the bits `n` needs, time the rest."""
    shift = 62 - max(1, (n + 1).bit_length())
    room = (1 << (shift - 1)) - 1
    return min(float(TICKS_PER_S), room / max(duration_s, 1e-9)), shift


def critical_path(start: np.ndarray, end: np.ndarray, parent: np.ndarray) -> CriticalPath:
    """The critical path of spans given as columns: float64 seconds since run start, int64 parent (-1 root).

    A NaN end (a span still running) counts as ending at the latest instant the run
    has seen. A parent index out of range or equal to the span itself counts as a
    root; spans caught in a parent cycle are unreachable from any root and never on
    the path. A child is clipped to its parent's interval (a child that outlived its
    parent counts up to the parent's end). Ties between equal ends go to the span
    with the lower index (the earlier one in the table).
    """
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    parent = np.asarray(parent, dtype=np.int64)
    n = start.size
    if n == 0:
        return EMPTY
    if end.size != n or parent.size != n:
        raise ValueError("start, end and parent must have the same length")
    origin = float(start.min())
    latest = float(np.nanmax(end)) if not np.isnan(end).all() else origin
    latest = max(latest, float(start.max()))
    ticks, shift = _resolution(n, latest - origin)
    s = np.rint((start - origin) * ticks).astype(np.int64)
    e = np.rint((np.where(np.isnan(end), latest, end) - origin) * ticks).astype(np.int64)
    e = np.maximum(e, s)
    own = np.arange(n, dtype=np.int64)
    up = np.where((parent < 0) | (parent >= n) | (parent == own), n, parent)  # n: the virtual root
    s, e, alive = _clip(s, e, up, n)
    last, pred = _links(s, e, up, alive, n, shift)
    on = _on_path(last, pred, up, n)
    indices = np.flatnonzero(on[:n])
    if indices.size == 0:
        return CriticalPath(indices.astype(np.int64), np.zeros(0), 0.0, (latest - origin))
    length = (e - s).astype(np.float64)
    covered = np.bincount(up[indices], weights=length[indices], minlength=n + 1)
    indices = indices[_chronological(s[indices], e[indices])]
    self_ticks = np.maximum(0.0, length[indices] - covered[indices])
    times = self_ticks / ticks
    return CriticalPath(indices.astype(np.int64), times, float(times.sum()), latest - origin)


def _clip(s: np.ndarray, e: np.ndarray, up: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each span's interval within its ancestors' (pointer doubling, only when some child sticks out);
    `alive` is False for spans that start at or after their parent's (clipped) end."""
    s_ext = np.append(s, np.iinfo(np.int64).min)
    e_ext = np.append(e, np.iinfo(np.int64).max)
    sticks_out = (s_ext[up] > s) | (e_ext[up] < e)
    if sticks_out.any():
        jump = np.append(up, n)
        lo, hi = s_ext.copy(), e_ext.copy()
        for _ in range(max(1, int(n).bit_length() + 1)):  # a cycle never reaches the root: bounded
            if (jump == n).all():
                break
            lo = np.maximum(lo, lo[jump])
            hi = np.minimum(hi, hi[jump])
            jump = jump[jump]
        s_ext, e_ext = lo, hi
        s, e = lo[:n], np.maximum(hi[:n], lo[:n])
    parent_end = e_ext[up]
    alive = s < parent_end
    return s, e, alive


def _links(s: np.ndarray, e: np.ndarray, up: np.ndarray, alive: np.ndarray, n: int,
           shift: int) -> tuple[np.ndarray, np.ndarray]:
    """`last[p]`: p's last-finishing child; `pred[c]`: the sibling that finished last before c started.

    Both are one sort of (parent, end) keys and a binary search; -1 where there is none. A
    zero-length sibling exactly at c's start is not before c (its key's low bit is set).
    """
    items = np.flatnonzero(alive)[::-1]  # with a stable sort, the lowest index ends each run of equal keys
    zero = (e[items] == s[items]).astype(np.int64)
    keys = (up[items] << shift) | (e[items] << 1) | zero
    order = np.argsort(keys, kind="stable")
    keys, items = keys[order], items[order]
    last = np.full(n + 1, -1, dtype=np.int64)
    if keys.size:  # each parent's run of keys ends with its last-finishing child
        group = keys >> shift
        ends = np.flatnonzero(np.append(group[1:] != group[:-1], True))
        last[group[ends]] = _lowest_of_tie(keys, items, ends)
    query = (up << shift) | (s << 1)
    found = np.searchsorted(keys, query, side="right") - 1
    ok = (found >= 0) & ((keys[np.maximum(found, 0)] >> shift) == up) & alive
    pred = np.full(n, -1, dtype=np.int64)
    pred[ok] = _lowest_of_tie(keys, items, found[ok])
    return last, pred


def _lowest_of_tie(keys: np.ndarray, items: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The span at each position, or the lower-indexed one just before it when both end at the same
    time and only the zero-length flag (the low bit) orders them: equal ends go to the lower index."""
    chosen = items[at]
    before = at - 1
    tie = (before >= 0) & ((keys[at] & 1) == 1)
    tie[tie] &= ((keys[before[tie]] >> 1) == (keys[at[tie]] >> 1)) & ((keys[before[tie]] & 1) == 0)
    chosen[tie] = np.minimum(chosen[tie], items[before[tie]])
    return chosen


def _on_path(last: np.ndarray, pred: np.ndarray, up: np.ndarray, n: int) -> np.ndarray:
    """Spans on the path: on the backward chain (last child, its predecessor, ...) of their parent, and
    so for every ancestor. Both closures by pointer doubling: O(n log n) numpy work, no Python loop per span."""
    rounds = max(1, int(n).bit_length() + 1)
    chain = np.zeros(n + 1, dtype=bool)
    chain[last[last >= 0]] = True
    jump = np.append(np.where(pred < 0, n, pred), n)
    for _ in range(rounds):  # after round k every span within 2**(k+1) - 1 steps of a chain start is marked
        chain[jump[np.flatnonzero(chain)]] = True
        if (jump == n).all():
            break
        jump = jump[jump]
    bad = np.append(~chain[:n], False)
    hop = np.append(up, n)
    for _ in range(rounds):  # a span is on the path if no ancestor (nor itself) is off its parent's chain
        if (hop == n).all():
            break
        bad = bad | bad[hop]
        hop = hop[hop]
    bad[:n] |= hop[:n] != n  # still not at the root: caught in a parent cycle
    return ~bad


def _chronological(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Order by start; an ancestor (longer, same start) before its descendant."""
    order = np.argsort(s, kind="stable")
    sorted_s = s[order]
    if sorted_s.size > 1 and (sorted_s[1:] == sorted_s[:-1]).any():
        return np.lexsort((-e, s))
    return order


@dataclass(frozen=True)
class PathSummary:
    """The path by span kind, for the run header."""

    spans: int
    total: float
    seconds_by_kind: dict[str, float]

    @property
    def dominant(self) -> tuple[str, float] | None:
        """The kind with the most path time and its share of the path (None for an empty path)."""
        if not self.seconds_by_kind or self.total <= 0:
            return None
        kind = max(self.seconds_by_kind, key=lambda k: self.seconds_by_kind[k])
        return kind, self.seconds_by_kind[kind] / self.total

    def describe(self) -> str:
        """ "critical path: 41 spans, 78 % in model calls" (plain text, no agent text in it)."""
        noun = "span" if self.spans == 1 else "spans"
        head = f"critical path: {self.spans} {noun}"
        top = self.dominant
        if top is None:
            return head
        kind, share = top
        return f"{head}, {round(share * 100)} % in {KIND_PHRASES.get(kind, kind + ' spans')}"


KIND_PHRASES = {"model": "model calls", "tool": "tool calls", "agent": "agent steps",
                "sub_agent": "sub-agents", "guardrail": "guardrails", "gate": "approval gates",
                "internal": "internal spans"}


def summarise(path: CriticalPath, kinds: Sequence[str] | np.ndarray) -> PathSummary:
    """Self time on the path per span kind; `kinds[i]` is span i's kind."""
    by_kind: dict[str, float] = {}
    for index, seconds in zip(path.indices.tolist(), path.self_time.tolist(), strict=True):
        kind = str(kinds[index])
        by_kind[kind] = by_kind.get(kind, 0.0) + seconds
    return PathSummary(len(path), path.total, by_kind)
