"""The timeline panel against a real store: lanes, selection, details, errors, live spans, keys."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QToolTip
from sqlalchemy import insert

from agentdesk.gui.shared.palette import ERROR_COLOUR, SPAN_KIND_COLOURS
from agentdesk.gui.timeline.details import SHOWN_CHARS, SpanDetails, SpanView
from agentdesk.gui.timeline.drawing import set_background
from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.gui.timeline.tokens import COST_COLOUR, StepCurve, TokensPlot
from agentdesk.model.services import Services
from agentdesk.model.timeline.feed import TimelineFeed
from agentdesk.store.analysis.layout.data import ERROR, TokenSeries
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.sources import open_source
from tests.gui.conftest import World
from tests.store.sources.fixtures_vgxness import build_vgxness_fixture


@pytest.fixture
def panel(services: Services, qtbot) -> TimelinePanel:  # type: ignore[no-untyped-def]
    widget = TimelinePanel(services)
    qtbot.addWidget(widget)
    widget.resize(1200, 700)
    widget.show()
    return widget


def native(services: Services) -> NativeSource:
    assert isinstance(services.source, NativeSource)
    return services.source


def shown(panel: TimelinePanel, qtbot, run_id: str, spans: int) -> None:  # type: ignore[no-untyped-def]
    panel.show_run(run_id)
    qtbot.waitUntil(lambda: panel.data is not None and len(panel.data) == spans, timeout=5000)


def span_point(panel: TimelinePanel, lane: int) -> QPoint:
    """Where a span's bar is on screen (viewport pixels)."""
    assert panel.data is not None
    now = panel.item.now
    x = (panel.data.start[lane] + panel.data.ends(now)[lane]) / 2
    scene = panel.view.mapViewToScene(QPointF(float(x), lane + 0.5))
    return panel.plot.mapFromScene(scene)


def test_show_run_draws_one_lane_per_span(panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world.run_id, 5)
    assert panel.data is not None
    assert panel.data.names[0] == "planner" and panel.data.depth.tolist() == [0, 1, 1, 1, 1]
    panel.grab()
    assert len(panel.item.paint_ms) > 0
    assert "5 spans" in panel.header.text() and "1 failed" in panel.header.text()


def test_clicking_a_span_selects_it_and_fills_the_details(panel: TimelinePanel, world: World,
                                                          qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world.run_id, 5)
    assert panel.data is not None
    panel.show_window(-0.001, float(panel.data.ends(panel.item.now).max()) + 0.001, 0, 5)
    lane = panel.data.lane_of[world.tool_span_id]
    panel.reveal(lane)
    qtbot.waitUntil(lambda: panel.plot.viewport().rect().contains(span_point(panel, lane)))
    qtbot.mouseMove(panel.plot.viewport(), span_point(panel, lane))
    qtbot.waitUntil(lambda: QToolTip.isVisible(), timeout=2000)
    assert "read_file" in QToolTip.text() and "took" in QToolTip.text()
    with qtbot.waitSignal(panel.span_selected, timeout=2000) as signal:
        qtbot.mouseClick(panel.plot.viewport(), Qt.MouseButton.LeftButton, pos=span_point(panel, lane))
    assert signal.args == [world.tool_span_id]
    assert panel.item.selected == lane
    qtbot.waitUntil(lambda: panel.details.view is not None, timeout=3000)
    assert panel.details.title.text() == "read_file"
    assert panel.details.title.textFormat() == Qt.TextFormat.PlainText


def test_html_looking_output_shows_literally(panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world.run_id, 5)
    panel.select_span(world.tool_span_id)
    qtbot.waitUntil(lambda: panel.details.view is not None, timeout=3000)
    assert panel.details.output.shown_text == "<html><a href='x'>not a link</a></html>"


