"""The timeline's axes are drawn once per change and copied otherwise: the copies must stay right."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter

from agentdesk.gui.timeline.axes import BlankAxis, CompactAxis, DirectAxis, TimeAxis
from agentdesk.gui.timeline.drawing import StaticTexts, colour_axes
from agentdesk.gui.timeline.tokens import TokensPlot
from agentdesk.store.analysis.layout.data import TokenSeries


def axes_plot(qtbot, x: tuple[float, float], y: tuple[float, float]) -> pg.PlotWidget:  # type: ignore[no-untyped-def]
    plot = pg.PlotWidget(axisItems={"bottom": TimeAxis("bottom"), "left": CompactAxis("left"),
                                    "right": BlankAxis("right")})
    qtbot.addWidget(plot)
    plot.getPlotItem().showAxis("right")
    bottom, left, right = axes(plot)
    left.setWidth(60)  # as the timeline's are: pyqtgraph widens a free axis to the widest label seen
    right.setWidth(40)
    bottom.setHeight(36)
    plot.getPlotItem().hideButtons()
    plot.resize(640, 300)
    plot.show()
    qtbot.waitExposed(plot)
    plot.setRange(xRange=x, yRange=y, padding=0)
    return plot


def image(plot: pg.PlotWidget) -> QImage:
    return plot.grab().toImage().convertToFormat(QImage.Format.Format_ARGB32)


def axes(plot: pg.PlotWidget) -> list[DirectAxis]:
    return [plot.getPlotItem().getAxis(name) for name in ("bottom", "left", "right")]


def test_axes_after_pans_zooms_colours_and_a_resize_equal_a_fresh_render(qtbot) -> None:  # type: ignore[no-untyped-def]
    moved = axes_plot(qtbot, (0.0, 100.0), (0.0, 5000.0))
    image(moved)  # the first copies are kept...
    for x, y in (((10.0, 70.0), (0.0, 4000.0)), ((3000.0, 9000.0), (1e5, 3e6)), ((0.5, 0.9), (2.0, 3.0))):
        moved.setRange(xRange=x, yRange=y, padding=0)
        image(moved)  # ...and replaced on every change of range
    colour_axes(moved.getPlotItem(), ("bottom", "left", "right"), QColor("#c03030"), QColor("#3030c0"))
    image(moved)
    moved.resize(500, 260)
    image(moved)
    moved.resize(640, 300)
    image(moved)
    moved.setRange(xRange=(120.0, 250.0), yRange=(1e4, 2e4), padding=0)
    fresh = axes_plot(qtbot, (120.0, 250.0), (1e4, 2e4))
    colour_axes(fresh.getPlotItem(), ("bottom", "left", "right"), QColor("#c03030"), QColor("#3030c0"))
    after, expected = image(moved), image(fresh)
    assert after == expected
    # and it is a picture of ticks at all: the time axis shows labels in the text colour
    assert any(QColor(after.pixel(x, y)).red() > 150 and QColor(after.pixel(x, y)).blue() < 100
               for x in range(after.width()) for y in range(after.height() - 30, after.height()))


def test_an_unchanged_axis_is_copied_not_drawn_again(qtbot) -> None:  # type: ignore[no-untyped-def]
    plot = axes_plot(qtbot, (0.0, 100.0), (0.0, 50.0))
    image(plot)
    bottom, left, right = axes(plot)
    renders = [a.renders for a in (bottom, left, right)]
    plot.setXRange(5.0, 105.0, padding=0)  # along x: the left axis's range is set again, unchanged
    image(plot)
    assert [bottom.renders, left.renders, right.renders] == [renders[0] + 1, renders[1], renders[2]]
    plot.setYRange(10.0, 60.0, padding=0)  # along y: the blank right axis has nothing that moves
    image(plot)
    assert [left.renders, right.renders] == [renders[1] + 1, renders[2]]


def series() -> TokenSeries:
    rng = np.random.default_rng(7)
    t = np.concatenate(([0.0], np.sort(rng.uniform(0, 3600, 20_000))))
    tokens = np.concatenate(([0], np.cumsum(rng.integers(1, 900, 20_000))))
    return TokenSeries(t, tokens, tokens // 10, tokens * 1e-6)


def test_a_pan_keeps_the_tokens_y_axes_while_the_curves_fit(qtbot) -> None:  # type: ignore[no-untyped-def]
    plot = TokensPlot(100)
    qtbot.addWidget(plot)
    plot.resize(800, 200)
    plot.show()
    qtbot.waitExposed(plot)
    data = series()
    plot.set_series(data)
    vb = plot.getPlotItem().vb
    vb.setXRange(1000.0, 1400.0, padding=0)
    plot.grab()
    left, right = plot.getPlotItem().getAxis("left"), plot.getPlotItem().getAxis("right")
    assert isinstance(left, DirectAxis) and isinstance(right, DirectAxis)
    renders = left.renders, right.renders
    for step in range(1, 6):  # small steps along a rising curve: what is in view still fits
        vb.setXRange(1000.0 + step, 1400.0 + step, padding=0)
        plot.grab()
    assert (left.renders, right.renders) == renders
    refits = 0
    for step in range(0, 2000, 50):  # far along it: refitted, and everything in view always fits
        vb.setXRange(1000.0 + step, 1400.0 + step, padding=0)
        plot.grab()
        x0, x1 = vb.viewRange()[0]
        i0, i1 = (int(np.searchsorted(data.t, x, side="right")) - 1 for x in (x0, x1))
        low, high = vb.viewRange()[1]
        assert low <= data.output_tokens[i0] and data.input_tokens[i1] <= high
        assert data.input_tokens[i1] - data.output_tokens[i0] >= 0.45 * (high - low)  # not a sliver
        cost_low, cost_high = plot.cost_view.viewRange()[1]
        assert cost_low <= data.cost[i0] and data.cost[i1] <= cost_high
        refits = left.renders - renders[0]
    assert 0 < refits < 40


def texts_image(texts: StaticTexts, font: QFont, width: int) -> QImage:
    out = QImage(400, 60, QImage.Format.Format_ARGB32)
    out.fill(QColor("#ffffff"))
    p = QPainter(out)
    try:
        p.setFont(font)
        p.setPen(QColor("#000000"))
        texts.start(font)
        metrics = QFontMetrics(font)
        p.drawStaticText(QPointF(2, 2), texts.fitted("read_file payments.py  1.20 s", width, metrics))
        p.drawStaticText(QPointF(2, 30), texts.text("▸"))
    finally:
        p.end()
    return out


def test_laid_out_labels_follow_a_font_change_and_elide_as_qt_does(qtbot) -> None:  # type: ignore[no-untyped-def]
    small, big = QFont(), QFont()
    small.setPixelSize(11)
    big.setPixelSize(17)
    kept = StaticTexts()
    texts_image(kept, small, 120)
    after = texts_image(kept, big, 120)  # the same texts, another font: laid out again
    assert after == texts_image(StaticTexts(), big, 120)
    assert after != texts_image(StaticTexts(), small, 120)
    metrics = QFontMetrics(big)
    label = "read_file payments.py  1.20 s"
    assert kept.fitted(label, 60, metrics).text() == metrics.elidedText(label, Qt.TextElideMode.ElideRight, 60)
    assert kept.fitted(label, 1000, metrics).text() == label


def test_zoomed_out_lane_column_is_redrawn_only_when_its_count_changes(services, world, qtbot) -> None:  # type: ignore[no-untyped-def]
    from tests.gui.timeline.timeline_helpers import panel_showing

    panel = panel_showing(services, world.run_id, qtbot)
    panel.follow.timer.stop()
    panel.view.setLimits(yMin=None, yMax=None, minYRange=None)  # five rows zoomed out as a big run's
    panel.show_window(0.0, 10.0, 0.0, 400.0)  # rows a pixel tall: the column shows the summary
    panel.plot.viewport().repaint()
    summary = panel.lanes._picture
    assert summary is not None
    panel.view.translateBy(y=-0.3)  # the same five rows in view
    panel.plot.viewport().repaint()
    assert panel.lanes._picture is summary
    panel.view.translateBy(y=3.0)  # now fewer of them: "3 of 5 spans here"
    panel.plot.viewport().repaint()
    assert panel.lanes._picture is not summary
    after = panel.plot.grab().toImage()
    panel.lanes._picture = None  # a fresh render of the same view
    assert panel.plot.grab().toImage() == after


def pyqtgraph_render(axis: DirectAxis) -> QImage:
    """The axis drawn by pyqtgraph's own `generateDrawSpecs` and `drawPicture`, as `_render` lays it out."""
    rect = axis.boundingRect()
    out = QImage(int(np.ceil(rect.width())), int(np.ceil(rect.height())), QImage.Format.Format_ARGB32_Premultiplied)
    out.fill(Qt.GlobalColor.transparent)
    p = QPainter(out)
    try:
        p.translate(-rect.topLeft())
        p.setFont(axis.style["tickFont"] or QFont())
        specs = axis.generateDrawSpecs(p)
        if specs is not None:
            axis.drawPicture(p, *specs)
    finally:
        p.end()
    return out


