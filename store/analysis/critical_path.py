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

The walk is iterative (an explicit stack): a run of a million spans nested ten
thousand deep must not hit Python's recursion limit. Children are grouped with
one numpy sort, so the cost is O(n log n) for the sort plus O(children of the
spans on the path) for the walk.
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


def critical_path(start: np.ndarray, end: np.ndarray, parent: np.ndarray) -> CriticalPath:
    """The critical path of spans given as columns: float64 seconds since run start, int64 parent (-1 root).

    A NaN end (a span still running) counts as ending at the latest instant the run
    has seen. A parent index out of range or equal to the span itself counts as a
    root; spans caught in a parent cycle are unreachable from any root and never on
    the path.
    """
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    parent = np.asarray(parent, dtype=np.int64)
    n = start.size
    if n == 0:
        return EMPTY
    if end.size != n or parent.size != n:
        raise ValueError("start, end and parent must have the same length")
    latest = float(np.nanmax(np.concatenate([start, end]))) if not np.all(np.isnan(end)) else float(start.max())
    end = np.where(np.isnan(end), latest, end)
    end = np.maximum(end, start)
    own = np.arange(n, dtype=np.int64)
    parent = np.where((parent < 0) | (parent >= n) | (parent == own), n, parent)  # n: the virtual root

    # Children grouped by parent (n = the virtual root over all roots): one unstable sort, since each
    # path span's own children are put in end order when the walk reaches it.
    key = parent.astype(np.int32) if n < 2**31 - 1 else parent
    order = np.argsort(key, kind="quicksort")
    first = np.zeros(n + 2, dtype=np.int64)
    np.cumsum(np.bincount(parent, minlength=n + 1), out=first[1:])
    return _walk(start, end, order, first, n, float(start.min()), float(end.max()))


def _children(node: int, order: np.ndarray, first: np.ndarray, start: np.ndarray,
              end: np.ndarray) -> tuple[list[int], list[float], list[float]]:
    """A node's children, latest end first (ties: lower index first), with their starts and ends."""
    kids = order[first[node]:first[node + 1]]
    if kids.size > 1:
        kids = kids[np.lexsort((kids, -end[kids]))]
    return kids.tolist(), start[kids].tolist(), end[kids].tolist()


def _walk(start: np.ndarray, end: np.ndarray, order: np.ndarray, first: np.ndarray, n: int,
          run_start: float, run_end: float) -> CriticalPath:
    """The backward walk, one stack frame per span on the current chain of the path."""
    self_time: dict[int, float] = {}
    # Frame: node, cursor, node start, whether a child was chosen yet, next child position, children.
    stack: list[_Frame] = [_Frame(n, run_end, run_start, *_children(n, order, first, start, end))]
    while stack:
        frame = stack[-1]
        picked = -1
        kids, kid_starts, kid_ends = frame.kids, frame.kid_starts, frame.kid_ends
        pos, cursor = frame.pos, frame.cursor
        while pos < len(kids):
            child_start, child_end = kid_starts[pos], kid_ends[pos]
            pos += 1
            # Before the first pick a child running past the cursor is clipped to it; after it only
            # children that had finished by the cursor count (the others overlapped the pick).
            if child_start < cursor and (child_end <= cursor or not frame.chosen):
                picked = pos - 1
                break
        frame.pos = pos
        node = frame.node
        if picked < 0:
            if node != n:
                self_time[node] = self_time.get(node, 0.0) + max(0.0, cursor - frame.start)
            stack.pop()
            continue
        child = kids[picked]
        child_end = min(kid_ends[picked], cursor)
        if node != n:
            self_time[node] = self_time.get(node, 0.0) + max(0.0, cursor - child_end)
        frame.cursor = max(kid_starts[picked], frame.start)
        frame.chosen = True
        self_time.setdefault(child, 0.0)
        stack.append(_Frame(child, child_end, kid_starts[picked], *_children(child, order, first, start, end)))
    if not self_time:
        return CriticalPath(np.zeros(0, dtype=np.int64), np.zeros(0), 0.0, run_end - run_start)
    indices = np.fromiter(self_time.keys(), dtype=np.int64, count=len(self_time))
    times = np.fromiter(self_time.values(), dtype=np.float64, count=len(self_time))
    discovered = np.arange(indices.size)
    chrono = np.lexsort((discovered, -end[indices], start[indices]))
    indices, times = indices[chrono], times[chrono]
    return CriticalPath(indices, times, float(times.sum()), run_end - run_start)


@dataclass(slots=True)
class _Frame:
    node: int
    cursor: float
    start: float
    kids: list[int]
    kid_starts: list[float]
    kid_ends: list[float]
    pos: int = 0
    chosen: bool = False


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