def test_an_error_span_is_marked(panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world.run_id, 5)
    assert panel.data is not None
    lane = panel.data.lane_of[world.error_span_id]
    assert panel.data.status[lane] == ERROR
    image = panel.plot.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.width() * image.height())
    assert (pixels == QColor(ERROR_COLOUR).rgb()).sum() >= 4  # the red diamond beside the failed span
    panel.select_span(world.error_span_id)
    qtbot.waitUntil(lambda: panel.details.view is not None, timeout=3000)
    assert panel.details.error.isVisibleTo(panel.details)
    assert "pytest failed" in panel.details.error.text()
    assert "failed" in panel.tooltip(lane)


def test_tooltips_escape_agent_text(panel: TimelinePanel, world: World, services: Services,
                                    qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world.run_id, 5)
    AgentRuntime(native(services).store).start_span(world.run_id, "tool", "<b>bold</b> & <img src=x>")
    qtbot.waitUntil(lambda: panel.data is not None and len(panel.data) == 6, timeout=5000)
    assert panel.data is not None
    lane = panel.data.names.index("<b>bold</b> & <img src=x>")
    tip = panel.tooltip(lane)
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;img src=x&gt;" in tip and "<b>" not in tip


def test_a_new_span_appears_without_reselecting_the_run(panel: TimelinePanel, world: World,
                                                        services: Services, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world.run_id, 5)
    runtime = AgentRuntime(native(services).store)
    root = panel.data.ids[0] if panel.data is not None else None
    new = runtime.start_span(world.run_id, "tool", "grep", parent_span_id=root)
    qtbot.waitUntil(lambda: panel.data is not None and new in panel.data.lane_of, timeout=5000)
    assert panel.data is not None
    lane = panel.data.lane_of[new]
    assert panel.data.depth[lane] == 1 and panel.data.open[lane]
    runtime.finish_span(new, "ok", "found", input_tokens=7)
    qtbot.waitUntil(lambda: panel.data is not None and not panel.data.open[panel.data.lane_of[new]],
                    timeout=5000)
    assert panel.data.input_tokens[panel.data.lane_of[new]] == 7


def test_a_1000_span_run_shows(panel: TimelinePanel, world: World, services: Services, qtbot) -> None:  # type: ignore[no-untyped-def]
    runtime = AgentRuntime(native(services).store)
    run_id = runtime.start_run(world.agent_id, "big")
    now = time.time()
    rows = [dict(id=f"spn_bulk_{i:04d}", run_id=run_id, parent_span_id=None if i == 0 else "spn_bulk_0000",
                 kind="model" if i % 2 else "tool", name=f"step {i}", status="error" if i % 97 == 0 else "ok",
                 started_at=now + i * 0.01, ended_at=now + i * 0.01 + 0.005, attributes="{}")
             for i in range(1000)]
    with native(services).store.write_engine.begin() as conn:
        conn.execute(insert(sc.SpanRow), rows)
    shown(panel, qtbot, run_id, 1000)
    panel.fit()
    panel.grab()
    assert panel.item.paint_ms and max(panel.item.paint_ms) < 1000
    assert panel.data is not None and panel.data.depth.max() == 1


def test_f_fits_and_plus_minus_zoom(panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world.run_id, 5)
    panel.plot.setFocus()
    full = panel.view.viewRange()[0][1] - panel.view.viewRange()[0][0]
    qtbot.keyClick(panel.plot, Qt.Key.Key_Plus)
    qtbot.keyClick(panel.plot, Qt.Key.Key_Plus)
    zoomed = panel.view.viewRange()[0][1] - panel.view.viewRange()[0][0]
    assert zoomed < full * 0.3
    qtbot.keyClick(panel.plot, Qt.Key.Key_Minus)
    assert panel.view.viewRange()[0][1] - panel.view.viewRange()[0][0] > zoomed * 1.5
    qtbot.keyClick(panel.plot, Qt.Key.Key_F)
    assert panel.data is not None
    (x0, x1), (y0, y1) = panel.view.viewRange()
    start, end = panel.data.extent(panel.item.now)
    assert x0 <= start and x1 >= end * 0.98 and y0 <= 0 and y1 >= len(panel.data)


