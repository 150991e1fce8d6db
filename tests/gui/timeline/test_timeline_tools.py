"""The timeline's tools on a real store: minimap, critical path (P), find bar (Ctrl+F, F3), first spans first."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor

from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.model.services import Services
from agentdesk.model.timeline import feed as feed_module
from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.readmodel import SpanTable
from tests.gui.conftest import World


@pytest.fixture
def panel(services: Services, qtbot) -> TimelinePanel:  # type: ignore[no-untyped-def]
    widget = TimelinePanel(services)
    qtbot.addWidget(widget)
    widget.resize(1200, 700)
    widget.show()
    return widget


def shown(panel: TimelinePanel, qtbot, world: World) -> None:  # type: ignore[no-untyped-def]
    panel.show_run(world.run_id)
    qtbot.waitUntil(lambda: panel.feed.complete and panel.minimap.overview is not None, timeout=5000)


def test_the_minimap_shows_the_visible_window_and_dragging_it_moves_the_waterfall(
        panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world)
    assert panel.minimap.overview is not None and panel.minimap.overview.lanes == 5
    (x0, x1), _ = panel.view.viewRange()
    assert panel.minimap.shown == pytest.approx((x0, x1))
    panel.show_window(x0, x0 + (x1 - x0) / 4, 0, 5)  # zoom in: the rectangle narrows with it
    qtbot.waitUntil(lambda: panel.minimap.shown[1] - panel.minimap.shown[0] == pytest.approx((x1 - x0) / 4))
    start, end = panel.minimap.shown
    grab = QPoint(int(panel.minimap.x_of((start + end) / 2)), panel.minimap.height() // 2)
    qtbot.mousePress(panel.minimap, Qt.MouseButton.LeftButton, pos=grab)
    qtbot.mouseMove(panel.minimap, grab + QPoint(120, 0))
    qtbot.mouseRelease(panel.minimap, Qt.MouseButton.LeftButton, pos=grab + QPoint(120, 0))
    (y0, y1), _ = panel.view.viewRange()
    assert y0 > start and y1 - y0 == pytest.approx(end - start)  # moved right, same width


def test_key_p_highlights_the_critical_path_lists_it_and_names_it_in_the_header(
        panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world)
    panel.plot.setFocus()
    qtbot.keyClick(panel.plot, Qt.Key.Key_P)
    qtbot.waitUntil(lambda: panel.critical.path is not None, timeout=5000)
    assert panel.critical.path is not None and panel.data is not None
    on_path = {panel.data.ids[lane] for lane in panel.critical.path.lanes.tolist()}
    assert panel.data.ids[0] in on_path  # the root agent spans the run
    assert panel.item.path_lanes is not None
    assert set(panel.item.path_lanes.tolist()) == set(panel.critical.path.lanes.tolist())
    assert re.search(r"critical path: \d+ spans?, \d+ % in ", panel.header.text())  # the CLI's words
    assert panel.side.currentWidget() is panel.path_panel
    assert panel.path_panel.isVisible() and panel.path_panel.table.topLevelItemCount() == len(panel.critical.path)
    assert len(panel.minimap.path) == len(panel.critical.path)
    share = [float(panel.path_panel.table.topLevelItem(i).text(3).rstrip(" %"))
             for i in range(panel.path_panel.table.topLevelItemCount())]
    assert sum(share) <= 100.5 and all(s >= 0 for s in share)
    row = panel.path_panel.table.topLevelItem(len(panel.critical.path) - 1)
    panel.path_panel._clicked(row)  # a click on a row selects that span
    assert panel.selected_id == panel.data.ids[int(panel.critical.path.lanes[-1])]
    qtbot.keyClick(panel.plot, Qt.Key.Key_P)
    assert panel.critical.path is None and panel.item.path_lanes is None and not panel.side.isTabVisible(1)
    assert "critical path" not in panel.header.text()


def test_ctrl_f_finds_spans_and_f3_steps_through_them(panel: TimelinePanel, world: World,
                                                      qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world)
    panel.plot.setFocus()
    qtbot.keyClick(panel.plot, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert panel.find_bar.isVisible() and panel.find_bar.edit.hasFocus()
    qtbot.keyClicks(panel.find_bar.edit, "kind:tool")
    qtbot.keyClick(panel.find_bar.edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: panel.finding.matches is not None, timeout=5000)
    assert panel.finding.matches is not None and panel.data is not None
    found = [panel.data.ids[lane] for lane in panel.finding.matches.lanes.tolist()]
    assert set(found) == {world.tool_span_id, world.error_span_id}
    assert panel.find_bar.count.text() == "1 of 2 matches"
    assert panel.selected_id == found[0]  # the first match is selected and shown
    assert panel.item.match_lanes is not None and len(panel.minimap.matches) == 2
    qtbot.keyClick(panel.find_bar.edit, Qt.Key.Key_F3)
    assert panel.selected_id == found[1] and panel.find_bar.count.text() == "2 of 2 matches"
    qtbot.keyClick(panel.plot, Qt.Key.Key_F3, Qt.KeyboardModifier.ShiftModifier)
    assert panel.selected_id == found[0]
    qtbot.keyClick(panel.find_bar.edit, Qt.Key.Key_F3)
    qtbot.keyClick(panel.find_bar.edit, Qt.Key.Key_F3)  # wraps round
    assert panel.selected_id == found[0]


def test_a_bad_query_says_why_in_one_sentence_and_escape_clears_the_search(
        panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world)
    panel.find_bar.open_bar()
    panel.find_spans("status:error")
    qtbot.waitUntil(lambda: panel.finding.matches is not None, timeout=5000)
    assert panel.finding.matches is not None and len(panel.finding.matches.lanes) == 1
    panel.find_spans("kind:nonsense")
    qtbot.waitUntil(lambda: panel.finding.matches is None and panel.find_bar.count.text() not in ("", "searching…"),
                    timeout=5000)
    message = panel.find_bar.count.text()
    assert message.endswith(".") and "\n" not in message and "Traceback" not in message
    assert panel.item.match_lanes is None
    panel.find_spans("status:error")
    qtbot.waitUntil(lambda: panel.finding.matches is not None, timeout=5000)
    qtbot.keyClick(panel.find_bar.edit, Qt.Key.Key_Escape)
    assert not panel.find_bar.isVisible() and panel.finding.matches is None and panel.item.match_lanes is None


def test_a_big_run_shows_its_first_spans_then_all_of_them(services: Services, world: World, qtbot,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(feed_module, "FIRST_SPANS", 2)
    feed = feed_module.TimelineFeed(services)
    seen: list[tuple[int, int]] = []
    feed.changed.connect(lambda first, ids: seen.append((len(feed.data or ()), feed.data.total if feed.data else 0)))
    feed.show(world.run_id)
    qtbot.waitUntil(lambda: feed.complete, timeout=5000)
    # the first spans know only that there are more (a count of all would wait on the whole index)
    assert seen[0] == (2, 3) and seen[-1] == (5, 5)


def lanes_table(n: int) -> SpanTable:
    """A root with n - 1 consecutive tool calls under it: many lanes, one second each."""
    ids = [f"s{i}" for i in range(n)]
    starts = [0.0] + [float(i) for i in range(1, n)]
    ends = [float(n)] + [float(i) + 0.9 for i in range(1, n)]
    return SpanTable(ids, [None] + ["s0"] * (n - 1), ["agent"] + ["tool"] * (n - 1), ids, ["ok"] * n,
                     starts, ends, [0] * n, [0] * n, [0.0] * n)


def test_zoomed_out_the_waterfall_draws_the_overview_grid_and_still_shows_every_row(
        qtbot) -> None:  # type: ignore[no-untyped-def]
    from tests.gui.timeline.timeline_helpers import waterfall

    data = TimelineData.from_table(lanes_table(20_000), t0=0.0)
    plot, item = waterfall(data, qtbot)
    image = plot.grab().toImage()
    assert item._grids, "zoomed out, the grid is drawn"
    tool = QColor("#000000")
    from agentdesk.gui.shared.palette import SPAN_KIND_COLOURS

    tool = QColor(SPAN_KIND_COLOURS["tool"])
    hits = sum(1 for x in range(0, image.width(), 4) for y in range(0, image.height(), 4)
               if image.pixelColor(x, y).rgb() == tool.rgb())
    assert hits > 20  # the diagonal of tool calls is there, not sampled away
    rows = {y for x in range(image.width()) for y in range(0, image.height())
            if image.pixelColor(x, y).rgb() == tool.rgb()}
    assert len(rows) > 200  # and it runs the whole height (pooled, not sampled)
    item.set_path(np.array([0, 10_000]))  # the critical path fades the rest: spans, not the grid
    plot.grab()
    assert item.path_lanes is not None


def label_point(panel: TimelinePanel, row: int) -> QPoint:
    """Where a row's disclosure mark is in the lane labels (viewport pixels)."""
    from PySide6.QtCore import QPointF

    axis = panel.lanes
    rect = axis.mapRectFromParent(axis.geometry())
    top, bottom = panel.view.viewRange()[1]
    lane_px = rect.height() / (bottom - top)
    y = rect.top() + (row + 0.5 - top) * lane_px
    return panel.plot.mapFromScene(axis.mapToScene(QPointF(axis.disclosure_x(row) + 4, y)))


