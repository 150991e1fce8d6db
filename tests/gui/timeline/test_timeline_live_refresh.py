"""A live refresh on the GUI thread takes what the runner worked out and no more: the tokens plot keeps
the grown series as it is (no copy, its extent from the new tail) and draws what a full set of the
same series draws; the header's failed and open counts, kept up by the changed spans, are those
counted over the whole layout; the minimap draws only the columns of a new grid that changed."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentdesk.model.timeline.feed as feed
from agentdesk.gui.timeline.drawing import header_text
from agentdesk.gui.timeline.minimap import HEIGHT_PX, Minimap
from agentdesk.gui.timeline.panel import LABELS_PX
from agentdesk.gui.timeline.tokens import TokensPlot, _samples, extends
from agentdesk.model.services import Services
from agentdesk.store import readmodel as rm
from agentdesk.store.analysis.layout.counts import SpanCounts
from agentdesk.store.analysis.layout.data import ERROR, TimelineData, TokenSeries, step_samples
from agentdesk.store.analysis.layout.overview import Overview, overview
from agentdesk.store.analysis.layout.rows import Rows
from agentdesk.store.native import NativeSource
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World
from tests.gui.timeline.timeline_helpers import panel_showing
from tests.store.timeline.test_timeline_incremental import _table, live_runs

Span = tuple[str, str | None, float, float | None, int]


class _Changes:
    """A source answering `span_table` with the rows the bus said changed."""

    def __init__(self, table: SpanTable) -> None:
        self.table = table

    def span_table(self, run_id: str, span_ids: list[str] | None = None) -> SpanTable:
        return self.table


def live_refreshes(draw: st.DataObject, spans: list[Span], first: int) -> Any:
    """The feed's refreshes of a live run, one after another (`load_changes` on what it shows):
    yields (layout, token series, changed ids) after each, the first for the initial load."""
    data = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    now = time.time()
    rows = Rows.default(data)
    shown = feed.Shown(None, data.token_series(), overview(data, now), rows, None)
    yield data, shown.tokens, None
    at, late = first, max(s[2] for s in spans) + 10.0
    while at < len(spans) or draw.draw(st.booleans()):
        arriving = spans[at:at + draw.draw(st.integers(1, 2))] if at < len(spans) else []
        at += len(arriving)
        finished = []
        for lane in draw.draw(st.lists(st.integers(0, len(data) - 1), max_size=2, unique=True)):
            start = float(data.start[lane])
            end = late if draw.draw(st.booleans()) else start + draw.draw(st.floats(0.0, 3.0))
            late += draw.draw(st.sampled_from([0.0, 1.0]))
            finished.append((data.ids[lane], data.parent_id(lane), start, end, draw.draw(st.integers(0, 60))))
        table = _table(finished + arriving)
        if not len(table):
            continue
        changed = feed.load_changes(_Changes(table), data, "run", list(table.ids), False, {}, shown)  # type: ignore[arg-type]
        data, tokens, grid = changed.relaid
        assert changed.shown is not None
        shown = feed.Shown(None, tokens, grid, changed.shown[0], changed.shown[1])
        yield data, tokens, frozenset(table.ids)


def copied(series: TokenSeries) -> TokenSeries:
    """The same series in arrays of its own (what a full set from scratch is handed)."""
    return TokenSeries(series.t.copy(), series.input_tokens.copy(), series.output_tokens.copy(), series.cost.copy(),
                       model_calls=series.model_calls)


def drawn(plot: TokensPlot) -> list[tuple[Any, ...]]:
    return [(curve.getData()[0].tolist(), curve.getData()[1].tolist(), curve.boundingRect().getRect())
            for curve in (plot.input_curve, plot.output_curve, plot.cost_curve)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=40), st.floats(-1.0, 15.0), st.floats(-3.0, 16.0),
       st.floats(0.0, 12.0), st.integers(0, 40))
def test_the_samples_of_a_series_held_flat_are_those_of_the_series_with_the_held_sample(
        times: list[float], until: float, x0: float, width: float, columns: int) -> None:
    t = np.sort(np.asarray(times))
    held = np.append(t, until) if until > t[-1] else t
    keep, picked = _samples(t, until, x0, x0 + width, columns)
    got = t[keep]
    if picked:
        got[-1] = until
    assert got.tolist() == held[step_samples(held, x0, x0 + width, columns)].tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(live_runs(), st.data())
def test_a_live_refresh_keeps_the_series_and_draws_what_a_full_set_draws(
        qtbot, monkeypatch: pytest.MonkeyPatch, run: tuple[list[Span], int], draw: st.DataObject) -> None:  # type: ignore[no-untyped-def]
    spans, first = run
    live, full = TokensPlot(100), TokensPlot(100)
    for plot in (live, full):
        qtbot.addWidget(plot)
        plot.resize(600, 160)
        plot.getPlotItem().vb.setXRange(-1.0, 60.0, padding=0)
    reduced: list[int] = []
    for name in ("min", "max"):
        whole = getattr(np, name)
        monkeypatch.setattr(np, name, lambda a, *args, _whole=whole, **kw: (reduced.append(np.size(a)),
                                                                               _whole(a, *args, **kw))[1])
    before: TokenSeries | None = None
    for step, (_data, tokens, _ids) in enumerate(live_refreshes(draw, spans, first)):
        assert tokens is not None
        until = float(tokens.t[-1]) + draw.draw(st.sampled_from([0.0, 0.5]))
        grew = extends(tokens, before) if before is not None else -1
        reduced.clear()
        live.set_series(tokens, until=until, redraw=False)
        live.refresh()
        assert live.series is tokens  # kept as handed over: the held sample is not appended to a copy
        if grew >= 0:  # grown in its room: only the new samples are looked at for the extent
            assert all(n <= len(tokens.t) - grew for n in reduced), (step, reduced, grew)
        full.set_series(copied(tokens), until=until)
        assert drawn(live) == drawn(full), step
        before = tokens


def test_a_grown_series_is_told_from_another_of_the_same_length() -> None:
    spans = [("root", None, 0.0, None, 0)] + [(f"m{i}", "root", float(i), float(i) + 0.5, 4 * i + 1) for i in range(9)]
    data = TimelineData.from_table(_table(spans), t0=0.0)
    series = data.token_series()
    new = data.relaid_out(_table([("m_new", "root", 30.0, 31.0, 5)]))
    grown = new.token_series_after(series, np.array([new.lane_of["m_new"]]))
    assert extends(grown, series) == len(series.t)
    assert extends(copied(grown), series) == -1  # other buffers: counted again
    assert extends(series, grown) == -1  # shorter
    assert extends(series, series) == len(series.t)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs(), st.data())
def test_counts_kept_up_by_the_changed_spans_are_the_counts_over_the_layout(
        run: tuple[list[Span], int], draw: st.DataObject) -> None:
    spans, first = run
    counts = SpanCounts()
    for data, _tokens, ids in live_refreshes(draw, spans, first):
        counts.changed(data, ids)
        assert counts.data is data
        assert (counts.errors, counts.open) == (int((data.status == ERROR).sum()), int(data.open.sum()))


def test_the_header_line_is_the_header_text() -> None:
    spans: list[Span] = [("a", None, 0.0, None, 1), ("b", "a", 1.0, 2.0, 4), ("c", "a", 1.0, 3.0, 2)]
    data = TimelineData.from_table(_table(spans))
    for usage in (rm.Usage(), rm.Usage(1200, 300, 0.25)):
        run = cast(rm.Run, SimpleNamespace(title="A run\nwith two lines", status="running", usage=usage))
        counts = SpanCounts()
        counts.count(data)
        assert header_text(run, data, (counts.errors, counts.open)) == header_text(run, data)
        assert "2 failed" in header_text(run, data) and "1 open" in header_text(run, data)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(st.integers(1, 300), st.data())
def test_a_minimap_kept_up_column_by_column_draws_what_a_fresh_one_draws(
        qtbot, columns: int, draw: st.DataObject) -> None:  # type: ignore[no-untyped-def]
    """A live run hands the minimap a new grid on every refresh: the columns that changed are drawn
    over the strip kept, and the strip is the one a minimap given that grid alone draws."""
    live, fresh = Minimap(), Minimap()
    for minimap in (live, fresh):
        qtbot.addWidget(minimap)
        minimap.resize(420, HEIGHT_PX)
        minimap.set_margins(30, 10)
    rng = np.random.default_rng(draw.draw(st.integers(0, 2**32 - 1)))
    active, failed = rng.integers(0, 50, columns), rng.integers(0, 3, columns) * rng.integers(0, 2, columns)
    for step in range(draw.draw(st.integers(1, 6))):
        at = rng.integers(0, columns, draw.draw(st.integers(0, 3)))
        active[at] += rng.integers(0, 30, len(at))
        failed[at] += rng.integers(0, 2, len(at))
        grid = Overview(0.0, float(columns), 10, np.zeros((1, columns), np.uint8), active.copy(), failed.copy())
        if draw.draw(st.booleans()):  # marks now and then (drawn again in full)
            marks = rng.uniform(0, columns, 2)
            for minimap in (live, fresh):
                minimap.set_marks(matches=marks, path=np.array([[marks.min(), marks.max()]]))
        live.set_overview(grid)
        fresh._strip = None
        fresh.set_overview(grid)
        assert live.grab().toImage() == fresh.grab().toImage(), step


def test_a_live_panel_shows_what_a_full_set_shows(services: Services, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    """Spans started and finished while the panel shows the run: after each refresh the header is
    the one counted over the whole layout, and the tokens plot draws what it draws given a copy of
    the series afresh."""
    panel = panel_showing(services, world.run_id, qtbot)
    source = services.source
    assert isinstance(source, NativeSource)
    runtime = AgentRuntime(source.store)
    root = panel.data.ids[0] if panel.data is not None else None
    full = TokensPlot(LABELS_PX)
    qtbot.addWidget(full)
    full.resize(panel.tokens.size())
    for i in range(4):
        new = runtime.start_span(world.run_id, "model", f"call {i}", parent_span_id=root)
        qtbot.waitUntil(lambda: panel.data is not None and new in panel.data.lane_of, timeout=5000)  # noqa: B023
        runtime.finish_span(new, "error" if i % 2 else "ok", "done", input_tokens=10 + i, output_tokens=3)
        qtbot.waitUntil(lambda: panel.data is not None and not panel.data.open[panel.data.lane_of[new]],  # noqa: B023
                        timeout=5000)
        # the runner changes a finished span's layout in place before the panel hears of it: wait for
        # the refresh to be taken (a count kept wrong never gets there)
        qtbot.waitUntil(lambda: panel.data is not None and panel.run is not None and not panel.feed.busy
                        and panel.counts.data is panel.data
                        and panel.header.text() == header_text(panel.run, panel.data), timeout=5000)
        data, run, series = panel.data, panel.run, panel.feed.tokens
        assert data is not None and run is not None and series is not None
        assert f"{i // 2 + 1 + (i % 2)} failed" in panel.header.text(), i
        assert panel.tokens.series is series
        full.getPlotItem().vb.setXRange(*panel.tokens.getPlotItem().vb.viewRange()[0], padding=0)
        full.set_series(copied(series), until=panel.tokens.until)
        assert drawn(panel.tokens) == drawn(full), i