def test_select_span_before_the_run_loaded_is_applied_after(panel: TimelinePanel, world: World,
                                                            qtbot) -> None:  # type: ignore[no-untyped-def]
    panel.show_run(world.run_id)
    panel.select_span(world.model_span_id)
    qtbot.waitUntil(lambda: panel.data is not None and panel.item.selected >= 0, timeout=5000)
    assert panel.data is not None and panel.data.ids[panel.item.selected] == world.model_span_id
    qtbot.waitUntil(lambda: panel.details.view is not None, timeout=3000)
    assert panel.details.sent.items.count() == 5  # what the model saw
    assert panel.details.tabs.isTabEnabled(4)


def test_huge_text_shows_the_first_200_kb_until_asked(services: Services, world: World,
                                                      qtbot) -> None:  # type: ignore[no-untyped-def]
    details = SpanDetails(services)
    qtbot.addWidget(details)
    span = services.source.span(world.tool_span_id)
    huge = "x" * (3 * SHOWN_CHARS)
    details.set_view(SpanView(span, "", "", huge, ()))
    assert len(details.output.shown_text) == SHOWN_CHARS
    assert details.output.show_all.isVisibleTo(details)
    details.output.show_all.click()
    assert details.output.shown_text == huge



def test_span_table_fetches_just_the_changed_rows_of_the_run(services: Services, world: World) -> None:
    runtime = AgentRuntime(native(services).store)
    other_run = runtime.start_run(world.agent_id, "another")
    other_span = runtime.start_span(other_run, "tool", "elsewhere")
    rows = native(services).span_table(world.run_id, [world.tool_span_id, other_span, "spn_missing"])
    assert rows.ids == [world.tool_span_id] and rows.names == ["read_file"]
    assert len(services.source.span_table(world.run_id)) == 5


