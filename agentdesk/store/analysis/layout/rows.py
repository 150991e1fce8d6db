"""Which lanes of a layout are rows on screen: sub-trees folded into their top span, on demand.

A million spans cannot each be a row an operator scrolls through. In the
pre-order layout a span's sub-tree is the contiguous lane range
`[lane, lane + size)`, so hiding the sub-trees of collapsed spans is one
difference array (+1 after each collapsed span, -1 at its sub-tree's end), a
cumulative sum over it gives the hidden mask, and a second cumulative sum over
the visible mask gives every lane's row. No Python loop per span, so a
million-span run folds or unfolds in tens of milliseconds.

By default a run with more than `ROW_BUDGET` spans shows its roots, their
children, and further levels while the rows stay within the budget; deeper
sub-trees are collapsed. The operator's own expand/collapse choices are kept by
span id, so they survive the re-layouts of a live run.

`RowView` is the layout as rows: the same arrays (gathered per row) and
methods the drawing reads, so the waterfall and the lane labels draw rows as
they drew lanes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.timeline.room import Room, insert_at, put, with_room
from agentdesk.store.timeline.strings import Gathered

ROW_BUDGET = 2000
"""A run with more spans than this opens with deep sub-trees collapsed (levels shown while within it)."""
MAX_WALK = 256
"""New spans deeper than this are folded in by a pass over every lane, not by a walk up their ancestors."""
T = TypeVar("T")


def subtree_sizes(data: TimelineData) -> np.ndarray:
    """Lanes in each lane's sub-tree, itself included (pre-order: the sub-tree is `[lane, lane + size)`).

    Summed bottom-up one depth level at a time (each level one `np.add.at`), kept per tree (its
    parent array: a span finishing in place changes the layout's version, not its tree): a deep
    chain costs a loop per level, never per span.
    """
    cached = getattr(data, "_sizes", None)
    if cached is not None and cached[0] is data.parent and len(cached[1]) == len(data):
        return cached[1]  # type: ignore[no-any-return]
    n = len(data)
    size = np.ones(n, dtype=np.int32)  # int32 throughout: a million-span run's rows cost megabytes, not tens
    if n:
        by_depth = np.argsort(data.depth, kind="stable")
        levels = np.searchsorted(data.depth[by_depth], np.arange(int(data.depth.max()) + 2))
        for d in range(len(levels) - 2, 0, -1):
            nodes = by_depth[levels[d]:levels[d + 1]]
            up = data.parent[nodes]
            nodes = nodes[up >= 0]
            np.add.at(size, data.parent[nodes], size[nodes])
    data._sizes = (data.parent, size)  # type: ignore[attr-defined]  # a cache beside the layout, like its extent
    return size


def fold_depth(data: TimelineData, budget: int = ROW_BUDGET) -> int | None:
    """The depth from which spans with children are collapsed when a run opens: None for a run within
    `budget`; else the deepest level that keeps the rows within it (a lone root is always expanded),
    so expanding a span shows its children, themselves still collapsed."""
    n = len(data)
    if n <= budget:
        return None
    rows_to = np.cumsum(np.bincount(data.depth))  # rows when levels 0..d are shown
    levels = max(1, int(np.searchsorted(rows_to, budget, side="right")))  # levels shown in full
    if levels == 1 and rows_to[0] == 1:
        levels = 2  # one root alone says nothing: show its children
    return None if levels >= len(rows_to) else levels - 1


def default_collapsed(data: TimelineData, budget: int = ROW_BUDGET) -> np.ndarray:
    """The lanes collapsed when a run opens: every span with children from `fold_depth` down."""
    depth = fold_depth(data, budget)
    if depth is None:
        return np.zeros(len(data), dtype=bool)
    return (data.depth >= depth) & (subtree_sizes(data) > 1)  # deeper too: one level opens per click


@dataclass(frozen=True, slots=True)
class Rows:
    """The rows of one layout: `shown[row]` is a lane; `row_at[lane]` its row, or for a hidden lane the
    row of the collapsed span it is folded into; `folded[row]` how many spans that row hides."""

    data: TimelineData
    collapsed: np.ndarray
    shown: np.ndarray
    row_at: np.ndarray
    folded: np.ndarray
    has_children: np.ndarray
    """Per row: the span has children (it gets a disclosure mark)."""
    fold: int | None = None
    """Spans from this depth down that get their first child while the run is live are collapsed
    (the opening rows' rule, `fold_depth`); None: they open (nothing was folded by default)."""
    _view: list[TimelineData] = field(default_factory=list, compare=False, repr=False)
    """The rows as a layout (`view`), made once per layout version."""

    @classmethod
    def build(cls, data: TimelineData, collapsed: np.ndarray, fold: int | None = None) -> Rows:
        n = len(data)
        size = subtree_sizes(data)
        collapsed = collapsed & (size > 1)
        lanes = np.flatnonzero(collapsed)
        mark = np.zeros(n + 1, dtype=np.int32)
        np.add.at(mark, lanes + 1, 1)
        np.add.at(mark, lanes + size[lanes], -1)
        visible = np.cumsum(mark[:n]) == 0
        shown = np.flatnonzero(visible).astype(np.int32)
        row_at = np.cumsum(visible, dtype=np.int32)
        row_at -= 1
        folded = np.where(collapsed[shown], size[shown] - 1, 0).astype(np.int32)
        return cls(data, collapsed, shown, row_at, folded, size[shown] > 1, fold)

    @classmethod
    def default(cls, data: TimelineData, overrides: Mapping[str, bool] | None = None,
                budget: int = ROW_BUDGET) -> Rows:
        """The opening rows of a layout, with the operator's choices (span id → collapsed) applied."""
        fold = fold_depth(data, budget)
        collapsed = default_collapsed(data, budget)
        for span_id, state in (overrides or {}).items():
            lane = data.lane_of.get(span_id)
            if lane >= 0:
                collapsed[lane] = state
        return cls.build(data, collapsed, fold)

    def inserted(self, data: TimelineData, lanes: np.ndarray, overrides: Mapping[str, bool] | None = None) -> Rows:
        """These rows for `data`, this layout with spans inserted at `lanes` (sorted positions in
        `data`, as `TimelineData.appended` puts them): the folding kept, a new span shown when none of
        its ancestors is collapsed. A span that gets its first child is folded by the opening rule
        (`fold`) unless the operator chose otherwise (`overrides`).

        Equal to `Rows.build(data, <that folding>)`, but it costs a few array copies and a walk up
        each new span's ancestors instead of three passes over every lane: ~2 ms at a million.
        """
        lanes = np.asarray(lanes, dtype=np.int64)
        k, depth, parent = len(lanes), data.depth, data.parent
        if not k or len(data) != len(self.data) + k or int(depth[lanes].max()) > MAX_WALK:
            return Rows.build(data, self._folding(data, lanes, overrides), self.fold)
        at = lanes - np.arange(k)  # where they go in the old arrays (`np.insert` positions)
        old_size = subtree_sizes(self.data)
        size = _insert(old_size, at, 1)
        ancestors: list[list[int]] = []
        for lane in lanes.tolist():
            up, chain = int(parent[lane]), []
            while up >= 0:
                chain.append(up)
                size[up] += 1
                up = int(parent[up])
            ancestors.append(chain)
        data._sizes = (data.parent, size)  # type: ignore[attr-defined]  # as subtree_sizes keeps it
        collapsed = _insert(self.collapsed, at, False)
        new = set(lanes.tolist())
        touched = sorted({up for chain in ancestors for up in chain} | new)
        for lane in lanes.tolist():
            up = int(parent[lane])
            first_child = up >= 0 and up not in new and old_size[up - int(np.searchsorted(lanes, up))] == 1
            for one in ((lane, up) if first_child else (lane,)):
                state = overrides.get(data.ids[one]) if overrides else None
                collapsed[one] = bool(self.fold is not None and depth[one] >= self.fold) if state is None else state
        picked = np.asarray(touched, dtype=np.int64)
        collapsed[picked] &= size[picked] > 1
        row_at = _insert(self.row_at, at, 0)
        visible = []
        for lane, chain in zip(lanes.tolist(), ancestors, strict=True):
            shows = not any(collapsed[up] for up in chain)
            row_at[lane] = (row_at[lane - 1] if lane else -1) + shows
            if shows:
                row_at[lane + 1:] += 1
                visible.append(lane)
        shown_lanes = np.asarray(visible, dtype=np.int64)
        rows = row_at[shown_lanes].astype(np.int64) - np.arange(len(visible))  # places in the old rows
        moved = self.shown + np.searchsorted(at, self.shown, side="right")
        shown = _insert(moved, rows, shown_lanes).astype(np.int32)
        folded = _insert(self.folded, rows, 0)
        has_children = _insert(self.has_children, rows, False)
        for lane in touched:  # the rows whose sub-tree grew (or that are new)
            row = int(row_at[lane])
            if int(shown[row]) == lane:
                folded[row] = size[lane] - 1 if collapsed[lane] else 0
                has_children[row] = size[lane] > 1
        made = Rows(data, collapsed, shown, row_at, folded, has_children, self.fold)
        kept = list(self._view)  # a copy: the GUI thread may forget the view meanwhile
        view = kept[0] if kept and kept[0].version == self.data.version else None
        if isinstance(view, RowView) and not made.all_shown:
            made._view.append(RowView.grown(view, made, row_at[shown_lanes].astype(np.int64), shown_lanes))
        return made

    def _folding(self, data: TimelineData, lanes: np.ndarray, overrides: Mapping[str, bool] | None) -> np.ndarray:
        """What `inserted` folds, the slow way: the old folding moved, the rule for new spans and for
        spans that got their first child (for chains deeper than a walk is worth)."""
        k = len(lanes)
        old_size = subtree_sizes(self.data)
        collapsed = _insert(self.collapsed, lanes - np.arange(k), False)
        was_leaf = _insert(old_size == 1, lanes - np.arange(k), True)
        rule = np.flatnonzero(was_leaf & (subtree_sizes(data) > 1))
        for one in rule.tolist():
            state = overrides.get(data.ids[one]) if overrides else None
            collapsed[one] = bool(self.fold is not None and data.depth[one] >= self.fold) if state is None else state
        return collapsed

    def __len__(self) -> int:
        return len(self.shown)

    @property
    def all_shown(self) -> bool:
        return len(self.shown) == len(self.data)

    def visible(self, lane: int) -> bool:
        return 0 <= lane < len(self.row_at) and int(self.shown[self.row_at[lane]]) == lane

    def row(self, lane: int) -> int:
        """The lane's row, or -1 when it is hidden inside a collapsed sub-tree."""
        return int(self.row_at[lane]) if self.visible(lane) else -1

    def rows_of(self, lanes: np.ndarray) -> np.ndarray:
        """Rows for lanes; a hidden lane gives the row of the collapsed span it is folded into."""
        return self.row_at[lanes].astype(np.int64) if len(lanes) else np.zeros(0, dtype=np.int64)

    def ancestors(self, lane: int) -> list[int]:
        """The lane's ancestors, nearest first (a walk up the parent array: one step per level)."""
        out, up = [], int(self.data.parent[lane])
        while up >= 0:
            out.append(up)
            up = int(self.data.parent[up])
        return out

    def with_state(self, lanes: Iterable[int], collapsed: bool) -> Rows:
        mask = self.collapsed.copy()
        mask[list(lanes)] = collapsed
        return Rows.build(self.data, mask, self.fold)

    def revealing(self, lane: int) -> Rows:
        """These rows with every collapsed ancestor of `lane` expanded, so it gets a row."""
        folded = [up for up in self.ancestors(lane) if self.collapsed[up]]
        return self.with_state(folded, False) if folded else self

    def view(self) -> TimelineData:
        """The layout as rows for drawing: the layout itself when nothing is hidden. Made once per
        layout version (the feed makes it on the runner: gathering 300,000 rows costs ~8 ms)."""
        if self.all_shown:
            return self.data
        kept = list(self._view)
        if kept and kept[0].version == self.data.version:
            return kept[0]
        view = RowView(self)
        self._view[:] = [view]
        return view

    def refreshed(self, lanes: np.ndarray | None = None) -> Rows:
        """The same rows after `lanes` of their layout changed in place (`TimelineData.update`): a
        view already made has those rows rewritten in place too (as the layout was), else it is
        made again. Without `lanes`, always made again."""
        cached = list(self._view)  # a copy: the GUI thread may forget the view meanwhile
        if lanes is not None and cached and isinstance(cached[0], RowView) and cached[0].rows is self:
            view = cached[0]
            view.rewrite(np.asarray(lanes, dtype=np.int64))
            made = replace(self, _view=[view])
            view.rows = made
            return made
        return replace(self, _view=[])

    def forget_view(self) -> None:
        """Drop the view made (when these rows are replaced): a view points back at its rows, and
        the pair would otherwise wait for the cyclic collector, tens of megabytes at a time."""
        self._view.clear()


def _insert(array: np.ndarray, at: np.ndarray, values: Any) -> np.ndarray:
    """`np.insert`, in two memory copies for the one span a live refresh almost always brings
    (`insert_at`; `np.insert`'s general machinery costs ~3x as much at a million lanes)."""
    if len(at) == 1:
        value = values[0] if isinstance(values, np.ndarray) else values
        return insert_at(array, int(at[0]), value)
    return np.insert(array, at, values)


class Picked(Gathered[T]):
    """`seq[shown[i]]` without copying a million strings: what the drawing asks of names per row.
    Compared by identity, as before: a million-row view is never compared by content."""

    __slots__ = ()
    __eq__ = object.__eq__
    __hash__ = object.__hash__  # type: ignore[assignment]


class RowView(TimelineData):
    """A layout's visible rows as a layout of their own (per-row arrays, strings picked lazily): the
    drawing reads lanes, and here a lane is a row. Not for editing: the feed keeps it up (`grown`,
    `rewrite`) as its layout changes."""

    _rows_room: Room | None = None
    """Room after the arrays, for rows added at the end (`grown`); None: adding copies."""

    def __init__(self, rows: Rows) -> None:
        data, shown = rows.data, rows.shown
        self.rows = rows
        self.t0, self.version = data.t0, data.version
        self.start, self.end = data.start[shown], data.end[shown]
        self.kind, self.status = data.kind[shown], data.status[shown]
        self.depth = data.depth[shown]
        self.input_tokens, self.output_tokens = data.input_tokens[shown], data.output_tokens[shown]
        self.cost = data.cost[shown]
        self.ids = Picked(data.ids, shown)  # type: ignore[assignment]
        self.names = Picked(data.names, shown)  # type: ignore[assignment]
        self.kind_names = Picked(data.kind_names, shown)  # type: ignore[assignment]
        self.status_names = Picked(data.status_names, shown)  # type: ignore[assignment]
        self.parent = np.where(data.parent[shown] >= 0, rows.row_at[np.maximum(data.parent[shown], 0)], -1)
        self.unknown_parent = {}
        self.total = len(shown) + max(0, data.total - len(data))
        self.lane_of = data.lane_of  # lanes, not rows: convert with `rows`

    @classmethod
    def grown(cls, old: RowView, rows: Rows, new_rows: np.ndarray, lanes: np.ndarray) -> RowView:
        """The view of `rows`, the rows of `old` with the spans at `lanes` given rows `new_rows` (sorted):
        each array copied once with the new rows in it, not gathered again row by row (~3x faster)."""
        data = rows.data
        view = object.__new__(cls)
        view.rows, view.t0, view.version = rows, data.t0, data.version
        at = new_rows - np.arange(len(new_rows))  # `np.insert` positions in the old rows
        n, k = len(old.start), len(lanes)
        up = data.parent[lanes]
        parents = np.where(up >= 0, rows.row_at[np.maximum(up, 0)], -1)
        names = ("start", "end", "kind", "status", "depth", "input_tokens", "output_tokens", "cost", "parent")
        values = [getattr(data, name)[lanes] for name in names[:-1]] + [parents]
        room: Room | None = getattr(old, "_rows_room", None)
        if k and bool((at == n).all()) and room is not None and room.claim(n, more=k):
            # new rows after the last (a live span at the end of the run): written into the room
            for name, value in zip(names, values, strict=True):
                setattr(view, name, put(getattr(old, name), value))
            view._rows_room = room
        elif not k:
            for name in names:
                setattr(view, name, getattr(old, name))
            view._rows_room = None
        else:  # copied once into buffers with room after them, for the next ones at the end
            room = Room(n + k)
            moved = old.parent + np.searchsorted(at, old.parent, side="right")
            moved[old.parent < 0] = -1
            for name, value in zip(names, values, strict=True):
                column = moved if name == "parent" else getattr(old, name)
                setattr(view, name, with_room(_insert(column, at, value), room.capacity[0]))
            view._rows_room = room
        view.ids = Picked(data.ids, rows.shown)  # type: ignore[assignment]
        view.names = Picked(data.names, rows.shown)  # type: ignore[assignment]
        view.kind_names = Picked(data.kind_names, rows.shown)  # type: ignore[assignment]
        view.status_names = Picked(data.status_names, rows.shown)  # type: ignore[assignment]
        view.unknown_parent = {}
        view.total = len(rows.shown) + max(0, data.total - len(data))
        view.lane_of = data.lane_of
        return view

    def rewrite(self, lanes: np.ndarray) -> None:
        """Copy these lanes' values again (they changed in place in the layout) into their rows,
        if they have rows: the view then stands for the layout's new version."""
        rows = self.rows
        data = rows.data
        seen = lanes[rows.shown[rows.row_at[lanes]] == lanes] if len(lanes) else lanes
        at = rows.row_at[seen]
        for name in ("start", "end", "kind", "status", "input_tokens", "output_tokens", "cost"):
            getattr(self, name)[at] = getattr(data, name)[seen]
        self.version = data.version


def spans_in(data: TimelineData | None) -> int:
    """How many spans a drawn layout stands for: a row view counts the spans folded into its rows."""
    if data is None:
        return 0
    return len(data.rows.data) if isinstance(data, RowView) else len(data)