def test_the_axes_draw_what_pyqtgraph_draws_at_any_range(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The axes' own drawing (one call per tick level, label sizes remembered) is pixel for pixel
    pyqtgraph's, with the same tick values, over ranges from milliseconds to months."""
    plot = axes_plot(qtbot, (0.0, 10.0), (0.0, 10.0))
    bottom, left, _right = axes(plot)
    colour_axes(plot.getPlotItem(), ("left", "bottom"), QColor("#202020"), QColor(32, 32, 32, 110))
    rng = np.random.default_rng(11)
    for _ in range(40):
        start, width = rng.uniform(-1e6, 4e6), 10 ** rng.uniform(-3, 7)
        plot.setRange(xRange=(start, start + width), yRange=(start * 1e-3, (start + width) * 1e-3), padding=0)
        for axis in (bottom, left):
            size = axis.boundingRect().width() if axis is bottom else axis.boundingRect().height()
            assert axis.tickValues(*axis.range, size) == pg.AxisItem.tickValues(axis, *axis.range, size)
            rect = axis.boundingRect()
            mine = axis._render(rect, 1.0, axis.style["tickFont"] or QFont()).toImage()
            theirs = pyqtgraph_render(axis)
            assert mine.convertToFormat(theirs.format()) == theirs, (axis.orientation, start, width)


def test_a_level_or_upright_line_is_filled_as_the_pixels_drawLine_sets() -> None:
    from agentdesk.gui.timeline.drawing import draw_hv_line

    rng = np.random.default_rng(3)
    pen = pg.mkPen(QColor(0, 0, 0, 110))
    for _ in range(200):
        x0, y0 = rng.uniform(1, 30), rng.uniform(1, 30)
        if rng.random() < 0.3:
            x0, y0 = float(round(x0)), float(round(y0)) + rng.choice([0.0, 0.5])
        length = rng.uniform(-25, 25)
        x1, y1 = (x0 + length, y0) if rng.random() < 0.5 else (x0, y0 + length)
        images = []
        for filled in (True, False):
            out = QImage(60, 60, QImage.Format.Format_ARGB32_Premultiplied)
            out.fill(0)
            p = QPainter(out)
            if filled:
                draw_hv_line(p, pen, x0, y0, x1, y1)
            else:
                p.setPen(pen)
                p.drawLine(QPointF(x0, y0), QPointF(x1, y1))
            p.end()
            images.append(out)
        assert images[0] == images[1], (x0, y0, x1, y1)


def test_an_empty_run_shows_no_negative_tokens_or_cost(qtbot) -> None:  # type: ignore[no-untyped-def]
    plot = TokensPlot(100)
    qtbot.addWidget(plot)
    plot.resize(600, 160)
    plot.show()
    plot.set_series(None)
    assert plot.getPlotItem().vb.viewRange()[1][0] >= 0 and plot.cost_view.viewRange()[1][0] >= 0
