"""A growing run stays in view: while the timeline is fitted (F) or pinned to "now" (End), new spans get
lanes in view and the time axis extends; panning away stops following, End resumes. Waits on the
panel's state as the store grows, never on a clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World
from tests.gui.timeline.timeline_helpers import panel_showing

WAIT_MS = 8000


@pytest.fixture
def runtime(world: World) -> Iterator[AgentRuntime]:
    source = NativeSource.open(str(world.path))
    yield AgentRuntime(source.store)
    source.close()


def grow(rt: AgentRuntime, world: World, panel: TimelinePanel, qtbot: Any, count: int) -> None:
    """Another writer adds `count` finished tool spans; wait until the panel has laid them out."""
    assert panel.data is not None
    before = len(panel.data)
    for n in range(count):
        span = rt.start_span(world.run_id, "tool", f"step {before + n}")
        rt.finish_span(span, "ok", "done")
    qtbot.waitUntil(lambda: panel.data is not None and len(panel.data) == before + count, timeout=WAIT_MS)


def in_view(panel: TimelinePanel) -> bool:
    """Every lane and the run's whole time range are inside the visible range."""
    data, shown = panel.data, panel.item.data
    if data is None or shown is None:
        return False
    (left, right), (top, bottom) = panel.view.viewRange()
    x0, x1 = data.extent(panel.item.now)
    return left <= x0 and right >= x1 and top <= 0 and bottom >= len(shown)


def at_the_end(panel: TimelinePanel) -> bool:
    """The visible time range ends at the run's end and the last lane is in view (pinned to now)."""
    data, shown = panel.data, panel.item.data
    if data is None or shown is None:
        return False
    (_, right), (_, bottom) = panel.view.viewRange()
    return right >= data.extent(panel.item.now)[1] and bottom >= len(shown)


def wheel(panel: TimelinePanel, steps: int) -> None:
    """The operator turns the wheel over the left of the plot: a manual zoom away from the end."""
    viewport = panel.plot.viewport()
    where = QPointF(viewport.width() * 0.3, viewport.height() * 0.5)
    event = QWheelEvent(where, QPointF(viewport.mapToGlobal(where.toPoint())), QPoint(0, 0), QPoint(0, 120 * steps),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(viewport, event)


def test_a_fitted_view_follows_panning_stops_it_and_end_resumes(
        services: Services, world: World, runtime: AgentRuntime, qtbot: Any) -> None:
    panel = panel_showing(services, world.run_id, qtbot)
    qtbot.waitUntil(lambda: in_view(panel), timeout=WAIT_MS)
    grow(runtime, world, panel, qtbot, 30)
    qtbot.waitUntil(lambda: in_view(panel), timeout=WAIT_MS)

    wheel(panel, 3)
    assert not panel.following
    moved = panel.view.viewRange()
    grow(runtime, world, panel, qtbot, 5)
    assert panel.view.viewRange() == moved  # the operator's view stays where they put it

    panel.plot.setFocus()
    qtbot.keyClick(panel.plot, Qt.Key.Key_End)  # zoomed in: the window keeps its width and ends at now
    assert panel.following
    width = panel.view.viewRange()[0][1] - panel.view.viewRange()[0][0]
    grow(runtime, world, panel, qtbot, 30)
    qtbot.waitUntil(lambda: at_the_end(panel), timeout=WAIT_MS)
    assert panel.view.viewRange()[0][1] - panel.view.viewRange()[0][0] == pytest.approx(width, rel=0.05)

    qtbot.keyClick(panel.plot, Qt.Key.Key_F)  # the whole run again, and it keeps following
    grow(runtime, world, panel, qtbot, 10)
    qtbot.waitUntil(lambda: in_view(panel), timeout=WAIT_MS)


def test_selecting_a_span_in_view_keeps_following(services: Services, world: World, runtime: AgentRuntime,
                                                   qtbot: Any) -> None:
    """The demo selects the first approval's span (open, so it reaches now): it is in view and wide enough
    to see, so the run is still followed."""
    panel = panel_showing(services, world.run_id, qtbot)
    qtbot.waitUntil(lambda: in_view(panel), timeout=WAIT_MS)
    assert panel.data is not None
    panel.select_span(panel.data.ids[0])  # the open root span
    assert panel.following
    grow(runtime, world, panel, qtbot, 10)
    qtbot.waitUntil(lambda: in_view(panel), timeout=WAIT_MS)
