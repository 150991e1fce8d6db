"""Collapsed sub-trees over the pre-order layout: which lanes are rows, and where a hidden lane shows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.analysis.layout.rows import Rows, RowView, default_collapsed, spans_in, subtree_sizes
from agentdesk.store.readmodel import SpanTable


def tree(parents: list[int | None]) -> TimelineData:
    """Spans s0..s(n-1) with these parent indices, started in index order."""
    n = len(parents)
    ids = [f"s{i}" for i in range(n)]
    return TimelineData.from_table(SpanTable(
        ids, [None if p is None else f"s{p}" for p in parents], ["tool"] * n, ids, ["ok"] * n,
        [float(i) for i in range(n)], [float(i) + 0.5 for i in range(n)], [0] * n, [0] * n, [0.0] * n), t0=0.0)


# s0 ─ s1 ─ s2
#         └ s3
#    └ s4 ─ s5
PARENTS: list[int | None] = [None, 0, 1, 1, 0, 4]


def lanes(data: TimelineData, *names: str) -> list[int]:
    return [data.lane_of[name] for name in names]


def test_sub_tree_sizes_count_every_descendant() -> None:
    data = tree(PARENTS)
    size = subtree_sizes(data)
    assert {data.ids[lane]: int(size[lane]) for lane in range(len(data))} == {
        "s0": 6, "s1": 3, "s2": 1, "s3": 1, "s4": 2, "s5": 1}


def test_collapsing_hides_the_descendants_and_maps_them_to_the_collapsed_row() -> None:
    data = tree(PARENTS)
    s1, s2, s3, s4 = lanes(data, "s1", "s2", "s3", "s4")
    collapsed = np.zeros(len(data), dtype=bool)
    collapsed[s1] = True
    rows = Rows.build(data, collapsed)
    assert [data.ids[lane] for lane in rows.shown] == ["s0", "s1", "s4", "s5"]
    assert not rows.visible(s2) and not rows.visible(s3) and rows.row(s2) == -1
    assert rows.rows_of(np.array([s2, s3, s4])).tolist() == [1, 1, 2]  # folded into s1's row
    assert rows.folded.tolist() == [0, 2, 0, 0] and rows.has_children.tolist() == [True, True, True, False]
    view = rows.view()
    assert isinstance(view, RowView) and len(view) == 4 and view.names[2] == "s4" and spans_in(view) == 6
    assert view.start.tolist() == [data.start[lane] for lane in rows.shown]
    expanded = rows.with_state([s1], False)
    assert expanded.all_shown and expanded.view() is data


def test_a_collapsed_span_inside_a_collapsed_one_stays_folded_when_the_outer_opens() -> None:
    data = tree(PARENTS)
    s0, s1, s2 = lanes(data, "s0", "s1", "s2")
    rows = Rows.build(data, np.zeros(len(data), dtype=bool)).with_state([s0, s1], True)
    assert len(rows) == 1 and int(rows.folded[0]) == 5
    rows = rows.with_state([s0], False)
    assert [data.ids[lane] for lane in rows.shown] == ["s0", "s1", "s4", "s5"]
    revealed = rows.revealing(s2)
    assert revealed.visible(s2) and revealed.all_shown


def test_a_big_run_opens_with_deep_sub_trees_collapsed_within_the_budget() -> None:
    # one root, 10 children, 10 grandchildren each, 5 great-grandchildren each: 611 spans
    parents: list[int | None] = [None]
    for _ in range(10):
        child = len(parents)
        parents.append(0)
        for _ in range(10):
            grand = len(parents)
            parents.append(child)
            parents.extend([grand] * 5)
    data = tree(parents)
    assert not default_collapsed(data, budget=1000).any()  # small enough: everything shown
    rows = Rows.default(data, budget=200)  # levels 0-2 are 111 rows, level 3 would make 611
    assert len(rows) == 111 and set(data.depth[rows.shown].tolist()) == {0, 1, 2}
    assert int(rows.folded.sum()) == 500
    rows = Rows.default(data, budget=5)  # a lone root is always opened
    assert len(rows) == 11
    opened = Rows.default(data, {data.ids[int(rows.shown[1])]: False}, budget=5)  # an operator's choice kept
    assert len(opened) == 21


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=60),
       st.lists(st.booleans(), min_size=60, max_size=60))
def test_rows_match_a_walk_that_skips_collapsed_sub_trees(seeds: list[int], fold: list[bool]) -> None:
    parents: list[int | None] = [None if i == 0 or s % 7 == 0 else s % i for i, s in enumerate(seeds)]
    data = tree(parents)
    collapsed = np.array(fold[:len(data)], dtype=bool)
    rows = Rows.build(data, collapsed)
    expected, skip_until = [], -1
    size = subtree_sizes(data)
    for lane in range(len(data)):
        if lane < skip_until:
            continue
        expected.append(lane)
        if collapsed[lane]:
            skip_until = lane + int(size[lane])
    assert rows.shown.tolist() == expected
    for lane in range(len(data)):  # a hidden lane shows on the row of its nearest shown ancestor
        row = int(rows.row_at[lane])
        shown = int(rows.shown[row])
        assert shown == lane or shown in Rows.ancestors(rows, lane)
