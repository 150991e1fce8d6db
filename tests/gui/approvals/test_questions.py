"""The Questions tab of the approval queue: asked elsewhere, seen live, answered by typing or an option."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QAbstractItemModelTester

from agentdesk.gui.approvals.queue import QUESTIONS_TAB, ApprovalQueue
from agentdesk.model.services import Services
from agentdesk.store.asks import commands as asks
from agentdesk.store.asks.reads import read_ask
from agentdesk.store.persistence.database import Store, open_store
from tests.gui.conftest import World


@pytest.fixture
def other(world: World) -> Iterator[Store]:
    """Another process's view of the store (the agent's side)."""
    store = open_store(str(world.path))
    yield store
    store.close()


@pytest.fixture
def queue(services: Services, qtbot: Any) -> ApprovalQueue:
    widget = ApprovalQueue(services)
    qtbot.addWidget(widget)
    widget.resize(700, 900)
    widget.show()
    return widget


def test_a_question_appears_live_with_its_banner_and_is_answered_by_an_option(
        queue: ApprovalQueue, other: Store, world: World, qtbot: Any) -> None:
    QAbstractItemModelTester(queue.questions.model, QAbstractItemModelTester.FailureReportingMode.Fatal)
    counts: list[int] = []
    queue.questions_count_changed.connect(counts.append)
    ask_id = asks.create(other, world.run_id, "Deploy to <b>prod</b>\u202e now?", ["yes", "not yet"], expires_in=600)
    qtbot.waitUntil(lambda: queue.questions.model.pending == 1)
    queue.tabs.setCurrentIndex(QUESTIONS_TAB)
    panel = queue.questions
    qtbot.waitUntil(lambda: panel.current_ask() is not None)
    assert queue.tabs.tabText(QUESTIONS_TAB) == "Questions (1)"
    assert counts[-1] == 1
    assert not queue.approval_pane.isVisible()
    assert panel.question.toPlainText() == "Deploy to <b>prod</b>⟨U+202E⟩ now?"
    assert panel.banner.isVisible() and "RIGHT-TO-LEFT OVERRIDE" in panel.banner.text()
    assert panel.title.textFormat() == Qt.TextFormat.PlainText
    assert [b.text() for b in panel.option_buttons] == ["1. yes", "2. not yet"]
    panel.option_buttons[1].click()
    qtbot.waitUntil(lambda: read_ask(other, ask_id).status == "answered")
    assert (read_ask(other, ask_id).answer, read_ask(other, ask_id).answered_by) == ("not yet", "tester")
    qtbot.waitUntil(lambda: queue.questions.model.pending == 0)
    assert queue.tabs.tabText(QUESTIONS_TAB) == "Questions"
    qtbot.waitUntil(lambda: "Answered" in panel.result.text())  # the answer's own reply may come after the refresh


def test_typed_answer_and_a_race_lost_says_who(queue: ApprovalQueue, other: Store, world: World, qtbot: Any) -> None:
    first = asks.create(other, world.run_id, "Which branch?")
    queue.tabs.setCurrentIndex(QUESTIONS_TAB)
    panel = queue.questions
    qtbot.waitUntil(lambda: panel.current_ask() is not None)
    assert not panel.answer_button.isEnabled()  # nothing typed yet
    shown = panel.current_ask()
    assert shown is not None
    asks.answer(other, first, "main", "alice")  # another operator, first
    panel.answer_edit.setPlainText("dev")
    panel._current = shown  # the operator still looks at it as it was
    panel.answer_with("dev")
    qtbot.waitUntil(lambda: "Not answered" in panel.result.text())
    assert "already answered by alice" in panel.result.text()
    assert read_ask(other, first).answer == "main"
    second = asks.create(other, world.run_id, "And the tag?")
    qtbot.waitUntil(lambda: panel.model.row_of(second) >= 0)
    panel.select_ask(second)
    panel.answer_edit.setPlainText("v1.2")
    qtbot.keyClick(panel.answer_edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: read_ask(other, second).status == "answered")
    assert read_ask(other, second).answer == "v1.2"


def test_a_maka_question_is_shown_read_only_with_the_reason(tmp_path: Any, qtbot: Any) -> None:
    from agentdesk.store.sources import open_source
    from tests.store.sources.fixtures_maka import build_maka_fixture

    path = tmp_path / "maka.sqlite"
    ids = build_maka_fixture(path)
    source = open_source(str(path), allow_writes=True)
    services = Services.create(source, actor="tester", coalesce_ms=10)
    try:
        queue = ApprovalQueue(services)
        qtbot.addWidget(queue)
        queue.resize(700, 900)
        queue.show()
        queue.select_question(ids["question"])
        panel = queue.questions
        qtbot.waitUntil(lambda: panel.current_ask() is not None)
        assert panel.question.toPlainText() == "Which Node version should CI use?"
        assert [b.text() for b in panel.option_buttons] == ["1. 20", "2. 22"]
        assert not any(b.isEnabled() for b in panel.option_buttons)
        assert not panel.answer_edit.isEnabled() and not panel.answer_button.isEnabled()
        assert panel.result.text().startswith("Read-only: maka settles a question")
    finally:
        services.close()
        source.close()


def test_the_trees_pending_count_includes_questions(services: Services, other: Store, world: World,
                                                     qtbot: Any) -> None:
    from agentdesk.gui.tree.view import ProjectTree
    from agentdesk.model.tree.model import PendingRole

    tree = ProjectTree(services)
    qtbot.addWidget(tree)
    with qtbot.waitSignal(tree.run_selected, timeout=3000):
        tree.select_entity("run", world.run_id)
    run_pending = lambda: tree.model.find("run", world.run_id).data(PendingRole)  # noqa: E731
    assert run_pending() == len(world.approval_ids)
    ask_id = asks.create(other, world.run_id, "Which branch?")
    qtbot.waitUntil(lambda: run_pending() == len(world.approval_ids) + 1)
    asks.answer(other, ask_id, "main", "alice")
    qtbot.waitUntil(lambda: run_pending() == len(world.approval_ids))


def test_the_status_bar_names_questions_and_their_agents(services: Services, world: World, other: Store,
                                                         qtbot: Any) -> None:
    from agentdesk.gui.window.main_window import MainWindow

    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    label = window.status.pending_label
    qtbot.waitUntil(lambda: label.text().startswith("3 pending approvals"), timeout=5000)
    assert "question" not in label.text()
    asks.create(other, world.run_id, "Which branch?", ["main", "dev"])  # from another process's store
    qtbot.waitUntil(lambda: "· 1 question ·" in label.text(), timeout=5000)
    assert label.text() == "3 pending approvals · 1 question · 1 agent waiting for you"
