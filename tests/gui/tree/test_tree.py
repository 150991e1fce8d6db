"""The project tree: lazy loading, paging, live updates as exact row changes, filtering, revealing by id."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QApplication

import agentdesk.gui.tree.view as tree_view
from agentdesk.gui.tree.view import ProjectTree
from agentdesk.model.services import Services
from agentdesk.model.tree.filter import TreeFilterProxy
from agentdesk.model.tree.model import NAME, EntityRole, PendingRole, ProjectTreeModel, StatusRole
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World
from tests.gui.displayed import displayed

Node = tuple[str, str, str, str, int, tuple[Any, ...]]


@pytest.fixture
def runtime(world: World) -> Iterator[AgentRuntime]:
    """The agent runtime as another writer: its changes reach the GUI through the watcher."""
    source = NativeSource.open(str(world.path))
    yield AgentRuntime(source.store)
    source.close()


def settle(qtbot: Any, model: ProjectTreeModel) -> None:
    """Fetch every fetchable node until nothing is left to load."""
    def done() -> bool:
        busy = False
        for key in [("", ""), *model.loaded_keys()]:
            index = model.find(*key) if key[0] else QModelIndex()
            if model.canFetchMore(index) or model.has_more(index):
                model.fetchMore(index)
                busy = True
            busy = busy or model.is_loading(index)
        return not busy
    qtbot.waitUntil(done, timeout=5000)


def open_path(qtbot: Any, model: ProjectTreeModel, *keys: tuple[str, str]) -> QModelIndex:
    """Load each level down to the last key (its first page of children included)."""
    qtbot.waitUntil(lambda: model.is_loaded(QModelIndex()))
    for key in keys:
        qtbot.waitUntil(lambda key=key: model.find(*key).isValid())
        model.fetchMore(model.find(*key))
        qtbot.waitUntil(lambda key=key: model.is_loaded(model.find(*key)))
    return model.find(*keys[-1])


def model_tree(model: ProjectTreeModel, parent: QModelIndex | None = None) -> tuple[Node, ...]:
    parent = parent or QModelIndex()
    rows = []
    for row in range(model.rowCount(parent)):
        index = model.index(row, NAME, parent)
        entity, entity_id = index.data(EntityRole)
        rows.append((entity, entity_id, index.data(), index.data(StatusRole), index.data(PendingRole),
                     model_tree(model, index)))
    return tuple(rows)


def store_tree(path: Any) -> tuple[Node, ...]:
    """What the tree must show, read straight from the store."""
    source = NativeSource.open(str(path))
    try:
        def agent_rows(agents: list[Any], parent_id: str | None) -> tuple[Node, ...]:
            out = []
            for a in (a for a in agents if a.parent_agent_id == parent_id):
                runs = source.runs(a.id, 0, 100_000).items
                kids = agent_rows(agents, a.id) + tuple(
                    ("run", r.id, r.title, r.status, r.pending_approvals, ()) for r in runs)
                out.append(("agent", a.id, a.name, a.status, a.pending_approvals, kids))
            return tuple(out)

        return tuple(
            ("project", p.id, p.name, p.status, p.pending_approvals, tuple(
                ("task", t.id, t.title, t.status, t.pending_approvals, tuple(
                    ("session", s.id, s.title, s.status, s.pending_approvals,
                     agent_rows(source.agents(s.id), None))
                    for s in source.sessions(t.id)))
                for t in source.tasks(p.id)))
            for p in source.projects())
    finally:
        source.close()


def test_loads_lazily_one_level_at_a_time(world: World, services: Services, qtbot: Any) -> None:
    model = ProjectTreeModel(services)
    qtbot.waitUntil(lambda: model.rowCount() == 1)
    project = model.find("project", world.project_id)
    assert model.rowCount(project) == 0 and model.canFetchMore(project) and model.hasChildren(project)
    assert model.loaded_keys() == [("project", world.project_id)]
    model.fetchMore(project)
    assert model.is_loading(project) and not model.canFetchMore(project)  # started, not waited for
    qtbot.waitUntil(lambda: model.rowCount(project) == 1)
    assert model.index(0, 0, project).data(EntityRole) == ("task", world.task_id)
    assert model.find("session", world.session_id) == QModelIndex()


def test_model_passes_the_model_tester_while_loading_and_updating(
        world: World, services: Services, runtime: AgentRuntime, qtbot: Any, qtmodeltester: Any) -> None:
    model = ProjectTreeModel(services, page_size=2)
    qtmodeltester.check(model, force_py=True)  # fetches as it walks, re-checks on every signal
    settle(qtbot, model)
    runtime.start_run(world.sub_agent_id, "sub run")
    runtime.set_run_status(world.run_id, "done")
    expected = store_tree(world.path)

    def equal() -> bool:
        settle(qtbot, model)
        return model_tree(model) == expected

    qtbot.waitUntil(equal, timeout=3000)


def test_sub_agents_nest_under_their_parent_agent(world: World, services: Services, qtbot: Any) -> None:
    model = ProjectTreeModel(services)
    settle(qtbot, model)
    sub = model.find("agent", world.sub_agent_id)
    assert sub.parent().data(EntityRole) == ("agent", world.agent_id)
    agent = model.find("agent", world.agent_id)
    assert [model.index(r, 0, agent).data(EntityRole)[0] for r in range(model.rowCount(agent))] == \
        ["agent", "run"]


def test_new_run_is_inserted_at_the_top_without_a_reset(
        world: World, services: Services, runtime: AgentRuntime, qtbot: Any) -> None:
    model = ProjectTreeModel(services)
    settle(qtbot, model)
    resets: list[int] = []
    model.modelReset.connect(lambda: resets.append(1))
    agent = model.find("agent", world.agent_id)

    def at_top_of_agent(parent: QModelIndex, first: int, last: int) -> bool:
        return parent == model.find("agent", world.agent_id) and first == last == 1  # below the sub-agent

    with qtbot.waitSignal(model.rowsInserted, check_params_cb=at_top_of_agent, timeout=3000):
        run_id = runtime.start_run(world.agent_id, "Second attempt")
    assert model.index(1, 0, agent).data(EntityRole) == ("run", run_id)
    assert model.index(2, 0, agent).data(EntityRole) == ("run", world.run_id)
    assert model.data(model.find("agent", world.agent_id, 3)) == "claude-sonnet-4 · 2 runs"
    assert not resets


def test_status_change_is_a_data_change_of_the_affected_rows_only(
        world: World, services: Services, runtime: AgentRuntime, qtbot: Any) -> None:
    model = ProjectTreeModel(services)
    settle(qtbot, model)
    changed: list[tuple[Any, int, int]] = []
    model.dataChanged.connect(
        lambda tl, br, roles=(): changed.append((tl.data(EntityRole), tl.row(), br.row())))
    inserted: list[int] = []
    model.rowsInserted.connect(lambda *a: inserted.append(1))
    runtime.set_run_status(world.run_id, "failed", error="boom <b>")
    run = model.find("run", world.run_id)
    qtbot.waitUntil(lambda: model.data(run, StatusRole) == "failed")
    qtbot.waitUntil(lambda: model.find("project", world.project_id).data(StatusRole) == "failed")
    assert all(top == bottom for _, top, bottom in changed)  # one row per emission
    touched = {key for key, _, _ in changed}
    assert ("run", world.run_id) in touched and ("agent", world.sub_agent_id) not in touched
    assert touched <= {("run", world.run_id), ("agent", world.agent_id), ("session", world.session_id),
                       ("task", world.task_id), ("project", world.project_id)}
    assert "error: boom <b>" in displayed(model.data(run, Qt.ItemDataRole.ToolTipRole))
    assert not inserted


def test_approval_changes_update_pending_counts_up_the_tree(
        world: World, services: Services, runtime: AgentRuntime, qtbot: Any) -> None:
    model = ProjectTreeModel(services)
    settle(qtbot, model)
    keys = [("run", world.run_id), ("agent", world.agent_id), ("session", world.session_id),
            ("task", world.task_id), ("project", world.project_id)]
    assert [model.find(*k).data(PendingRole) for k in keys] == [3] * 5
    runtime.request_approval(world.run_id, "deploy", {"env": "staging"})
    qtbot.waitUntil(lambda: [model.find(*k).data(PendingRole) for k in keys] == [4] * 5)
    source = NativeSource.open(str(world.path))
    source.decide(world.approval_ids[0], False, "bob", "no")
    source.close()
    qtbot.waitUntil(lambda: [model.find(*k).data(PendingRole) for k in keys] == [3] * 5)
    assert model.data(model.find("run", world.run_id, 2)) == "3"


def test_runs_are_paged_newest_first(world: World, services: Services, runtime: AgentRuntime,
                                     qtbot: Any) -> None:
    ids = [runtime.start_run(world.sub_agent_id, f"run {n}") for n in range(7)]
    model = ProjectTreeModel(services, page_size=3)
    settle_to = ("agent", world.sub_agent_id)
    agent = open_path(qtbot, model, ("project", world.project_id), ("task", world.task_id),
                      ("session", world.session_id), settle_to)
    assert model.rowCount(agent) == 3
    assert [model.index(r, 0, agent).data(EntityRole)[1] for r in range(3)] == ids[::-1][:3]
    assert model.data(model.find(*settle_to, 3)) == "gpt-4.1 · 3 of 7 runs"
    assert model.has_more(agent) and not model.canFetchMore(agent)  # views must not page on their own
    model.fetchMore(agent)
    qtbot.waitUntil(lambda: model.rowCount(model.find(*settle_to)) == 6)
    model.fetchMore(model.find(*settle_to))
    qtbot.waitUntil(lambda: model.rowCount(model.find(*settle_to)) == 7)
    agent = model.find(*settle_to)
    assert [model.index(r, 0, agent).data(EntityRole)[1] for r in range(7)] == ids[::-1]
    assert not model.has_more(agent)


def test_an_agent_with_many_runs_opens_at_once(world: World, services: Services, qtbot: Any) -> None:
    from agentdesk.store.persistence import schema as sc

    with services.source.store.writing_session() as session, session.begin():
        now = time.time()
        session.execute(sc.RunRow.__table__.insert(), [  # type: ignore[attr-defined]
            dict(id=f"run_bulk{n:06d}", project_id=world.project_id, task_id=world.task_id,
                 session_id=world.session_id, agent_id=world.sub_agent_id, title=f"bulk {n}", status="done",
                 started_at=now - n, input_tokens=0, output_tokens=0, cost_usd=0.0, revision=1)
            for n in range(20_000)])
    model = ProjectTreeModel(services)  # how fast: bench/gui_bench.py (expand the agent with 60,000 runs)
    agent = open_path(qtbot, model, ("project", world.project_id), ("task", world.task_id),
                      ("session", world.session_id), ("agent", world.sub_agent_id))
    assert model.runs_shown(world.sub_agent_id) == (200, 20_000)
    model.fetchMore(agent)
    qtbot.waitUntil(lambda: model.runs_shown(world.sub_agent_id)[0] == 400)


def test_events_keep_the_model_equal_to_the_store(
        world: World, services: Services, runtime: AgentRuntime, qtbot: Any) -> None:
    model = ProjectTreeModel(services, page_size=3)
    settle(qtbot, model)
    resets: list[int] = []
    model.modelReset.connect(lambda: resets.append(1))
    rng = random.Random(20240611)
    tasks, sessions, agents = [world.task_id], [world.session_id], [world.agent_id, world.sub_agent_id]
    runs, pending = [world.run_id], list(world.approval_ids)
    decider = NativeSource.open(str(world.path))
    for step in range(60):
        op = rng.choice(["task", "session", "agent", "sub", "run", "run", "status", "status", "approval",
                         "decide", "agent_status", "session_status"])
        if op == "task":
            tasks.append(runtime.create_task(world.project_id, f"task {step}"))
        elif op == "session":
            sessions.append(runtime.create_session(rng.choice(tasks), f"session {step}"))
        elif op == "agent":
            agents.append(runtime.create_agent(rng.choice(sessions), f"agent {step}", "m"))
        elif op == "sub":
            parent = rng.choice(agents)
            session_id = decider.agent(parent).session_id
            agents.append(runtime.create_agent(session_id, f"sub {step}", "m", parent_agent_id=parent))
        elif op == "run":
            runs.append(runtime.start_run(rng.choice(agents), f"run {step}"))
        elif op == "status":
            runtime.set_run_status(rng.choice(runs), rng.choice(["waiting", "running", "done", "failed"]))
        elif op == "agent_status":
            runtime.set_agent_status(rng.choice(agents), rng.choice(["idle", "waiting", "running"]))
        elif op == "session_status":
            runtime.set_session_status(rng.choice(sessions), rng.choice(["running", "done"]))
        elif op == "approval":
            pending.append(runtime.request_approval(rng.choice(runs), "tool", {"step": step}))
        elif pending:
            decider.decide(pending.pop(rng.randrange(len(pending))), rng.random() < 0.5, "bob", "because")
        if step % 15 == 14:
            qtbot.wait(60)  # let some batches land mid-stream
    decider.close()
    expected = store_tree(world.path)

    def equal() -> bool:
        settle(qtbot, model)
        return model_tree(model) == expected

    qtbot.waitUntil(equal, timeout=8000)
    assert not resets


def test_a_reset_change_reloads_and_a_delete_removes_the_row(
        world: World, services: Services, qtbot: Any) -> None:
    model = ProjectTreeModel(services)
    settle(qtbot, model)
    with qtbot.waitSignal(model.rowsRemoved, timeout=2000):
        services.source.bus.publish([Change("run", "delete", world.run_id, {"agent": world.agent_id})])
    assert not model.find("run", world.run_id).isValid()
    with qtbot.waitSignal(model.modelReset, timeout=2000):
        services.source.bus.publish([Change("*", RESET, "*")])
    settle(qtbot, model)
    assert model_tree(model) == store_tree(world.path)


def test_agent_text_is_shown_literally(world: World, services: Services, runtime: AgentRuntime,
                                       qtbot: Any) -> None:
    model = ProjectTreeModel(services)
    settle(qtbot, model)
    project_id = runtime.create_project("<b>x</b><script>alert(1)</script>")
    qtbot.waitUntil(lambda: model.find("project", project_id).isValid())
    index = model.find("project", project_id)
    assert index.data() == "<b>x</b><script>alert(1)</script>"
    tooltip = index.data(Qt.ItemDataRole.ToolTipRole)
    assert tooltip.startswith("<qt>") and "&lt;script&gt;" in tooltip and "<script>" not in tooltip


def test_filter_by_text_status_and_pending(world: World, services: Services, runtime: AgentRuntime,
                                           qtbot: Any) -> None:
    other = runtime.create_project("Search indexer")
    model = ProjectTreeModel(services)
    settle(qtbot, model)
    proxy = TreeFilterProxy()
    proxy.setSourceModel(model)

    def shown() -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        stack = [QModelIndex()]
        while stack:
            parent = stack.pop()
            for row in range(proxy.rowCount(parent)):
                index = proxy.index(row, 0, parent)
                out.add(index.data(EntityRole))
                stack.append(index)
        return out

    proxy.set_text("CODER")
    assert shown() == {("project", world.project_id), ("task", world.task_id), ("session", world.session_id),
                       ("agent", world.agent_id), ("agent", world.sub_agent_id)}
    proxy.set_text("payments")  # a matching ancestor keeps its branch
    assert ("run", world.run_id) in shown() and ("project", other) not in shown()
    proxy.set_text("")
    proxy.set_status("idle")
    assert ("agent", world.sub_agent_id) in shown() and ("run", world.run_id) not in shown()
    proxy.set_status("")
    proxy.set_pending_only(True)
    assert ("run", world.run_id) in shown()
    assert ("project", other) not in shown() and ("agent", world.sub_agent_id) not in shown()
    proxy.clear()
    assert ("project", other) in shown()


@pytest.fixture
def tree(services: Services, qtbot: Any) -> ProjectTree:
    widget = ProjectTree(services)
    qtbot.addWidget(widget)
    widget.resize(600, 400)
    widget.show()
    return widget


def test_select_entity_expands_the_path_and_selects(world: World, tree: ProjectTree, qtbot: Any) -> None:
    runs: list[str] = []
    agents: list[str] = []
    tree.run_selected.connect(runs.append)
    tree.agent_selected.connect(agents.append)
    with qtbot.waitSignal(tree.selection_changed, timeout=3000):
        tree.select_entity("run", world.run_id)
    assert runs == [world.run_id] and agents == [world.agent_id]
    assert tree.current_selection() == ("run", world.run_id)
    assert {f"agent:{world.agent_id}", f"project:{world.project_id}"} <= set(tree.expanded_ids())
    with qtbot.waitSignal(tree.agent_selected, timeout=3000) as blocker:
        tree.select_entity("agent", world.sub_agent_id)
    assert blocker.args == [world.sub_agent_id]
    with qtbot.waitSignal(tree.run_selected, timeout=3000) as blocker:
        tree.select_entity("approval", world.approval_ids[2])  # an approval or a span selects its run
    assert tree.current_selection() == ("run", world.run_id)


def test_select_entity_pages_runs_and_gives_up_with_a_message(
        world: World, services: Services, runtime: AgentRuntime, qtbot: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [runtime.start_run(world.sub_agent_id, f"run {n}") for n in range(9)]
    widget = ProjectTree(services, page_size=2)
    qtbot.addWidget(widget)
    monkeypatch.setattr(tree_view, "REVEAL_PAGE", 3)
    with qtbot.waitSignal(widget.run_selected, timeout=3000):
        widget.select_entity("run", ids[1])  # the second oldest: several pages down
    assert widget.current_selection() == ("run", ids[1])
    monkeypatch.setattr(tree_view, "REVEAL_MAX_RUNS", 2)
    other = ProjectTree(services, page_size=2)
    qtbot.addWidget(other)
    with qtbot.waitSignal(other.status_message, timeout=3000) as blocker:
        other.select_entity("run", ids[0])
    assert "not shown in the tree" in blocker.args[0] and other.message.text() == blocker.args[0]
    assert other.message.textFormat() == Qt.TextFormat.PlainText


def test_expansion_restores_and_survives_updates(world: World, services: Services, runtime: AgentRuntime,
                                                 tree: ProjectTree, qtbot: Any) -> None:
    with qtbot.waitSignal(tree.run_selected, timeout=3000):
        tree.select_entity("run", world.run_id)
    expanded = tree.expanded_ids()
    runtime.start_run(world.agent_id, "another")
    runtime.set_run_status(world.run_id, "done")
    qtbot.waitUntil(lambda: tree.model.find("run", world.run_id).data(StatusRole) == "done")
    assert tree.expanded_ids() == expanded and tree.current_selection() == ("run", world.run_id)
    fresh = ProjectTree(services)
    qtbot.addWidget(fresh)
    fresh.restore_expanded(expanded)
    qtbot.waitUntil(lambda: fresh.expanded_ids() == expanded, timeout=3000)


def test_filter_widgets_and_keyboard(world: World, tree: ProjectTree, qtbot: Any) -> None:
    with qtbot.waitSignal(tree.run_selected, timeout=3000):
        tree.select_entity("run", world.run_id)
    tree.pending_button.setChecked(True)
    qtbot.waitUntil(lambda: tree.proxy.rowCount() == 1)
    tree.status_combo.setCurrentIndex(tree.status_combo.findData("done"))
    assert tree.proxy.rowCount() == 0
    tree.clear_filters()  # the unfiltered expansion and selection come back
    assert tree.current_selection() == ("run", world.run_id)
    assert f"agent:{world.agent_id}" in tree.expanded_ids()
    tree.view.setFocus()
    tree.view.setCurrentIndex(tree.proxy.index(0, 0))
    with qtbot.waitSignal(tree.selection_changed, timeout=1000) as blocker:
        qtbot.keyClick(tree.view, Qt.Key.Key_Down)
    assert blocker.args == ["task", world.task_id]
    tree.filter_edit.setText("coder")  # matches show expanded
    assert tree.proxy.mapToSource(tree.view.currentIndex()) == tree.model.find("task", world.task_id)
    assert f"agent:{world.agent_id}" in tree.expanded_ids()


def test_the_filter_proxy_is_shown_only_while_filtering(world: World, tree: ProjectTree, qtbot: Any) -> None:
    """Relayouts through a QSortFilterProxyModel cost several Python calls a row: unfiltered, the view
    shows the model through an identity proxy, and swapping keeps widths, selection and expansion."""
    with qtbot.waitSignal(tree.run_selected, timeout=3000):
        tree.select_entity("run", world.run_id)
    header = tree.view.header()
    widths = [header.sectionSize(c) for c in range(header.count())]  # Name stretches; the rest fit contents
    expanded = tree.expanded_ids()
    heard: list[tuple[str, str]] = []
    tree.selection_changed.connect(lambda *key: heard.append(key))
    assert tree.proxy is tree.plain_proxy and tree.filter_proxy.sourceModel() is None
    tree.filter_edit.setText("investigate")
    assert tree.proxy is tree.filter_proxy and tree.current_selection() == ("run", world.run_id)
    tree.filter_edit.setText("")
    assert tree.proxy is tree.plain_proxy and tree.filter_proxy.sourceModel() is None
    assert [tree.view.header().sectionSize(c) for c in range(header.count())] == widths
    assert tree.current_selection() == ("run", world.run_id) and tree.expanded_ids() == expanded
    assert not heard  # the same row all along
    tree.view.setCurrentIndex(tree.proxy.mapFromSource(tree.model.find("task", world.task_id)))
    assert heard == [("task", world.task_id)]  # the new selection model is listened to


def test_moving_to_the_last_runs_loads_the_next_page(world: World, services: Services, runtime: AgentRuntime,
                                                      qtbot: Any) -> None:
    for n in range(8):
        runtime.start_run(world.sub_agent_id, f"run {n}")
    widget = ProjectTree(services, page_size=3)
    qtbot.addWidget(widget)
    widget.show()
    with qtbot.waitSignal(widget.agent_selected, timeout=3000):
        widget.select_entity("agent", world.sub_agent_id)
    agent = widget.proxy.mapFromSource(widget.model.find("agent", world.sub_agent_id))
    widget.view.expand(agent)
    qtbot.waitUntil(lambda: widget.model.runs_shown(world.sub_agent_id) == (3, 8), timeout=20_000)
    for _ in range(3):  # relayouts of the expanded agent must not page on their own: force a few, not a sleep
        widget.view.doItemsLayout()
        QApplication.processEvents()
    assert widget.model.runs_shown(world.sub_agent_id) == (3, 8)
    widget.view.setFocus()
    widget.view.setCurrentIndex(widget.proxy.index(2, 0, agent))  # the last loaded run: this does page
    qtbot.waitUntil(lambda: widget.model.runs_shown(world.sub_agent_id) == (6, 8), timeout=20_000)


def test_a_reset_keeps_expansion_and_selection(world: World, services: Services, tree: ProjectTree,
                                               qtbot: Any) -> None:
    with qtbot.waitSignal(tree.run_selected, timeout=3000):
        tree.select_entity("run", world.run_id)
    expanded = tree.expanded_ids()
    with qtbot.waitSignal(tree.run_selected, timeout=3000):
        services.source.bus.publish([Change("*", RESET, "*")])
    assert tree.current_selection() == ("run", world.run_id)
    qtbot.waitUntil(lambda: tree.expanded_ids() == expanded, timeout=3000)


@pytest.mark.parametrize("width", [240, 320, 600])
def test_no_column_hides_past_the_edge_and_names_keep_their_room(world: World, tree: ProjectTree, qtbot: Any,
                                                                 width: int) -> None:
    from agentdesk.gui.tree.view import NAME_ROOM_PX
    from agentdesk.model.tree.model import INFO

    with qtbot.waitSignal(tree.run_selected, timeout=3000):
        tree.select_entity("run", world.run_id)
    tree.resize(width, 400)
    header, viewport = tree.view.header(), tree.view.viewport()
    qtbot.waitUntil(lambda: sum(header.sectionSize(c) for c in range(header.count())
                                if not header.isSectionHidden(c)) <= viewport.width())
    assert header.sectionSize(NAME) >= min(NAME_ROOM_PX, viewport.width() - header.sectionSize(2))
    assert header.isSectionHidden(INFO) == (width < 600)  # Info gives way only when the names need it


def test_star_expands_everything_below_as_the_levels_load(world: World, tree: ProjectTree, qtbot: Any) -> None:
    """Qt's own * opens only loaded rows (one level a press in a lazy tree); one press opens them all."""
    qtbot.waitUntil(lambda: tree.model.find("project", world.project_id).isValid())
    project = tree.proxy.mapFromSource(tree.model.find("project", world.project_id))
    tree.view.setCurrentIndex(project)
    tree.view.setFocus()
    qtbot.keyClick(tree.view, Qt.Key.Key_Asterisk)
    wanted = {f"project:{world.project_id}", f"task:{world.task_id}", f"session:{world.session_id}",
              f"agent:{world.agent_id}"}
    qtbot.waitUntil(lambda: wanted <= set(tree.expanded_ids()), timeout=5000)
    qtbot.waitUntil(lambda: tree.view.visualRect(tree.proxy.mapFromSource(
        tree.model.find("run", world.run_id))).isValid(), timeout=5000)  # the run under the agent is in view
