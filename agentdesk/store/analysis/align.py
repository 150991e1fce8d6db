"""Aligning two runs' spans: which span of run A is which span of run B.

Pure (no database): it takes two `RunSpans` and returns an `Alignment`. Spans
are aligned top-down. Two roots, or two children of already aligned parents,
are the same span when their labels agree: kind and name, plus the arguments'
digest for a tool call (a `read_file` of another file is another call). The
k-th span with a label among A's children is paired with the k-th with that
label among B's (two runs with one root each pair their roots whatever
their names: the root is the run, often named after its agent): symmetric
by construction (A against B is B against A with added and removed swapped),
linear, and it keeps a loop's tenth model call paired with the other run's
tenth. An unpaired span is added or removed with everything under it. The
walk is an explicit stack, not recursion, so deep runs are fine.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class Change(StrEnum):
    SAME = "same"
    SLOWER = "slower"
    FASTER = "faster"
    ADDED = "added"
    REMOVED = "removed"

    @property
    def mirrored(self) -> Change:
        """The class seen from the other run (B against A)."""
        return MIRROR[self]


MIRROR = {Change.SAME: Change.SAME, Change.SLOWER: Change.FASTER, Change.FASTER: Change.SLOWER,
          Change.ADDED: Change.REMOVED, Change.REMOVED: Change.ADDED}


@dataclass(frozen=True)
class RunSpans:
    """One run's spans as columns, in start order; `parents[i]` is an index (-1 for a root)."""

    ids: Sequence[str]
    parents: Sequence[int]
    kinds: Sequence[str]
    names: Sequence[str]
    statuses: Sequence[str]
    starts: Sequence[float]
    ends: Sequence[float | None]
    arguments: Sequence[str | None] = field(default=())
    """A digest of each tool call's arguments (None for other spans); empty: no arguments known."""

    def __len__(self) -> int:
        return len(self.ids)

    def label(self, i: int) -> tuple[str, str, str | None]:
        digest = self.arguments[i] if self.arguments and self.kinds[i] == "tool" else None
        return self.kinds[i], self.names[i], digest

    def duration(self, i: int) -> float | None:
        end = self.ends[i]
        return None if end is None else end - self.starts[i]


@dataclass(frozen=True)
class Pair:
    """One row of the merged run: a span of A, of B, or of both, and how it changed."""

    change: Change
    a: int | None
    b: int | None
    depth: int
    parent: int | None
    """Index into `Alignment.pairs` of the row this one sits under (None at the top)."""


@dataclass(frozen=True)
class Alignment:
    pairs: tuple[Pair, ...]
    """Rows in merged pre-order: each row before its children, children in start order."""

    def count(self, change: Change) -> int:
        return sum(1 for p in self.pairs if p.change is change)

    def counts(self) -> dict[Change, int]:
        return {c: self.count(c) for c in Change}

    def matched(self) -> list[Pair]:
        return [p for p in self.pairs if p.a is not None and p.b is not None]


DEFAULT_TOLERANCE = 0.10
"""A paired span is slower or faster only when it differs by more than this share of A's duration ..."""
DEFAULT_MIN_DELTA_S = 0.05
"""... and by more than this many seconds: jitter on short spans is not a change."""


def classify(da: float | None, db: float | None, tolerance: float = DEFAULT_TOLERANCE,
             min_delta_s: float = DEFAULT_MIN_DELTA_S) -> Change:
    """Slower / faster / same for a paired span's two durations (a running span counts as same)."""
    if da is None or db is None:
        return Change.SAME
    delta = db - da
    base = max(abs(da), abs(db))
    if abs(delta) <= min_delta_s or abs(delta) <= tolerance * base:
        return Change.SAME
    return Change.SLOWER if delta > 0 else Change.FASTER


def children_of(spans: RunSpans) -> list[list[int]]:
    """Each span's children in start order; index len(spans) holds the roots."""
    n = len(spans)
    kids: list[list[int]] = [[] for _ in range(n + 1)]
    for i in range(n):  # spans come in start order, so each list is too
        p = spans.parents[i]
        kids[p if 0 <= p < n and p != i else n].append(i)
    return kids


def align(a: RunSpans, b: RunSpans, tolerance: float = DEFAULT_TOLERANCE,
          min_delta_s: float = DEFAULT_MIN_DELTA_S) -> Alignment:
    """The merged rows of A against B (see the module docstring for the rule)."""
    kids_a, kids_b = children_of(a), children_of(b)
    rows: list[Pair] = []
    # Work list of (index in A or None, index in B or None, parent row, depth); a stack visited
    # children-first-in-order gives pre-order without recursion.
    stack: list[tuple[int | None, int | None, int | None, int]] = []
    roots_a, roots_b = kids_a[len(a)], kids_b[len(b)]
    if len(roots_a) == 1 and len(roots_b) == 1:  # each run's one root is the run itself, whatever its name
        stack.append((roots_a[0], roots_b[0], None, 0))
    else:
        stack.extend(reversed(_pair_children(a, b, roots_a, roots_b, None, 0)))
    while stack:
        ia, ib, parent, depth = stack.pop()
        if ia is not None and ib is not None:
            change = classify(a.duration(ia), b.duration(ib), tolerance, min_delta_s)
        else:
            change = Change.REMOVED if ib is None else Change.ADDED
        rows.append(Pair(change, ia, ib, depth, parent))
        row = len(rows) - 1
        below_a = kids_a[ia] if ia is not None else []
        below_b = kids_b[ib] if ib is not None else []
        stack.extend(reversed(_pair_children(a, b, below_a, below_b, row, depth + 1)))
    return Alignment(tuple(rows))


def _pair_children(a: RunSpans, b: RunSpans, kids_a: list[int], kids_b: list[int], parent: int | None,
                   depth: int) -> list[tuple[int | None, int | None, int | None, int]]:
    """Pair two child lists by label occurrence; the result in start order (B's time, A's for removed)."""
    waiting: dict[tuple[str, str, str | None], deque[int]] = defaultdict(deque)
    for j in kids_b:
        waiting[b.label(j)].append(j)
    out: list[tuple[float, int, tuple[int | None, int | None, int | None, int]]] = []
    rank = 0
    for i in kids_a:
        queue = waiting.get(a.label(i))
        match = queue.popleft() if queue else None
        at = a.starts[i] - _origin(a) if match is None else b.starts[match] - _origin(b)
        out.append((at, rank, (i, match, parent, depth)))
        rank += 1
    for queue in waiting.values():
        for j in queue:
            out.append((b.starts[j] - _origin(b), rank, (None, j, parent, depth)))
            rank += 1
    out.sort(key=lambda item: (item[0], item[1]))
    return [item[2] for item in out]


def _origin(spans: RunSpans) -> float:
    return spans.starts[0] if len(spans) else 0.0
