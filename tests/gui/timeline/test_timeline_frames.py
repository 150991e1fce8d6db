"""Pan and zoom frames reuse what did not change: the reused pixels must be the ones a fresh draw gives."""

from __future__ import annotations

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QGraphicsItem, QGraphicsTextItem

from agentdesk.gui.timeline.panel import TimelinePanel
from tests.gui.timeline.timeline_helpers import panel_showing


def opened(services, world, qtbot) -> TimelinePanel:  # type: ignore[no-untyped-def]
    panel = panel_showing(services, world.run_id, qtbot)
    panel.follow.timer.stop()
    panel.view.setLimits(yMin=None, yMax=None, minYRange=None)
    return panel


def lanes_image(panel: TimelinePanel) -> QImage:
    panel.plot.viewport().repaint()
    rect = panel.lanes.sceneBoundingRect().toAlignedRect()
    return panel.plot.grab(rect).toImage().convertToFormat(QImage.Format.Format_ARGB32)


def test_a_vertical_pan_copies_its_labels_out_of_a_taller_sheet(services, world, qtbot) -> None:  # type: ignore[no-untyped-def]
    panel = opened(services, world, qtbot)
    lanes = panel.lanes
    panel.show_window(0.0, 10.0, -0.5, 2.5)  # three rows in view, tall enough for their names
    lanes_image(panel)
    rect = lanes.mapRectFromParent(lanes.geometry())
    top, bottom = panel.view.viewRange()[1]
    lane_px = rect.height() / (bottom - top)
    renders = lanes.renders
    for _ in range(4):  # whole-pixel steps down: a copy must be exactly what a fresh draw shows
        panel.view.translateBy(y=3.0 / lane_px)
        copied = lanes_image(panel)
        sheet = lanes._sheet
        lanes._sheet = lanes._picture = None
        assert lanes_image(panel) == copied
        lanes._sheet = sheet
    # the first step draws the sheet (a pan at this row height); the other three only copy it
    assert lanes.renders - renders == 1 + 4
    panel.zoom(0.8)  # another row height: drawn afresh, just the rows in view
    before = lanes.renders
    lanes_image(panel)
    assert lanes.renders == before + 1
    assert lanes._sheet is not None and lanes._sheet[1] == panel.view.viewRange()[1][0]


def test_plot_titles_and_legend_labels_are_kept_as_pixmaps(services, world, qtbot) -> None:  # type: ignore[no-untyped-def]
    panel = opened(services, world, qtbot)
    for plot in (panel.plot, panel.tokens):
        texts = [item for item in plot.scene().items() if isinstance(item, QGraphicsTextItem)]
        assert texts
        assert all(item.cacheMode() == QGraphicsItem.CacheMode.DeviceCoordinateCache for item in texts)


def test_a_steady_pan_along_rising_tokens_seldom_refits_the_y_axes(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Each way along the curve, 5 % of the window a frame (as a drag does): refitted now and then,
    never clipping what is in view nor leaving it a sliver of the range."""
    import numpy as np

    from agentdesk.gui.timeline.axes import DirectAxis
    from agentdesk.gui.timeline.tokens import KEEP_FILL, TokensPlot
    from agentdesk.store.analysis.layout.data import TokenSeries

    plot = TokensPlot(120)
    qtbot.addWidget(plot)
    plot.resize(800, 200)
    plot.show()
    qtbot.waitExposed(plot)
    rng = np.random.default_rng(5)
    t = np.concatenate(([0.0], np.sort(rng.uniform(0, 3600, 20_000))))
    tokens = np.concatenate(([0], np.cumsum(rng.integers(1, 900, 20_000))))
    data = TokenSeries(t, tokens, tokens // 10, tokens * 1e-6)
    plot.set_series(data)
    vb = plot.getPlotItem().vb
    right = plot.getPlotItem().getAxis("right")  # the cost axis: cost alone spans a narrow range
    assert isinstance(right, DirectAxis)
    start, width = 1000.0, 100.0
    vb.setXRange(start, start + width, padding=0)
    plot.grab()
    renders = right.renders
    for step in [*range(1, 41), *range(39, -1, -1)]:
        vb.setXRange(start + step * width * 0.05, start + width + step * width * 0.05, padding=0)
        plot.grab()
        x0, x1 = vb.viewRange()[0]
        i0, i1 = (int(np.searchsorted(data.t, x, side="right")) - 1 for x in (x0, x1))
        low, high = vb.viewRange()[1]
        assert low <= data.output_tokens[i0] and data.input_tokens[i1] <= high
        assert data.input_tokens[i1] - data.output_tokens[i0] >= KEEP_FILL * (high - low)
        cost_low, cost_high = plot.cost_view.viewRange()[1]
        assert cost_low <= data.cost[i0] and data.cost[i1] <= cost_high
    # with even room only (8 % each side) this pan refitted on 37 of its 80 frames; now 11
    assert right.renders - renders <= 16