def test_collapsing_a_sub_tree_hides_its_spans_and_a_click_on_its_mark_shows_them(
        panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world)
    assert panel.rows is not None and len(panel.rows) == 5  # a small run opens with everything shown
    panel.select_span(panel.data.ids[0])  # type: ignore[union-attr]
    panel.plot.setFocus()
    qtbot.keyClick(panel.plot, Qt.Key.Key_Left)  # collapse the root
    assert panel.rows is not None and len(panel.rows) == 1 and panel.shown is not None and len(panel.shown) == 1
    assert panel.item.folded is not None and int(panel.item.folded[0]) == 4
    assert panel.lanes.row_at(-1) == -1
    panel.grab()  # draws the collapsed row, the "+4" beside its name
    assert panel.item.painted[1] == 5  # one row, standing for all five spans
    qtbot.mouseClick(panel.plot.viewport(), Qt.MouseButton.LeftButton, pos=label_point(panel, 0))
    assert panel.rows is not None and len(panel.rows) == 5 and panel.rows.all_shown
    qtbot.keyClick(panel.plot, Qt.Key.Key_Left)
    assert len(panel.rows) == 1
    qtbot.keyClick(panel.plot, Qt.Key.Key_Right)
    assert len(panel.rows) == 5


def test_f3_onto_a_match_in_a_collapsed_sub_tree_expands_its_ancestors(
        panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world)
    assert panel.data is not None
    panel.set_collapsed(0, True)
    assert panel.rows is not None and len(panel.rows) == 1
    panel.find_bar.open_bar()
    panel.find_spans("kind:tool")
    qtbot.waitUntil(lambda: panel.finding.matches is not None, timeout=5000)
    assert panel.finding.matches is not None
    target = panel.data.ids[int(panel.finding.matches.lanes[0])]
    assert panel.selected_id == target  # the first match was stepped onto
    lane = panel.data.lane_of[target]
    assert panel.rows.visible(lane) and len(panel.rows) == 5  # its collapsed ancestor opened
    assert panel.item.selected == panel.rows.row(lane)
    panel.set_collapsed(0, True)  # fold it again: the matches mark the collapsed row
    assert panel.item.match_lanes is not None and panel.item.match_lanes.tolist() == [0]
    qtbot.keyClick(panel.find_bar.edit, Qt.Key.Key_F3)
    assert panel.rows is not None and len(panel.rows) == 5
    assert panel.selected_id == panel.data.ids[int(panel.finding.matches.lanes[1])]


