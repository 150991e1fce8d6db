"""The zoomed-out grid on a pan: copied out of a sheet drawn at the view's scale, as a fresh draw looks."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QImage

from agentdesk.gui.timeline.span_item import SpanItem
from agentdesk.store.analysis.layout.data import ERROR, TimelineData
from agentdesk.store.analysis.layout.overview import overview
from tests.gui.timeline.test_timeline_tools import lanes_table
from tests.gui.timeline.timeline_helpers import waterfall

DATA = TimelineData.from_table(lanes_table(20_000), t0=0.0)
DATA.status[::97] = ERROR  # failure markers over the grid: they are in the sheet too


def _plot(qtbot) -> tuple[pg.PlotWidget, SpanItem]:  # type: ignore[no-untyped-def]
    plot, item = waterfall(DATA, qtbot)
    plot.grab()
    return plot, item


def _pixels(plot: pg.PlotWidget) -> np.ndarray:
    image = plot.grab().toImage().convertToFormat(QImage.Format.Format_ARGB32)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, :image.width() * 4].reshape(image.height(), image.width(), 4).copy()


def _red(pixels: np.ndarray) -> np.ndarray:
    """Where the failure markers are (ARGB32 in memory is B, G, R, A)."""
    return (pixels[:, :, 2] > 200) & (pixels[:, :, 1] < 100) & (pixels[:, :, 0] < 100)


def _grown(mask: np.ndarray, by: int) -> np.ndarray:
    """The mask and every pixel up to `by` pixels from it."""
    out = mask.copy()
    for dy in range(-by, by + 1):
        rows = np.roll(mask, dy, axis=0)
        for dx in range(-by, by + 1):
            out |= np.roll(rows, dx, axis=1)
    return out


def test_a_pan_copies_the_grid_from_one_sheet_and_looks_as_a_fresh_draw(qtbot) -> None:  # type: ignore[no-untyped-def]
    plot, item = _plot(qtbot)
    view = plot.getPlotItem().vb
    sheets = set()
    for i in range(8):
        view.translateBy(x=len(DATA) * 0.013 * (-1) ** (i // 4), y=3.7)
        moved = _pixels(plot)
        assert item._sheet is not None, "a pan at one scale copies the grid"
        sheets.add(id(item._sheet))
        fresh, _ = _plot(qtbot)
        (x0, x1), (y0, y1) = view.viewRange()
        fresh.getPlotItem().vb.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)
        expected = _pixels(fresh)
        differ = (moved != expected).any(axis=2)
        assert differ.mean() < 0.03, "at most cell edges and markers half a pixel over"
        mine, theirs = _red(moved), _red(expected)
        assert abs(int(mine.sum()) - int(theirs.sum())) < 0.2 * theirs.sum(), "as many markers"
        # one marker per 10 px cell: which one a cell shows follows the cells, and a sheet keeps
        # those of the frame it was drawn at (a fresh draw swaps them as markers cross cells)
        assert not (mine & ~_grown(theirs, 10)).any(), "the markers of the same spans, within a cell"
    assert len(sheets) == 1, "the pan stays within the one sheet drawn for it"
    assert _red(moved).sum() > 100, "and the failure markers are drawn over it"


def test_a_zoom_draws_straight_and_new_data_drops_the_sheet(qtbot) -> None:  # type: ignore[no-untyped-def]
    plot, item = _plot(qtbot)
    view = plot.getPlotItem().vb
    view.translateBy(x=100.0)
    plot.grab()
    assert item._sheet is not None
    view.scaleBy(x=0.9)
    plot.grab()
    assert item._sheet is None, "a new scale draws from the image, not into a sheet"
    view.translateBy(x=100.0)
    plot.grab()
    assert item._sheet is not None
    item.set_overview(overview(DATA, float(len(DATA))))
    assert item._sheet is None
    plot.grab()
    plot.grab()
    assert item._sheet is not None
    item.refresh()  # the data changed in place: its failure marks with it
    assert item._sheet is None
