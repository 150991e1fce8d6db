"""Timeline test set-ups shared by the timeline GUI tests: a panel showing the world's run, and a
bare waterfall plot holding one span item."""

from __future__ import annotations

import pyqtgraph as pg

from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.gui.timeline.span_item import SpanItem
from agentdesk.model.services import Services
from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.analysis.layout.overview import overview


def panel_showing(services: Services, run_id: str, qtbot, spans: int = 5) -> TimelinePanel:  # type: ignore[no-untyped-def]
    """A 1200x700 panel shown, with the run's `spans` spans laid out."""
    panel = TimelinePanel(services)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    panel.show_run(run_id)
    qtbot.waitUntil(lambda: panel.data is not None and len(panel.data) == spans, timeout=5000)
    return panel


def waterfall(data: TimelineData, qtbot) -> tuple[pg.PlotWidget, SpanItem]:  # type: ignore[no-untyped-def]
    """An 800x500 plot of one span item showing all of `data` (its grid too), lanes downwards."""
    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    plot.resize(800, 500)
    plot.getPlotItem().vb.invertY(True)
    item = SpanItem()
    plot.addItem(item)
    item.set_data(data, float(len(data)))
    item.set_overview(overview(data, float(len(data))))
    plot.getPlotItem().vb.setRange(xRange=(0, len(data)), yRange=(0, len(data)), padding=0)
    plot.show()
    return plot, item
