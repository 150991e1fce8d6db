"""A live span costs the changed spans, not the run: the grid, the rows and the token series derived
from the previous ones equal those worked out from scratch.

`overview.grown`, `Rows.inserted` and `TimelineData.token_series_after` are what the feed does for a
live run's new or finished span at a million spans (`feed.load_changes`); each is checked here
against the from-scratch function on random live runs, one change at a time.
"""

from __future__ import annotations

import time

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.analysis.layout.data import Before, TimelineData, TokenSeries
from agentdesk.store.analysis.layout.overview import Overview, grown, overview
from agentdesk.store.analysis.layout.rows import Rows, subtree_sizes
from agentdesk.store.readmodel import SpanTable
from tests.store.timeline.test_timeline_incremental import _table, live_runs


def _same_grid(got: Overview, want: Overview) -> None:
    assert (got.x0, got.x1, got.lanes, got.band, got.step) == (want.x0, want.x1, want.lanes, want.band, want.step)
    assert got.mask.shape == want.mask.shape
    assert np.array_equal(got.mask, want.mask)
    assert np.array_equal(got.active, want.active) and np.array_equal(got.failed, want.failed)


def _same_series(got: TokenSeries, want: TokenSeries) -> None:
    for name in ("t", "input_tokens", "output_tokens", "cost"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name


GRIDS = st.sampled_from([(1024, 1024), (4, 8), (3, 5), (1, 2)])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs(), GRIDS, st.lists(st.floats(0.0, 3.0), min_size=1, max_size=40))
def test_a_grid_grown_span_by_span_is_the_grid_from_scratch(run: tuple[list, int], grid: tuple[int, int],  # type: ignore[type-arg]
                                                            ticks: list[float]) -> None:
    spans, first = run
    rows, columns = grid
    data = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    now = max(s[2] for s in spans[:first])
    ov = overview(data, now, rows, columns)
    for i, span in enumerate(spans[first:]):
        now += ticks[i % len(ticks)]
        new = data.relaid_out(_table([span]))
        inserted = np.array([new.lane_of[span[0]]])
        ov = grown(ov, new, now, inserted if len(new) == len(data) + 1 else None, rows=rows, columns=columns)
        _same_grid(ov, overview(new, now, rows, columns))
        data = new


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs(), GRIDS, st.data())
def test_a_grid_after_spans_finish_in_place_is_the_grid_from_scratch(
        run: tuple[list, int], grid: tuple[int, int], draw: st.DataObject) -> None:  # type: ignore[type-arg]
    spans, _ = run
    rows, columns = grid
    data = TimelineData.from_table(_table(spans), t0=0.0)
    now = max(s[2] for s in spans) + draw.draw(st.floats(0.0, 2.0))
    ov = overview(data, now, rows, columns)
    for _ in range(draw.draw(st.integers(1, 4))):
        lanes = sorted(set(draw.draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=3))))
        before = Before.of(data, np.array(lanes))
        changed = []
        for lane in lanes:
            span = next(s for s in spans if s[0] == data.ids[lane])
            end = draw.draw(st.one_of(st.none(), st.floats(0.0, 4.0)))
            variant = draw.draw(st.integers(0, 60))
            changed.append((span[0], span[1], span[2], None if end is None else span[2] + end, variant))
        assert data.update(_table(changed)) is data
        now += draw.draw(st.floats(0.0, 2.0))
        ov = grown(ov, data, now, before=before, rows=rows, columns=columns)
        _same_grid(ov, overview(data, now, rows, columns))


def test_a_grid_rebuilds_when_the_clock_goes_back_or_the_run_outgrows_it() -> None:
    spans = [("root", None, 0.0, None, 0)] + [(f"c{i}", "root", float(i), float(i) + 0.5, i) for i in range(50)]
    data = TimelineData.from_table(_table(spans), t0=0.0)
    ov = overview(data, 60.0, 4, 8)
    _same_grid(grown(ov, data, 59.0, rows=4, columns=8), overview(data, 59.0, 4, 8))  # the clock went back
    later = overview(data, 600.0, 4, 8)  # ten times longer: another step
    assert later.step > ov.step and later.columns <= 8
    _same_grid(grown(ov, data, 600.0, rows=4, columns=8), later)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs(), st.data())