def test_the_critical_path_and_the_minimap_still_work_with_a_collapsed_sub_tree(
        panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world)
    assert panel.data is not None
    panel.set_collapsed(0, True)
    panel.toggle_critical_path()
    qtbot.waitUntil(lambda: panel.critical.path is not None, timeout=5000)
    assert panel.critical.path is not None and len(panel.critical.path) >= 2
    assert panel.item.path_lanes is not None and panel.item.path_lanes.tolist() == [0]  # all in the one row
    assert len(panel.minimap.path) == len(panel.critical.path)  # the minimap marks every span of it
    assert panel.minimap.overview is not None and panel.minimap.overview.lanes == 5  # the whole run
    panel.grab()
    deep = int(panel.critical.path.lanes[-1])
    panel.path_panel._clicked(panel.path_panel.table.topLevelItem(len(panel.critical.path) - 1))
    assert panel.selected_id == panel.data.ids[deep]
    assert panel.rows is not None and panel.rows.visible(deep)  # a click in the list opens the way to it
    assert panel.item.path_lanes is not None and len(panel.item.path_lanes) == len(panel.critical.path)


def test_the_minimap_keeps_its_strip_while_only_the_window_moves(
        panel: TimelinePanel, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    shown(panel, qtbot, world)
    minimap = panel.minimap
    minimap.grab()
    assert minimap._strip is not None
    strip = minimap._strip[1]
    start, end = minimap.shown
    minimap.set_window(start, start + (end - start) / 3)  # a pan or zoom: the frame moves, the strip stays
    image = minimap.grab().toImage()
    assert minimap._strip[1] is strip
    x_right = int(minimap.x_of(start + (end - start) / 3))
    frame = QColor(minimap.frame_colour)
    assert any(image.pixelColor(x, minimap.height() // 2).rgb() == frame.rgb()
               for x in range(max(0, x_right - 2), min(image.width(), x_right + 3)))  # the frame's new edge
    minimap.set_marks(matches=np.array([start]))  # what the strip shows changed: drawn again
    minimap.grab()
    assert minimap._strip[1] is not strip


def test_lane_labels_fit_their_names_up_to_a_limit_and_a_click_on_one_selects_its_span(
        services: Services, world: World, qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QFontMetrics

    from agentdesk.gui.timeline.panel import COMPACT_LABELS_PX, LABELS_MAX_PX
    from agentdesk.store.native import NativeSource
    from agentdesk.store.runtime import AgentRuntime

    long_name = "research-coordinator-with-a-long-agent-name"
    source = NativeSource.open(str(world.path))
    AgentRuntime(source.store).start_span(world.run_id, "agent", long_name)
    source.close()
    panel = TimelinePanel(services)
    qtbot.addWidget(panel)
    panel.resize(1600, 700)
    panel.show()
    panel.show_run(world.run_id)
    qtbot.waitUntil(lambda: panel.data is not None and len(panel.data) == 6, timeout=5000)
    needed = QFontMetrics(panel.lanes.font()).horizontalAdvance(long_name)
    qtbot.waitUntil(lambda: int(panel.lanes.width()) >= needed)  # read whole, not "research-c…"
    width = int(panel.lanes.width())
    assert COMPACT_LABELS_PX <= width <= LABELS_MAX_PX  # read whole, not "research-c…"
    assert int(panel.tokens.getPlotItem().getAxis("left").width()) == width  # both plots start at one x

    panel.resize(1000, 700)  # narrow: the labels give way to a quarter of the panel at most
    qtbot.waitUntil(lambda: int(panel.lanes.width()) <= max(190, 1000 // 4))

    data = panel.data
    assert data is not None
    lane_named = {name: lane for lane, name in enumerate(data.names[0:len(data)])}
    lane = lane_named["read_file"]
    row = panel.row_of(lane)
    axis = panel.lanes
    rect = axis.mapRectFromParent(axis.geometry())
    top, bottom = panel.view.viewRange()[1]
    y = rect.top() + (row + 0.5 - top) * rect.height() / (bottom - top)
    scene = axis.mapToScene(QPointF(rect.right() - 20, y))
    assert panel.hover.lane_at(scene) == lane
    assert long_name in panel.tooltip(lane_named[long_name])  # whole on hover, however narrow the column
    qtbot.mouseClick(panel.plot.viewport(), Qt.MouseButton.LeftButton, pos=panel.plot.mapFromScene(scene))
    assert panel.selected_id == world.tool_span_id
