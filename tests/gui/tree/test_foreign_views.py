"""Issue 4 in the window: each seed runtime's database shown in the same four views.

For lensagent, stageflow, vgxness and maka: the tree reaches a run, the timeline draws
its spans, the context editor shows the agent's context (or its absence), the queue
lists the pending approvals; read-only opening disables every command with the
source's reason and leaves the file byte-identical; a writer process's commits reach
the queue and the timeline; with writes allowed an approval made in the queue lands
in the database, while what the schema cannot express stays disabled with its reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentdesk.gui.context.editor import ContextEditor
from agentdesk.gui.window.main_window import MainWindow
from agentdesk.model.tree.model import EntityRole, PendingRole
from agentdesk.store.source import Capability, Source
from agentdesk.store.sources import open_source
from tests.gui.foreign_helpers import KINDS, Kind, Opened, digest, tip

WAIT_MS = 5000
LIVE_MS = 2000
"""A writer's commit must reach the views within this (watcher poll + bridge + reload)."""


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture(params=KINDS, ids=str)
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def built(kind: Kind, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / f"{kind.name}.sqlite"
    return path, kind.build(path)


# -- helpers -------------------------------------------------------------------------------------
def show_run(qtbot: Any, window: MainWindow, run_id: str) -> None:
    """Reveal the run in the tree; the window's wiring shows it in the timeline and its agent's context."""
    window.tree.select_entity("run", run_id)
    qtbot.waitUntil(lambda: window.tree.current_selection() == ("run", run_id), timeout=WAIT_MS)
    timeline = window.timeline
    qtbot.waitUntil(lambda: timeline.run_id == run_id and timeline.data is not None and not timeline.feed.busy,
                    timeout=WAIT_MS)


def wait_queue(qtbot: Any, window: MainWindow) -> None:
    queue = window.queue
    qtbot.waitUntil(lambda: queue.pending_model.is_loaded and queue.decided_model.is_loaded, timeout=WAIT_MS)


def wait_context(qtbot: Any, editor: ContextEditor, agent_id: str) -> None:
    qtbot.waitUntil(lambda: editor.model.agent_id == agent_id and editor.model.snapshot is not None,
                    timeout=WAIT_MS)


def select_live_item(editor: ContextEditor) -> str | None:
    """Make the first item no compaction covers current (the toggles then answer for the source)."""
    snapshot = editor.model.snapshot
    assert snapshot is not None
    item = next((i for i in snapshot.items if i.compaction_id is None), None)
    if item is None:
        return None
    editor.select_item(item.id)
    assert editor.model.row_value(editor.view.currentIndex()).item.id == item.id  # type: ignore[union-attr]
    return item.id


def assert_context_refusals(editor: ContextEditor, source: Source, has_item: bool) -> None:
    """Every command the source cannot do is disabled, and its tooltip gives the source's reason."""
    actions = [(editor.edit_action, Capability.EDIT_ITEM), (editor.compact_action, Capability.COMPACT),
               (editor.undo_action, Capability.UNDO_COMPACTION)]
    if has_item:  # the toggles first ask for a selection
        actions += [(editor.visible_action, Capability.SET_VISIBILITY), (editor.lock_action, Capability.LOCK)]
    checked = 0
    for action, capability in actions:
        if capability in source.capabilities:
            continue
        why = source.why_not(capability)
        assert why, capability
        assert not action.isEnabled(), (capability, action.text())
        assert why in tip(action), (capability, tip(action))
        checked += 1
    assert checked


def assert_tree_shows_projects(window: MainWindow, source: Source) -> None:
    model = window.tree.model
    rows = [model.index(row, 0).data(EntityRole) for row in range(model.rowCount())]
    assert rows and all(entity == "project" for entity, _ in rows)
    assert sorted(entity_id for _, entity_id in rows) == sorted(p.id for p in source.projects())


# -- 1 + 2: the four views, read-only ------------------------------------------------------------
def test_views_render_read_only_and_leave_the_file_identical(
        kind: Kind, built: tuple[Path, dict[str, str]], qtbot: Any) -> None:
    path, _ids = built
    before = digest(path)
    app = Opened(qtbot, path)
    try:
        source, window = app.source, app.window
        assert source.descriptor.kind == kind.name and source.descriptor.read_only
        run_id = source.showcase_run()
        assert run_id is not None
        agent_id = source.locate("run", run_id).agent_ids[-1]

        # the tree: projects at the top, expanded down to the run
        qtbot.waitUntil(lambda: window.tree.model.rowCount() > 0, timeout=WAIT_MS)
        assert_tree_shows_projects(window, source)
        show_run(qtbot, window, run_id)
        expanded = set(window.tree.expanded_ids())
        assert f"agent:{agent_id}" in expanded and f"project:{source.locate('run', run_id).project_id}" in expanded

        # the timeline: one lane per span of the run
        data = window.timeline.data
        assert data is not None and len(data) > 0
        assert sorted(data.ids) == sorted(source.span_table(run_id).ids)
        assert window.timeline.header.text()

        # the context editor: the run's agent, with its items (or the source's empty context)
        editor = window.context_editor
        wait_context(qtbot, editor, agent_id)
        snapshot, expected = editor.model.snapshot, source.context(agent_id)
        assert snapshot is not None and editor.stack.currentIndex() == 1
        assert [i.id for i in snapshot.items] == [i.id for i in expected.items]
        if expected.items:
            assert editor.model.rowCount() > 0 and "items" in editor.summary.text()
        else:
            assert editor.model.rowCount() == 0 and editor.summary.text().startswith("0 items")
        has_item = select_live_item(editor) is not None
        assert_context_refusals(editor, source, has_item)

        # the queue: exactly the source's pending approvals
        queue = window.queue
        wait_queue(qtbot, window)
        pending = source.approvals("pending")
        assert pending and queue.pending_model.rowCount() == len(pending)
        assert sorted(queue.pending_model.ids()) == sorted(a.id for a in pending)
        asked = len(source.asks()) if hasattr(source, "asks") else 0  # questions: lensagent user_input waits
        qtbot.waitUntil(lambda: queue.questions.model.pending == asked)
        named = f" · {asked} question{'s' if asked != 1 else ''}" if asked else ""
        assert window.queue_dock.windowTitle() == f"Approvals ({len(pending)} pending{named})"
        queue.select_approval(pending[0].id)
        current = queue.current_approval()
        assert current is not None and current.id == pending[0].id
        for button, capability in ((queue.approve_button, Capability.APPROVE),
                                   (queue.deny_button, Capability.DENY),
                                   (queue.edit_button, Capability.EDIT_ARGUMENTS)):
            assert not button.isEnabled(), button.text()
            assert source.why_not(capability) in tip(button), (button.text(), tip(button))
        assert "read-only" in tip(queue.approve_button)
        queue.approve_selected()  # the A key does nothing while the source refuses
        assert queue.pending_model.rowCount() == len(pending)

        window.grab()  # every view paints
    finally:
        app.close()
    assert digest(path) == before


# -- 3: live updates from the runtime's own writes ----------------------------------------------
def test_a_writer_process_reaches_the_queue_and_the_timeline(
        kind: Kind, built: tuple[Path, dict[str, str]], qtbot: Any) -> None:
    path, _ids = built
    app = Opened(qtbot, path)
    try:
        source, window = app.source, app.window
        show_run(qtbot, window, kind.live_run)
        wait_queue(qtbot, window)
        queue, timeline = window.queue, window.timeline
        assert timeline.data is not None
        lanes = len(timeline.data)
        assert kind.new_approval not in queue.pending_model.ids()
        assert not set(kind.new_spans) & set(timeline.data.ids)

        kind.write(path)  # returns once the writer committed

        qtbot.waitUntil(lambda: kind.new_approval in queue.pending_model.ids(), timeout=LIVE_MS)
        assert queue.pending_model.rowCount() == len(source.approvals("pending"))
        qtbot.waitUntil(lambda: timeline.data is not None and set(kind.new_spans) <= set(timeline.data.ids),
                        timeout=LIVE_MS)
        expected = sorted(source.span_table(kind.live_run).ids)  # the writer may add more than these
        qtbot.waitUntil(lambda: timeline.data is not None and sorted(timeline.data.ids) == expected,
                        timeout=LIVE_MS)
        assert len(expected) > lanes
        assert timeline.run_id == kind.live_run
        new = source.approval(kind.new_approval)
        if new.run_id == kind.live_run:  # the tree's pending badge follows too
            run_pending = source.run(kind.live_run).pending_approvals
            qtbot.waitUntil(lambda: window.tree.model.find("run", kind.live_run).data(PendingRole) == run_pending,
                            timeout=LIVE_MS)
    finally:
        app.close()


# -- 4: writes allowed -------------------------------------------------------------------------
def test_writes_allowed_approve_from_the_queue_and_keep_unsupported_controls_disabled(
        kind: Kind, built: tuple[Path, dict[str, str]], qtbot: Any) -> None:
    path, _ids = built
    app = Opened(qtbot, path, allow_writes=True)
    try:
        source, window = app.source, app.window
        assert not source.descriptor.read_only
        assert {Capability.APPROVE, Capability.DENY} <= source.capabilities
        wait_queue(qtbot, window)
        queue, model = window.queue, window.queue.pending_model
        first = next(a for a in (model.approval_at(r) for r in range(model.rowCount()))
                     if a is not None and not model.is_expired(a))
        queue.select_approval(first.id)
        assert queue.approve_button.isEnabled() and queue.deny_button.isEnabled()
        assert not queue.edit_button.isEnabled()  # no seed runtime can edit a request's arguments
        assert source.why_not(Capability.EDIT_ARGUMENTS) in tip(queue.edit_button)

        with qtbot.waitSignal(queue.decisions_reported, timeout=WAIT_MS) as report:
            queue.approve_selected()
        assert report.args == ["approved 1"]
        qtbot.waitUntil(lambda: model.row_of(first.id) < 0, timeout=LIVE_MS)
        qtbot.waitUntil(lambda: first.id in queue.decided_model.ids(), timeout=LIVE_MS)

        editor = window.context_editor
        editor.show_agent(kind.context_agent)
        wait_context(qtbot, editor, kind.context_agent)
        if kind.editable_item is not None:
            editor.select_item(kind.editable_item)
            assert editor.edit_action.isEnabled(), tip(editor.edit_action)
            assert editor.visible_action.isEnabled(), tip(editor.visible_action)
            editor.toggle_visible()  # Space: hide the item's turn group, through the source
            qtbot.waitUntil(lambda: (item := editor.model.item(kind.editable_item or "")) is not None
                            and not item.visible, timeout=WAIT_MS)
        has_item = select_live_item(editor) is not None
        assert_context_refusals(editor, source, has_item)
    finally:
        app.close()

    check = open_source(str(path))
    try:
        assert check.approval(first.id).status == "approved"
        if kind.editable_item is not None:
            item = next(i for i in check.context(kind.context_agent).items if i.id == kind.editable_item)
            assert not item.visible
    finally:
        check.close()
