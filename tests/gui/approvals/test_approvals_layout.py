"""What the operator approves is what they can read: at 1024, 1366 and 1920 px wide, every character of a long
argument lies inside the arguments' viewport (or "Show all" offers the rest) and every button is in view.

Checked from Qt's own layout (line geometry of the text document, widget geometry mapped to the dock's
viewport), not from pixels.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QPlainTextEdit, QScrollArea, QWidget

from agentdesk.gui.window.main_window import MainWindow
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World

LONG = "".join(f"Decimal('0.{i:03d}')/" if i % 7 == 0 else f"seg{i}-" for i in range(80))[:300]


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


def rect_in(widget: QWidget, ancestor: QWidget) -> QRect:
    return QRect(widget.mapTo(ancestor, QPoint(0, 0)), widget.size())


def line_extents(edit: QPlainTextEdit) -> list[tuple[float, float]]:
    """(left, right) of every laid-out text line, in the edit's viewport coordinates."""
    offset = edit.contentOffset()
    extents = []
    block = edit.document().firstBlock()
    while block.isValid():
        origin = edit.blockBoundingGeometry(block).translated(offset).topLeft()
        layout = block.layout()
        for i in range(layout.lineCount()):
            line = layout.lineAt(i)
            left = origin.x() + line.x()
            extents.append((left, left + line.naturalTextWidth()))
        block = block.next()
    return extents


@pytest.mark.parametrize("tool", ["write_file", "mcp__" + "x" * 150])
@pytest.mark.parametrize("width", [1024, 1366, 1920])
def test_a_300_character_argument_is_readable_and_every_button_reachable(
        world: World, services: Services, qtbot: Any, width: int, tool: str) -> None:
    """Also with a tool name far wider than the pane in one word: the title must not widen the pane."""
    source = NativeSource.open(str(world.path))
    approval_id = AgentRuntime(source.store).request_approval(
        world.run_id, tool, {"amount": LONG}, span_id=world.tool_span_id, timeout_s=900)
    source.close()
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.resize(width, 768)
    window.show()
    window.select("approval", approval_id)
    details = window.queue.details
    qtbot.waitUntil(lambda: "seg" in details.arguments.toPlainText())
    qtbot.waitUntil(lambda: not details._rewrap.isActive() and details._width == details._chars_wide())

    area = window.queue_scroll
    assert isinstance(area, QScrollArea) and not window.queue_fold.folded
    room = area.viewport().rect()
    edit = details.arguments
    assert room.contains(rect_in(edit.viewport(), area.viewport())), "the arguments box is cut off by the dock"
    assert window.width() == width, "the window does not fit the screen"
    assert edit.horizontalScrollBar().maximum() == 0
    for left, right in line_extents(edit):
        assert left >= 0 and right <= edit.viewport().width(), f"a line runs past the edge at {width} px"
    shown = re.sub(r"[\s↪]", "", edit.toPlainText())
    assert LONG in shown or details.show_all_button.isVisible()

    assert window.queue.width() <= room.width()  # nothing in the pane is wider than the dock
    for label in (details.title, details.meta, details.digest):
        assert rect_in(label, area.viewport()).right() <= room.right()
    for button in (window.queue.approve_button, window.queue.deny_button, window.queue.edit_button,
                   window.queue.timeline_button, window.queue.context_button):
        place = rect_in(button, area.viewport())
        assert place.left() >= 0 and place.right() <= room.right(), f"{button.text()} is off the dock's edge"
