"""The tree, the timeline and the context editor with hostile agent text: marks, never the characters."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, Qt

from agentdesk.gui.context.editor import ContextEditor
from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.model.context.tree import preview
from agentdesk.model.services import Services
from agentdesk.model.tree.model import ProjectTreeModel
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.text.visible import visible
from tests.gui.conftest import World
from tests.gui.displayed import displayed
from tests.store.text.hostile import ANSI, SEPARATORS, TROJAN, nested

BAD = {"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"}


def hidden_in(text: str) -> list[str]:
    return [unicodedata.name(c, hex(ord(c))) for c in text if c not in "\n\t" and unicodedata.category(c) in BAD]


@pytest.fixture
def runtime(world: World) -> Iterator[AgentRuntime]:
    source = NativeSource.open(str(world.path))
    yield AgentRuntime(source.store)
    source.close()


def test_tree_names_and_tooltips_show_marks(world: World, services: Services, runtime: AgentRuntime,
                                            qtbot: Any) -> None:
    pid = runtime.create_project(TROJAN)
    model = ProjectTreeModel(services)
    qtbot.waitUntil(lambda: model.find("project", pid).isValid())
    index = model.find("project", pid)
    assert index.data() == visible(TROJAN) and hidden_in(index.data()) == []
    tip = displayed(index.data(Qt.ItemDataRole.ToolTipRole))
    assert tip.startswith(visible(TROJAN)) and hidden_in(tip) == []
    assert model.rowCount(QModelIndex()) == 2


def test_timeline_details_and_tooltip_show_marks(world: World, services: Services, runtime: AgentRuntime,
                                                 qtbot: Any) -> None:
    panel = TimelinePanel(services)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    span = runtime.start_span(world.run_id, "tool", f"bash {TROJAN}")
    runtime.finish_span(span, "ok", f"{ANSI}\n{SEPARATORS}")
    panel.show_run(world.run_id)
    qtbot.waitUntil(lambda: panel.data is not None and span in panel.data.lane_of, timeout=5000)
    assert panel.data is not None
    tip = displayed(panel.tooltip(panel.data.lane_of[span]))
    assert hidden_in(tip) == [] and "⟨U+202E⟩" in tip
    panel.select_span(span)
    qtbot.waitUntil(lambda: panel.details.view is not None and panel.details.span_id == span, timeout=3000)
    assert hidden_in(panel.details.title.text()) == [] and "⟨U+202E⟩" in panel.details.title.text()
    assert panel.details.output.shown_text == visible(f"{ANSI}\n{SEPARATORS}", lines=True)


def test_context_previews_do_not_break_at_line_separators(world: World, services: Services,
                                                          runtime: AgentRuntime, qtbot: Any) -> None:
    assert preview(SEPARATORS) == "ls⟨60 \u00d7 U+2028⟩; rm -rf ~"
    group = runtime.new_turn_group(world.agent_id, "turn")
    runtime.append_context(world.agent_id, group, "message", "user", f"{TROJAN}\n{ANSI}")
    editor = ContextEditor(services)
    qtbot.addWidget(editor)
    editor.resize(1000, 640)
    with qtbot.waitSignal(editor.model.reloaded, timeout=3000):
        editor.show_agent(world.agent_id)
    texts = []
    model = editor.model
    stack = [QModelIndex()]
    while stack:
        parent = stack.pop()
        for row in range(model.rowCount(parent)):
            for column in range(model.columnCount(parent)):
                index = model.index(row, column, parent)
                texts += [str(index.data() or ""), displayed(str(index.data(Qt.ItemDataRole.ToolTipRole) or ""))]
            stack.append(model.index(row, 0, parent))
    assert any("⟨U+202E⟩" in t for t in texts) and all(hidden_in(t) == [] for t in texts)
    editor.shutdown()


def test_a_span_output_nested_990_levels_shows(world: World, services: Services, runtime: AgentRuntime,
                                               qtbot: Any) -> None:
    from agentdesk.gui.timeline.details import load_span_view
    span = runtime.start_span(world.run_id, "tool", "deep")
    runtime.finish_span(span, "ok", nested(990))
    view = load_span_view(services.source, span)
    assert view.output_text == nested(990)