def test_a_token_series_extended_span_by_span_and_in_place_is_the_series_from_scratch(
        run: tuple[list, int], draw: st.DataObject) -> None:  # type: ignore[type-arg]
    """New spans, and spans finishing or changing in place: ending after every other (a live run)
    they extend the series, elsewhere it is rebuilt; both are the series from scratch."""
    spans, first = run
    data = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    series = data.token_series()
    late = max(s[2] for s in spans) + 10.0
    for span in spans[first:]:
        new = data.relaid_out(_table([span]))
        if len(new) == len(data) + 1:
            series = new.token_series_after(series, np.array([new.lane_of[span[0]]]))
        else:
            series = new.token_series()
        _same_series(series, new.token_series())
        data = new
        if draw.draw(st.booleans()):  # a span finishes (late, as live ones do, or anywhere)
            lane = draw.draw(st.integers(0, len(data) - 1))
            before = Before.of(data, [lane])
            end = late if draw.draw(st.booleans()) else draw.draw(st.floats(0.0, 5.0))
            late += draw.draw(st.sampled_from([0.0, 1.0]))
            assert data.update(_table([(data.ids[lane], data.parent_id(lane), float(data.start[lane]),
                                        max(end, float(data.start[lane])), draw.draw(st.integers(0, 60)))])) is data
            series = data.token_series_after(series, before=before)
            _same_series(series, data.token_series())


def test_a_live_sample_is_written_into_the_room_and_the_series_on_screen_keeps_its_length() -> None:
    spans = [("root", None, 0.0, None, 0)] + [(f"m{i}", "root", float(i), float(i) + 0.5, 4 * i + 1) for i in range(20)]
    data = TimelineData.from_table(_table(spans), t0=0.0)
    series = data.token_series()
    new = data.relaid_out(_table([("m_new", "root", 30.0, 31.0, 5)]))
    grown_series = new.token_series_after(series, np.array([new.lane_of["m_new"]]))
    assert grown_series.t.base is series.t.base  # no copy
    assert len(series.t) == len(grown_series.t) - 1 and grown_series.t[-1] == 31.0
    again = new.token_series_after(series, np.array([new.lane_of["m_new"]]))  # the room is taken: a copy
    assert again.t.base is not series.t.base
    _same_series(again, grown_series)


def _same_rows(got: Rows, want: Rows) -> None:
    assert got.data is want.data
    for name in ("collapsed", "shown", "row_at", "folded", "has_children"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs(), st.integers(1, 12), st.data())
def test_rows_with_spans_inserted_are_the_rows_built_from_scratch(run: tuple[list, int], budget: int,  # type: ignore[type-arg]
                                                                   draw: st.DataObject) -> None:
    """Opening rows folded within a small budget, the operator's folds on top; live spans then arrive
    one at a time. The rows kept up are what `Rows.build` gives for the same folding, and that
    folding is the old one, with the opening rule for new spans and for spans given their first child."""
    spans, first = run
    data = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    rows = Rows.default(data, budget=budget)
    flips = draw.draw(st.lists(st.integers(0, len(data) - 1), max_size=3))
    if flips:
        rows = rows.with_state(flips, draw.draw(st.booleans()))
    for span in spans[first:]:
        new = data.relaid_out(_table([span]))
        if len(new) != len(data) + 1:
            data, rows = new, Rows.default(new, budget=budget)
            continue
        lane = new.lane_of[span[0]]
        got = rows.inserted(new, np.array([lane]))
        _same_rows(got, Rows.build(new, got.collapsed))
        old_lanes = np.delete(np.arange(len(new)), lane)
        up = int(new.parent[lane])
        first_child = up >= 0 and subtree_sizes(new)[up] == 2
        keep = old_lanes != up if first_child else np.ones(len(old_lanes), dtype=bool)
        assert np.array_equal(got.collapsed[old_lanes[keep]], rows.collapsed[keep])  # the folding is kept
        if first_child:
            assert got.collapsed[up] == (rows.fold is not None and new.depth[up] >= rows.fold)
        assert not got.collapsed[lane]  # a leaf
        assert got.visible(lane) == (not any(got.collapsed[a] for a in got.ancestors(lane)))
        data, rows = new, got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs(), st.integers(1, 12), st.integers(2, 4))
def test_rows_with_a_few_spans_inserted_at_once_fold_as_the_slow_way_does(run: tuple[list, int], budget: int,  # type: ignore[type-arg]
                                                                          chunk: int) -> None:
    spans, first = run
    data = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    rows = Rows.default(data, budget=budget)
    for at in range(first, len(spans), chunk):
        batch = spans[at:at + chunk]
        new = data.relaid_out(_table(batch))
        if len(new) != len(data) + len(batch):
            data, rows = new, Rows.default(new, budget=budget)
            continue
        lanes = np.sort(np.array([new.lane_of[s[0]] for s in batch]))
        got = rows.inserted(new, lanes)
        _same_rows(got, Rows.build(new, rows._folding(new, lanes, None)))
        data, rows = new, got