class RecordingSource:
    """Any source but the native class (as a foreign one is): records each `span_table` request."""

    def __init__(self, inner: NativeSource) -> None:
        self._inner = inner
        self.requests: list[list[str] | None] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def span_table(self, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
        self.requests.append(None if span_ids is None else sorted(span_ids))
        return self._inner.span_table(run_id, span_ids)


def test_a_span_change_fetches_only_that_span_whatever_the_source(world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    source = NativeSource.open(str(world.path))
    recording = RecordingSource(source)
    services = Services.create(recording, coalesce_ms=10)  # type: ignore[arg-type]
    feed = TimelineFeed(services)
    try:
        feed.show(world.run_id)
        qtbot.waitUntil(lambda: feed.data is not None and not feed.busy, timeout=5000)
        assert recording.requests == [None]
        late = AgentRuntime(source.store).start_span(world.run_id, "tool", "late")
        qtbot.waitUntil(lambda: feed.data is not None and late in feed.data.lane_of, timeout=5000)
        assert recording.requests == [None, [late]]
    finally:
        services.close()
        source.close()


def test_a_missing_run_says_so(panel: TimelinePanel, qtbot) -> None:  # type: ignore[no-untyped-def]
    panel.show_run("run_missing")
    qtbot.waitUntil(lambda: "Could not load" in panel.header.text(), timeout=3000)
    assert "run_missing" in panel.header.text() and panel.data is None


@pytest.fixture
def vgxness(tmp_path: Path, qtbot) -> Iterator[tuple[Services, dict[str, str]]]:  # type: ignore[no-untyped-def]
    path = tmp_path / "vgxness.sqlite"
    ids = build_vgxness_fixture(path)
    source = open_source(str(path))
    services = Services.create(source)
    yield services, ids
    services.close()
    source.close()


def colour_box(panel: TimelinePanel, lane: int, colour: str) -> tuple[int, int]:
    """How many pixel columns and rows of `colour` there are around a lane's start."""
    assert panel.data is not None
    scene = panel.view.mapViewToScene(QPointF(float(panel.data.start[lane]), lane + 0.5))
    at = panel.plot.mapFromScene(scene)
    image = panel.plot.viewport().grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    box = image.copy(at.x() - 8, at.y() - 8, 17, 17)
    pixels = np.frombuffer(box.constBits(), dtype=np.uint32, count=17 * 17).reshape(17, 17)
    hit = pixels == QColor(colour).rgb()
    return int(hit.any(axis=0).sum()), int(hit.any(axis=1).sum())


def test_point_events_and_milestones_show_as_markers(vgxness: tuple[Services, dict[str, str]],
                                                     qtbot) -> None:  # type: ignore[no-untyped-def]
    services, ids = vgxness
    panel = TimelinePanel(services)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    panel.show_run(ids["run"])
    qtbot.waitUntil(lambda: panel.data is not None and not panel.feed.busy, timeout=5000)
    data = panel.data
    assert data is not None and data.points.all()  # vgxness keeps no durations: every span is an instant
    for span_id, kind, duration in ((ids["checkpoint"], "gate", "none: a milestone"),
                                    (ids["html_event"], "tool", "none: a point event")):
        lane = data.lane_of[span_id]
        assert data.kind_names[lane] == kind
        start = float(data.start[lane])
        panel.show_window(start - 1, start + 1, lane - 4, lane + 5)
        columns, rows = colour_box(panel, lane, SPAN_KIND_COLOURS[kind])
        assert columns >= 4 and rows >= 4  # a diamond, where a zero-length bar would be one column
        assert "an instant, at +" in panel.tooltip(lane) and "took" not in panel.tooltip(lane)
        panel.select_span(span_id)
        qtbot.waitUntil(lambda: panel.details.view is not None and panel.details.facts["Duration"].text()
                        == duration, timeout=3000)  # noqa: B023


def test_the_tokens_plot_gets_a_sample_a_pixel_column_of_what_is_in_view(qtbot) -> None:  # type: ignore[no-untyped-def]
    plot = TokensPlot(100)
    qtbot.addWidget(plot)
    plot.resize(800, 200)
    plot.show()
    qtbot.waitExposed(plot)
    rng = np.random.default_rng(2)
    t = np.concatenate(([0.0], np.sort(rng.uniform(0, 3600, 60_000))))
    tokens = np.concatenate(([0], np.cumsum(rng.integers(1, 900, 60_000))))
    plot.set_series(TokenSeries(t, tokens, tokens // 10, tokens * 1e-6))
    vb = plot.getPlotItem().vb
    for x0, x1 in ((0.0, 3600.0), (1000.0, 1400.0), (2000.0, 2400.0)):
        vb.setXRange(x0, x1, padding=0)
        x, y = plot.input_curve.getData()
        assert x is not None and y is not None
        assert len(x) <= vb.width() + 3 and x[0] <= x0 and x[-1] >= min(x1, t[-1])
        assert y[-1] == tokens[np.searchsorted(t, x[-1], side="right") - 1]
        low, high = vb.viewRange()[1]
        assert low <= y[0] and high >= tokens[np.searchsorted(t, x1, side="right") - 1]  # y fits the view


def curve_image(qtbot, make, x: np.ndarray, y: np.ndarray, view: tuple[float, float, float, float],  # type: ignore[no-untyped-def]
                background: str | None = None) -> QImage:
    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    plot.getPlotItem().hideAxis("left")
    plot.getPlotItem().hideAxis("bottom")
    plot.getPlotItem().hideButtons()
    if background is not None:
        set_background(plot, QColor(background))
    else:
        plot.setBackground(QColor("#ffffff"))
    plot.resize(500, 300)
    plot.show()
    qtbot.waitExposed(plot)
    item = make()
    plot.addItem(item)
    if isinstance(item, StepCurve):
        item.set_extent(x, y)  # as `TokensPlot.set_series` does
    item.setData(x, y)
    plot.getPlotItem().vb.setRange(xRange=view[:2], yRange=view[2:], padding=0)
    return plot.grab().toImage().convertToFormat(QImage.Format.Format_ARGB32)


def test_the_token_curves_draw_the_steps_and_fill_pyqtgraph_drew(qtbot) -> None:  # type: ignore[no-untyped-def]
    """`StepCurve` (one path and one polygon in device pixels) sets the pixels pyqtgraph's step
    curve (stepMode "left", filled to zero in 50-point chunks) set, dashes and all, zoomed in or out
    and with the curve running out of view on every side."""
    rng = np.random.default_rng(5)
    t = np.concatenate(([0.0], np.sort(rng.uniform(0, 100, 400))))
    y = np.concatenate(([0.0], np.cumsum(rng.integers(1, 50, 400)))).astype(np.float64)
    fill = QColor(COST_COLOUR)
    fill.setAlpha(40)
    for pen, level, brush in ((pg.mkPen("#5b8def", width=1), None, None),
                              (pg.mkPen("#e0a030", width=1, style=Qt.PenStyle.DashLine), 0.0, fill)):
        for view in ((0.0, 100.0, 0.0, y[-1]), (40.0, 45.0, y[160], y[190]), (-20.0, 130.0, -500.0, y[-1] * 1.5)):
            ours = curve_image(qtbot, lambda: StepCurve(pen, level, brush), t, y, view)  # noqa: B023
            theirs = curve_image(qtbot, lambda: pg.PlotCurveItem(
                pen=pen, stepMode="left", fillLevel=level, brush=brush, skipFiniteCheck=True), t, y, view)  # noqa: B023
            assert ours == theirs, (pen.style(), view)


def test_the_tokens_plot_draws_what_pyqtgraphs_curves_drew(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The whole tokens plot (the cost curve dashed and filled in its own view, beside the axis
    column) pixel for pixel as with pyqtgraph's step curves, zoomed out and far in."""
    rng = np.random.default_rng(2)
    t = np.concatenate(([0.0], np.sort(rng.uniform(0, 3.4e6, 50_000))))
    tokens = np.concatenate(([0], np.cumsum(rng.integers(1, 900, 50_000))))
    data = TokenSeries(t, tokens, tokens // 10, tokens * 1e-6)

    def make(pyqtgraphs: bool) -> TokensPlot:
        plot = TokensPlot(190)
        qtbot.addWidget(plot)
        plot.resize(1000, 220)
        plot.show()
        qtbot.waitExposed(plot)
        plot.apply_colours(QColor("#ffffff"), QColor("#202020"), QColor(32, 32, 32, 110))
        if pyqtgraphs:
            for name, view in (("input_curve", plot.getPlotItem().vb), ("output_curve", plot.getPlotItem().vb),
                               ("cost_curve", plot.cost_view)):
                ours = getattr(plot, name)
                theirs = pg.PlotCurveItem(pen=ours.opts["pen"], stepMode="left", fillLevel=ours.opts["fillLevel"],
                                          brush=ours.opts["fillBrush"], skipFiniteCheck=True)
                theirs.set_extent = theirs.set_bounds = lambda *args: None
                view.removeItem(ours)
                view.addItem(theirs)
                setattr(plot, name, theirs)
        plot.set_series(data, until=3.5e6)
        return plot

    ours, theirs = make(False), make(True)
    for start, width in ((0.0, 3.5e6), (1.6e6, 20.0), (1.6e6, 2000.0), (1.0e6, 7e4)):
        for plot in (ours, theirs):
            plot.getPlotItem().vb.setXRange(start, start + width, padding=0)
        assert ours.grab().toImage() == theirs.grab().toImage(), (start, width)


def test_an_opaque_plot_background_is_filled_into_each_frame_as_it_looked(qtbot) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(6)
    t = np.sort(rng.uniform(0, 10, 50))
    y = np.cumsum(rng.uniform(0, 1, 50))
    view = (0.0, 10.0, 0.0, float(y[-1]))
    plain = curve_image(qtbot, lambda: StepCurve(pg.mkPen("#5b8def")), t, y, view)
    filled = curve_image(qtbot, lambda: StepCurve(pg.mkPen("#5b8def")), t, y, view, background="#ffffff")
    assert filled == plain
    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    set_background(plot, QColor("#ffffff"))
    assert plot.viewport().testAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
    set_background(plot, QColor(255, 255, 255, 100))  # translucent: pyqtgraph's cached background again
    assert not plot.viewport().testAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
    assert plot.viewport().autoFillBackground()


class PaintCounter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.paints = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        self.paints += event.type() == QEvent.Type.Paint
        return False


def quiet(counters: Sequence[PaintCounter]) -> bool:
    """One pass of the event queue that paints nothing."""
    before = [c.paints for c in counters]
    QApplication.processEvents()
    return [c.paints for c in counters] == before


def test_a_pan_paints_each_plot_once_and_reuses_the_lane_labels(panel: TimelinePanel, world: World,
                                                                qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world.run_id, 5)
    assert panel.data is not None
    start, end = panel.data.extent(panel.item.now)
    step = (end - start) / 20
    panel.show_window(start + 5 * step, start + 10 * step, 0, 5)
    counters = [PaintCounter(), PaintCounter()]
    for counter, plot in zip(counters, (panel.plot, panel.tokens), strict=True):
        plot.viewport().installEventFilter(counter)
    # the new window settles (a paint can re-size the lane axis, which paints again) before counting
    qtbot.waitUntil(lambda: quiet(counters) and quiet(counters))
    for counter in counters:
        counter.paints = 0
    labels = panel.lanes._picture
    assert labels is not None
    # Running spans grow on a 200 ms tick, a repaint of its own; on a loaded machine the five pans
    # take long enough for a tick to land among them. Only the pans are counted here.
    panel.follow.timer.stop()
    for pans in range(1, 6):
        panel.view.translateBy(x=step)  # along time only: the lanes shown stay the same
        # each pan's paint is the event that proves the previous one did not paint twice
        qtbot.waitUntil(lambda: min(c.paints for c in counters) >= pans)  # noqa: B023
        assert [c.paints for c in counters] == [pans, pans]
    QApplication.processEvents()
    assert [c.paints for c in counters] == [5, 5]
    assert panel.lanes._picture is labels
    panel.view.translateBy(y=1.0)
    panel.plot.viewport().repaint()
    assert panel.lanes._picture is not labels


@pytest.mark.parametrize("following", [True, False])
def test_a_shorter_window_keeps_rows_readable(panel: TimelinePanel, world: World, qtbot,  # type: ignore[no-untyped-def]
                                              following: bool) -> None:
    """Shrinking the window must not squeeze the rows under the label threshold (it used to: the
    visible range stayed in data units, and a 13-row run said "zoom in to read their names")."""
    from agentdesk.gui.timeline.axes import MIN_LABEL_LANE_PX

    panel.resize(1400, 1000)  # wide enough for the details beside the plots
    shown(panel, qtbot, world.run_id, 5)
    qtbot.waitUntil(lambda: panel.view.height() > 600)
    panel.fit()
    if not following:
        panel.follow.stop_following()  # as after the operator panned
    top, bottom = panel.view.viewRange()[1]
    before_px = panel.view.height() / (bottom - top)
    panel.resize(1400, 420)
    qtbot.waitUntil(lambda: panel.view.height() < 300)
    top, bottom = panel.view.viewRange()[1]
    lane_px = panel.view.height() / (bottom - top)
    assert lane_px >= MIN_LABEL_LANE_PX
    if not following:
        assert lane_px == pytest.approx(before_px, rel=0.05)
