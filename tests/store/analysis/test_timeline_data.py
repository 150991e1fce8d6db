"""The waterfall layout without Qt: order, depths, open spans, live updates, level of detail, hits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agentdesk.store.analysis.layout.data import (
    ERROR,
    KIND_CODES,
    RUNNING,
    TimelineData,
    depths,
    dfs_order,
    merge_blocks,
    pixel_blocks,
    step_samples,
)
from agentdesk.store.readmodel import SpanTable
from tests.conftest import prebuilt


def table(rows: list[tuple[str, str | None, float, float | None]], kind: str = "tool",
          status: str = "ok") -> SpanTable:
    """Rows of (id, parent id, start, end); tokens 10 in / 1 out and $0.01 per finished span."""
    return SpanTable([r[0] for r in rows], [r[1] for r in rows], [kind] * len(rows), [r[0] for r in rows],
                     ["running" if r[3] is None else status for r in rows], [r[2] for r in rows],
                     [r[3] for r in rows], [0 if r[3] is None else 10 for r in rows],
                     [0 if r[3] is None else 1 for r in rows], [0.0 if r[3] is None else 0.01 for r in rows])


TREE = [  # given in start order, as span_table returns them
    ("root", None, 100.0, 200.0),
    ("a", "root", 101.0, 150.0),
    ("a1", "a", 102.0, 110.0),
    ("b", "root", 103.0, 190.0),
    ("a2", "a", 120.0, 140.0),
    ("b1", "b", 130.0, None),
]


def test_children_follow_their_parent_and_siblings_their_start() -> None:
    data = TimelineData.from_table(table(TREE), t0=100.0)
    assert data.ids == ["root", "a", "a1", "a2", "b", "b1"]
    assert data.depth.tolist() == [0, 1, 2, 2, 1, 2]
    assert data.parent.tolist() == [-1, 0, 1, 1, 0, 4]
    assert data.start.tolist() == [0.0, 1.0, 2.0, 20.0, 3.0, 30.0]
    assert data.lane_of["b1"] == 5


def test_siblings_are_ordered_by_start_even_when_the_input_is_not() -> None:
    shuffled = [TREE[i] for i in (4, 0, 5, 3, 1, 2)]
    assert TimelineData.from_table(table(shuffled), t0=100.0).ids == ["root", "a", "a1", "a2", "b", "b1"]


def test_open_spans_reach_now_and_grow_with_it() -> None:
    data = TimelineData.from_table(table(TREE), t0=100.0)
    lane = data.lane_of["b1"]
    assert math.isnan(data.end[lane]) and data.open.tolist() == [False] * 5 + [True]
    assert data.ends(now=50.0)[lane] == 50.0
    assert data.ends(now=75.0)[lane] == 75.0
    assert data.ends(now=10.0)[lane] == 30.0  # never before its own start
    assert data.extent(now=250.0) == (0.0, 250.0)
    assert data.status[lane] == RUNNING


def test_orphans_become_roots_and_cycles_are_cut() -> None:
    rows: list[tuple[str, str | None, float, float | None]] = [
        ("x", "missing", 1.0, 2.0), ("c1", "c2", 3.0, 4.0), ("c2", "c1", 5.0, 6.0),
        ("self", "self", 7.0, 8.0)]
    data = TimelineData.from_table(table(rows), t0=0.0)
    assert sorted(data.ids) == sorted(r[0] for r in rows)
    assert data.ids[0] == "x" and data.depth[0] == 0
    assert data.depth[data.lane_of["c1"]] == 0 and data.depth[data.lane_of["c2"]] == 1
    assert data.depth[data.lane_of["self"]] == 0


def test_a_100000_deep_chain_needs_no_recursion() -> None:
    n = 100_000
    parent = np.arange(-1, n - 1)
    order, cut = dfs_order(parent, np.arange(n, dtype=np.float64))
    assert order.tolist() == list(range(n)) and (cut == parent).all()
    assert depths(parent)[-1] == n - 1


def test_finishing_a_span_updates_its_lane_in_place() -> None:
    data = TimelineData.from_table(table(TREE), t0=100.0)
    rows = table([("b1", "b", 130.0, 160.0)], status="error")
    assert not data.needs_relayout(rows)
    assert data.update(rows) is data
    lane = data.lane_of["b1"]
    assert data.end[lane] == 60.0 and data.status[lane] == ERROR and data.version == 1
    assert data.input_tokens[lane] == 10


def test_a_new_span_is_laid_out_under_its_parent_in_a_copy() -> None:
    data = TimelineData.from_table(table(TREE), t0=100.0)
    rows = table([("a3", "a", 145.0, None)])
    assert data.needs_relayout(rows)
    new = data.update(rows)
    assert new is not data and len(data) == 6
    assert new.ids == ["root", "a", "a1", "a2", "a3", "b", "b1"]
    assert new.depth[new.lane_of["a3"]] == 2 and new.t0 == 100.0


def test_kinds_and_unknown_values_get_codes() -> None:
    rows = table(TREE, kind="weird_kind", status="strange")
    data = TimelineData.from_table(rows)
    assert set(data.kind.tolist()) == {KIND_CODES["internal"]}
    assert data.kind_names[0] == "weird_kind"
    assert data.t0 == 100.0  # defaults to the first start


def test_token_series_is_cumulative_by_end_time() -> None:
    data = TimelineData.from_table(table(TREE), t0=100.0)
    series = data.token_series()
    assert series.t.tolist() == [0.0, 10.0, 40.0, 50.0, 90.0, 100.0]
    assert series.input_tokens.tolist() == [0, 10, 20, 30, 40, 50]
    assert series.cost[-1] == pytest.approx(0.05)


def test_token_series_counts_model_calls_once_when_agents_repeat_them() -> None:
    rows = table([("agent", None, 0.0, 10.0), ("call", "agent", 1.0, 2.0)])
    rows.kinds[1] = "model"  # both carry 10 in / 1 out: the agent span repeats its call's usage
    series = TimelineData.from_table(rows, t0=0.0).token_series()
    assert series.input_tokens.tolist() == [0, 10] and series.t.tolist() == [0.0, 2.0]


def test_hit_finds_the_span_under_the_pointer() -> None:
    data = TimelineData.from_table(table(TREE), t0=100.0)
    assert data.hit(5.0, 2.5, tol_x=0.1, tol_y=0.0, now=50.0) == 2  # a1: lane 2, 2..10 s
    assert data.hit(12.0, 2.5, tol_x=0.1, tol_y=0.0, now=50.0) == -1
    assert data.hit(10.05, 2.5, tol_x=0.1, tol_y=0.0, now=50.0) == 2  # within the pixel tolerance
    assert data.hit(45.0, 5.5, tol_x=0.1, tol_y=0.0, now=50.0) == 5  # the open span reaches now
    assert data.hit(1.0, 99.0, tol_x=0.1, tol_y=0.0, now=50.0) == -1


def coverage(row: np.ndarray, group: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> set[tuple[int, int, int]]:
    spans = zip(row.tolist(), group.tolist(), x0.tolist(), x1.tolist(), strict=True)
    return {(r, g, x) for r, g, a, b in spans for x in range(int(a), int(b))}


def test_level_of_detail_merges_without_changing_what_is_covered() -> None:
    rng = np.random.default_rng(7)
    n = 5000
    row = np.sort(rng.integers(0, 40, n))
    group = rng.integers(0, 9, n)
    x0 = rng.integers(0, 1000, n).astype(np.float64)
    x1 = x0 + rng.integers(1, 30, n)
    r, g, b0, b1 = pixel_blocks(row, group, x0, x1, gap=0)
    assert len(r) < n
    assert coverage(r, g, b0, b1) == coverage(row, group, x0, x1)


def test_level_of_detail_takes_small_group_codes_as_they_come() -> None:
    rng = np.random.default_rng(3)
    row, group = np.sort(rng.integers(0, 30, 2000)), rng.integers(0, 9, 2000)
    x0 = rng.uniform(-5, 900, 2000)
    x1 = x0 + rng.exponential(10, 2000)
    wide, narrow = pixel_blocks(row, group, x0, x1), pixel_blocks(row.astype(np.int32), group.astype(np.int8), x0, x1)
    assert all(np.array_equal(a, b) for a, b in zip(wide, narrow, strict=True))


def test_merge_blocks_joins_within_the_gap_only() -> None:
    key = np.array([0, 0, 0, 1])
    k, a, b = merge_blocks(key, np.array([0, 5, 20, 0]), np.array([4, 8, 25, 3]), gap=1)
    assert (k.tolist(), a.tolist(), b.tolist()) == ([0, 0, 1], [0, 20, 0], [8, 25, 3])


def test_layout_of_100000_spans_is_whole() -> None:
    """How fast is bench/timeline_bench.py's question; here: every span laid out below its root."""
    rng = np.random.default_rng(1)
    n = 100_000
    parents: list[str | None] = [None] + [f"s{int(p)}" for p in rng.integers(0, np.arange(1, n) // 10 + 1)]
    starts = np.sort(rng.random(n) * 3600).tolist()
    big = SpanTable([f"s{i}" for i in range(n)], parents, ["model"] * n, ["x"] * n, ["ok"] * n, starts,
                    [s + 1 for s in starts], [1] * n, [1] * n, [0.0] * n)
    data = TimelineData.from_table(big)
    assert len(data) == n and (data.depth[1:] > 0).all()


def test_a_step_curve_sampled_per_pixel_column_draws_what_all_of_it_would() -> None:
    rng = np.random.default_rng(5)
    t = np.concatenate(([0.0], np.sort(rng.uniform(0, 1000, 50_000))))
    y = np.concatenate(([0], np.cumsum(rng.integers(0, 50, 50_000))))
    x0, x1, columns = 120.0, 480.0, 700
    keep = step_samples(t, x0, x1, columns)
    assert len(keep) <= columns + 2 and (np.diff(keep) > 0).all()
    assert t[keep[0]] <= x0 and t[keep[-1]] > x1  # the curve reaches both edges
    # at every pixel column's right edge, and at the left edge, the value shown is the series' own
    edges = np.linspace(x0, x1, columns + 1)
    shown = y[keep][np.searchsorted(t[keep], edges, side="right") - 1]
    assert (shown == y[np.searchsorted(t, edges, side="right") - 1]).all()


def test_a_step_curve_without_a_view_keeps_every_sample() -> None:
    t = np.array([0.0, 1.0, 2.0])
    assert step_samples(t, 0.0, 2.0, 0).tolist() == [0, 1, 2]
    assert step_samples(t, 5.0, 5.0, 100).tolist() == [0, 1, 2]
    assert step_samples(t, 5.0, 9.0, 100).tolist() == [2]  # past the end: the last value, held
    assert step_samples(np.zeros(0), 0.0, 1.0, 10).tolist() == []


def test_closed_spans_without_duration_are_points() -> None:
    data = TimelineData.from_table(table([("r", None, 0.0, 5.0), ("p", "r", 1.0, 1.0), ("o", "r", 2.0, None)]))
    assert dict(zip(data.ids, data.points.tolist(), strict=True)) == {"r": False, "p": True, "o": False}


def random_forest(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parents earlier in the array (a forest with a few roots), starts with ties."""
    parent = np.array([-1] + [int(rng.integers(-1, i)) if rng.random() < 0.05 else int(rng.integers(0, i))
                              for i in range(1, n)], dtype=np.int64)
    start = rng.integers(0, n // 3 + 1, n).astype(np.float64)
    return parent, start


@pytest.mark.parametrize("seed", range(8))
def test_the_array_preorder_is_the_iterative_walk(seed: int) -> None:
    from agentdesk.store.analysis.layout.data import preorder

    parent, start = random_forest(np.random.default_rng(seed), 400)
    order, used, depth = preorder(parent, start)
    walked, _ = dfs_order(parent, start)
    assert order.tolist() == walked.tolist()
    assert (used == parent).all() and (depth == depths(parent)).all()


def test_a_parent_cycle_falls_back_to_the_walk_that_cuts_it() -> None:
    from agentdesk.store.analysis.layout.data import bounded_depths, preorder

    parent = np.array([-1, 2, 1, 0], dtype=np.int64)  # 1 and 2 are each other's parent
    assert bounded_depths(parent) is None
    order, used, _depth = preorder(parent, np.arange(4.0))
    assert sorted(order.tolist()) == [0, 1, 2, 3] and (used >= -1).all()
    assert bounded_depths(used) is not None


def test_a_ten_thousand_deep_chain_lays_out() -> None:
    n = 10_000
    rows = [(f"s{i}", f"s{i - 1}" if i else None, float(i), float(2 * n - i)) for i in range(n)]
    data = TimelineData.from_table(table(rows), t0=0.0)
    assert data.depth.tolist() == list(range(n)) and data.ids[-1] == f"s{n - 1}"


@pytest.mark.parametrize("seed", range(6))
def test_new_spans_appended_land_where_a_full_layout_puts_them(seed: int) -> None:
    rng = np.random.default_rng(seed)
    parent, start = random_forest(rng, 300)
    start = np.sort(start)  # new spans of a live run start last
    ids = [f"s{i}" for i in range(300)]
    rows = [(ids[i], ids[parent[i]] if parent[i] >= 0 else None, float(start[i]), float(start[i]) + 1.0)
            for i in range(300)]
    data = TimelineData.from_table(table(rows[:280]), t0=0.0)
    for row in rows[280:]:  # one at a time, as the live feed brings them
        new = data.relaid_out(table([row]))
        assert new is not data
        data = new
    full = TimelineData.from_table(table(rows), t0=0.0)
    assert data.ids == full.ids
    assert data.parent.tolist() == full.parent.tolist() and data.depth.tolist() == full.depth.tolist()
    assert data.start.tolist() == full.start.tolist()
    assert all(data.lane_of[span_id] == lane for lane, span_id in enumerate(full.ids))


def test_an_appended_layout_leaves_the_one_on_screen_as_it_was() -> None:
    data = TimelineData.from_table(table(TREE), t0=100.0)
    before = (list(data.ids), data.parent.tolist(), {i: data.lane_of[i] for i in data.ids})
    new = data.appended(table([("a3", "a", 145.0, 146.0)]))
    assert new is not None and new.ids == ["root", "a", "a1", "a2", "a3", "b", "b1"]
    assert (list(data.ids), data.parent.tolist(), {i: data.lane_of[i] for i in data.ids}) == before
    assert "a3" not in data.lane_of and new.lane_of["b1"] == 6
    # a span starting before a later sibling needs the full layout
    assert data.appended(table([("a0", "a", 101.5, 102.0)])) is None
    assert data.relaid_out(table([("a0", "a", 101.5, 102.0)])).ids[:3] == ["root", "a", "a0"]


def test_a_span_whose_parent_arrives_later_is_attached_when_it_does() -> None:
    data = TimelineData.from_table(table([("root", None, 0.0, 9.0), ("child", "late", 2.0, 3.0)]), t0=0.0)
    assert data.depth.tolist() == [0, 0] and data.parent_id(data.lane_of["child"]) == "late"
    data = data.relaid_out(table([("late", "root", 1.0, 4.0)]))
    assert data.ids == ["root", "late", "child"] and data.depth.tolist() == [0, 1, 2]


def test_the_overview_grid_marks_the_kinds_each_cell_holds() -> None:
    from agentdesk.store.analysis.layout.data import KIND_CODES
    from agentdesk.store.analysis.layout.overview import overview, pooled

    rows = [("root", None, 0.0, 100.0)] + [(f"t{i}", "root", float(i), float(i) + 0.5) for i in range(99)]
    data = TimelineData.from_table(table(rows), t0=0.0)
    ov = overview(data, 100.0, rows=10, columns=100)
    tool = 1 << KIND_CODES["tool"]
    assert ov.mask.shape == (10, 100) and ov.lanes == 100
    assert (ov.mask[0] & tool).any() and ov.active.max() >= 2 and ov.active.sum() >= 100
    # lane band 5 holds tools 49..58, each in its own second: those columns only
    assert set(np.flatnonzero(ov.mask[5] & tool).tolist()) == set(range(49, 59))
    assert pooled(ov.mask, 5, 10).shape == (2, 10)
    low = pooled(ov.mask, 5, 10)[1]  # lanes 50..99: tools 49..98, so the columns from 40 s on
    assert (low[5:] & tool).all() and not low[:4].any()  # pooling keeps every present kind


def test_native_columns_are_the_span_table_in_start_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from agentdesk.store.native import NativeSource
    from agentdesk.store.runtime import AgentRuntime
    from agentdesk.store.timeline.columns import from_table
    from agentdesk.store.timeline.read import span_columns

    source = NativeSource.open(str(prebuilt(tmp_path / "s.sqlite")))
    try:
        rt = AgentRuntime(source.store)
        run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                           "a", "m"), "r")
        root = rt.start_span(run, "agent", "a")
        for i in range(5):
            rt.finish_span(rt.start_span(run, "tool", f"t{i}", parent_span_id=root), "ok", None, input_tokens=i)
        cols, generic = span_columns(source, run), from_table(source.span_table(run))
        assert cols.ids == generic.ids and cols.parent_ids == generic.parent_ids and cols.names == generic.names
        assert np.array_equal(cols.end, generic.end, equal_nan=True)
        assert cols.input_tokens.tolist() == generic.input_tokens.tolist() and cols.total == 6
        first = span_columns(source, run, first=2)
        # a first read's total is a lower bound: one more than asked says "there are more"
        assert first.ids == cols.ids[:2] and first.total == 3 and not first.complete
        whole = span_columns(source, run, first=6)
        assert whole.ids == cols.ids and whole.total == 6 and whole.complete
    finally:
        source.close()


@pytest.mark.parametrize("odd_name", ["plain", "with\x1fthe separator", "bad \udcff utf-8"])
def test_packed_native_columns_match_the_row_read(tmp_path, odd_name: str) -> None:  # type: ignore[no-untyped-def]
    """One packed statement (the fast path) and the row by row read agree, times to the microsecond;
    a name holding the separator or invalid UTF-8 still reads (falling back to rows where needed)."""
    import sqlite3

    from agentdesk.store.native import NativeSource
    from agentdesk.store.runtime import AgentRuntime
    from agentdesk.store.timeline import read as span_read

    source = NativeSource.open(str(prebuilt(tmp_path / "s.sqlite")))
    try:
        rt = AgentRuntime(source.store)
        run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                           "a", "m"), "r")
        root = rt.start_span(run, "agent", "a")
        spans = [rt.start_span(run, "tool", f"t{i}", parent_span_id=root) for i in range(4)]
        for i, span in enumerate(spans[:3]):
            rt.finish_span(span, "ok", None, input_tokens=i, output_tokens=2 * i)
        name: object = odd_name.encode("utf-8", "surrogateescape") if "\udcff" in odd_name else odd_name
        raw = sqlite3.connect(str(tmp_path / "s.sqlite"))  # as another program would write it
        raw.execute("UPDATE spans SET name = ?, started_at = started_at + 0.0000013 WHERE id = ?", (name, spans[1]))
        raw.commit()
        raw.close()
        fast = span_read.span_columns(source, run)
        with source.store.reading() as session:
            slow = span_read._rows(session, run, None)
        assert fast.ids == slow.ids and fast.parent_ids == slow.parent_ids and fast.names == slow.names
        assert fast.kinds == slow.kinds and fast.statuses == slow.statuses and fast.total == slow.total == 5
        assert np.allclose(fast.start, slow.start, rtol=0, atol=1e-6)
        assert np.allclose(fast.end, slow.end, rtol=0, atol=1e-6, equal_nan=True) and np.isnan(fast.end[-1])
        assert fast.input_tokens.tolist() == slow.input_tokens.tolist()
        assert fast.output_tokens.tolist() == slow.output_tokens.tolist()
        assert ("\ufffd" in fast.names[fast.ids.index(spans[1])]) == ("\udcff" in odd_name)
        first = span_read.span_columns(source, run, first=3)
        assert first.ids == slow.ids[:3] and first.total == 4 and not first.complete
        with source.store.reading() as session:  # the row read counts the same way
            rows_first = span_read._rows(session, run, 3)
        assert rows_first.ids == slow.ids[:3] and rows_first.total == 4 and not rows_first.complete
    finally:
        source.close()


def _two_runs(tmp_path, runs: int = 2, spans: int = 12):  # type: ignore[no-untyped-def]
    """`runs` runs whose spans were written interleaved (as concurrent runtimes write them), starts
    shuffled afterwards (rowid order is then not start order), with ties, open spans and costs."""
    import random
    import sqlite3

    from agentdesk.store.native import NativeSource
    from agentdesk.store.runtime import AgentRuntime

    source = NativeSource.open(str(prebuilt(tmp_path / "s.sqlite")))
    rt = AgentRuntime(source.store)
    session = rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s")
    ids = [rt.start_run(rt.create_agent(session, f"a{r}", "m"), "r") for r in range(runs)]
    roots = [rt.start_span(run, "agent", "a") for run in ids]
    spans_of: dict[str, list[str]] = {run: [] for run in ids}
    for i in range(spans):
        for run, root in zip(ids, roots, strict=True):
            span = rt.start_span(run, "tool", f"t{i}", parent_span_id=root)
            spans_of[run].append(span)
            if i % 3:
                rt.finish_span(span, "ok", None, input_tokens=i, output_tokens=2 * i, cost_usd=0.000123 * i)
    rng = random.Random(7)
    raw = sqlite3.connect(str(tmp_path / "s.sqlite"))
    base = raw.execute("SELECT min(started_at) FROM spans").fetchone()[0]
    for run in ids:
        for span in spans_of[run]:
            raw.execute("UPDATE spans SET started_at = ? WHERE id = ?", (base + rng.choice([0.5, 0.25, 1e-7, 3.0]),
                                                                         span))
    raw.commit()
    raw.close()
    return source, ids


def _same(fast, slow) -> None:  # type: ignore[no-untyped-def]
    assert fast.ids == slow.ids and fast.parent_ids == slow.parent_ids and fast.names == slow.names
    assert fast.kinds == slow.kinds and fast.statuses == slow.statuses and fast.total == slow.total
    assert np.allclose(fast.start, slow.start, rtol=0, atol=1e-6)
    assert np.allclose(fast.end, slow.end, rtol=0, atol=1e-6, equal_nan=True)
    assert np.array_equal(np.isnan(fast.end), np.isnan(slow.end))
    assert fast.input_tokens.tolist() == slow.input_tokens.tolist()
    assert fast.output_tokens.tolist() == slow.output_tokens.tolist()
    assert np.allclose(fast.cost, slow.cost, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("runs", [1, 2, 3])
def test_the_rowid_range_read_and_the_index_read_both_match_the_row_read(tmp_path, runs: int) -> None:  # type: ignore[no-untyped-def]
    """Both access paths of the packed read (a run's rowid range, in insertion order and sorted after;
    `spans_by_run`, in start order) give the row read's columns, ties in start by rowid, whether the
    run's rows are contiguous (one run), half the range (two interleaved) or a third (three)."""
    from agentdesk.store.timeline import packed as packed_read
    from agentdesk.store.timeline import read as span_read

    source, ids = _two_runs(tmp_path, runs)
    try:
        for run in ids:
            with source.store.reading() as session:
                slow = span_read._rows(session, run, None)
                raw, factory = span_read._bytes_cursor(session)
                cursor = raw.cursor()
                try:
                    extent = packed_read._extent(cursor, run)
                    assert extent.dense() == (runs <= 2)
                    by_rowid = packed_read._packed(cursor, run, None, extent, by_rowid=True)
                    by_index = packed_read._packed(cursor, run, None, extent, by_rowid=False)
                finally:
                    cursor.close()
                    raw.text_factory = factory
            assert by_rowid is not None and by_index is not None and slow.total == 13
            assert list(slow.start) == sorted(slow.start) and len(set(slow.start.tolist())) < len(slow)  # ties
            _same(by_rowid, slow)
            _same(by_index, slow)
            _same(span_read.span_columns(source, run), slow)
            first = span_read.span_columns(source, run, first=4)
            assert first.ids == slow.ids[:4] and first.total == 5 and not first.complete
    finally:
        source.close()


def test_a_time_too_far_for_the_packed_integers_reads_by_rows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A span end past the readable times (2255 on, stored as integer nanoseconds since migration 0023): the
    packed read declines it and the row read gives it as an unreadable time (the epoch)."""
    import sqlite3

    from agentdesk.store.timeline import packed as packed_read
    from agentdesk.store.timeline import read as span_read

    source, (run,) = _two_runs(tmp_path, 1, 4)
    try:
        raw = sqlite3.connect(str(tmp_path / "s.sqlite"))
        far = raw.execute("SELECT id, started_at FROM spans WHERE run_id = ? AND ended_at IS NOT NULL LIMIT 1",
                          (run,)).fetchone()
        raw.execute("UPDATE spans SET ended_at = ? WHERE id = ?", (9_100_000_000_000_000_000, far[0]))
        raw.commit()
        raw.close()
        with source.store.reading() as session:
            raw_conn, factory = span_read._bytes_cursor(session)
            cursor = raw_conn.cursor()
            try:
                assert packed_read._packed(cursor, run, None, packed_read._extent(cursor, run)) is None
            finally:
                cursor.close()
                raw_conn.text_factory = factory
            slow = span_read._rows(session, run, None)
        cols = span_read.span_columns(source, run)
        _same(cols, slow)
        assert cols.end[cols.ids.index(far[0])] == 0.0
    finally:
        source.close()