class _Changes:
    """A source that answers `span_table` with the given rows (what the bus said changed)."""

    def __init__(self, table: SpanTable) -> None:
        self.table = table

    def span_table(self, run_id: str, span_ids: list[str] | None = None) -> SpanTable:
        return self.table


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs(), st.integers(1, 6), st.data())
def test_load_changes_derives_what_a_fresh_layout_gives(run: tuple[list, int], budget: int,  # type: ignore[type-arg]
                                                        draw: st.DataObject) -> None:
    """A refresh with new spans and spans finished in place at once (a live run's usual 150 ms):
    the layout, series, grid, rows and the rows' grid equal those worked out from scratch."""
    import agentdesk.model.timeline.feed as feed

    spans, first = run
    data = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    now = time.time()
    rows = Rows.default(data, budget=budget)
    grid = overview(data, now)
    shown = feed.Shown(None, data.token_series(), grid, rows, overview(rows.view(), now))
    finished = [(s[0], s[1], s[2], s[2] + draw.draw(st.floats(0.0, 3.0)), draw.draw(st.integers(0, 60)))
                for s in draw.draw(st.lists(st.sampled_from(spans[:first]), max_size=3, unique=True))]
    arriving = spans[first:first + draw.draw(st.integers(0, 3))]
    table = _table(finished + arriving)
    old_grid_over = feed.GRID_OVER_ROWS
    feed.GRID_OVER_ROWS = 0  # the rows get a grid of their own whenever some are folded
    try:
        changed = feed.load_changes(_Changes(table), data, "run", list(table.ids), False, {}, shown)  # type: ignore[arg-type]
    finally:
        feed.GRID_OVER_ROWS = old_grid_over
    new, tokens, new_grid = changed.relaid
    by_id = {s[0]: s for s in spans[:first] + arriving}
    by_id.update({s[0]: s for s in finished})
    want = TimelineData.from_table(_table(list(by_id.values())), t0=0.0)
    assert sorted(new.ids) == sorted(want.ids) and len(new) == len(want)
    _same_series(tokens, new.token_series())
    assert new_grid is not None
    _same_grid(new_grid, overview(new, new_grid.now))
    assert changed.shown is not None
    new_rows, rows_grid = changed.shown
    _same_rows(new_rows, Rows.build(new, new_rows.collapsed))
    if new_rows.all_shown:
        assert rows_grid is new_grid
    else:
        assert rows_grid is not None
        _same_grid(rows_grid, overview(new_rows.view(), rows_grid.now))


def _same_view(got: TimelineData, want: TimelineData) -> None:
    for name in ("start", "end", "kind", "status", "depth", "input_tokens", "output_tokens", "cost", "parent"):
        assert np.array_equal(getattr(got, name), getattr(want, name), equal_nan=True), name
    assert list(got.ids) == list(want.ids) and list(got.names) == list(want.names)
    assert (got.version, got.total, len(got)) == (want.version, want.total, len(want))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs(), st.integers(1, 6), st.data())
def test_a_row_view_kept_up_by_inserts_and_rewrites_is_the_view_made_afresh(
        run: tuple[list, int], budget: int, draw: st.DataObject) -> None:  # type: ignore[type-arg]
    from agentdesk.store.analysis.layout.rows import RowView

    spans, first = run
    data = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    rows = Rows.default(data, budget=budget)
    for span in spans[first:]:
        rows.view()
        new = data.relaid_out(_table([span]))
        if len(new) != len(data) + 1:
            data, rows = new, Rows.default(new, budget=budget)
            continue
        rows = rows.inserted(new, np.array([new.lane_of[span[0]]]))
        data = new
        if not rows.all_shown:
            _same_view(rows.view(), RowView(rows))
        lane = draw.draw(st.integers(0, len(data) - 1))
        rows.view()
        assert data.update(_table([(data.ids[lane], data.parent_id(lane), float(data.start[lane]),
                                    float(data.start[lane]) + 1.0, 7)])) is data
        rows = rows.refreshed(np.array([lane]))
        if not rows.all_shown:
            _same_view(rows.view(), RowView(rows))
