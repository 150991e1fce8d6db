"""The runtime-facing API and the read queries over what it writes."""

from __future__ import annotations

import threading
import time

import pytest

from agentdesk.store.errors import InvalidInput, NotFound
from agentdesk.store.native import NativeSource
from agentdesk.store.queries import roll_up
from agentdesk.store.readmodel import Location
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World


def test_hierarchy_reads_back_level_by_level(source: NativeSource, world: World) -> None:
    [project] = source.projects()
    assert (project.id, project.name, project.task_count) == (world.project, "Payments", 1)
    [task] = source.tasks(world.project)
    [session] = source.sessions(world.task)
    agents = source.agents(world.session)
    assert [a.id for a in agents] == [world.agent, world.sub_agent]
    assert agents[1].parent_agent_id == world.agent
    assert (agents[0].run_count, agents[1].run_count) == (1, 0)
    assert (task.id, session.id, session.status) == (world.task, world.session, "running")


def test_pending_approvals_are_counted_at_every_level(source: NativeSource, rt: AgentRuntime,
                                                      world: World) -> None:
    sub_run = rt.start_run(world.sub_agent, "Write the fix")
    rt.request_approval(sub_run, "write_file", {"path": "a.py"})
    assert source.projects()[0].pending_approvals == 2
    assert source.tasks(world.project)[0].pending_approvals == 2
    assert source.sessions(world.task)[0].pending_approvals == 2
    assert [a.pending_approvals for a in source.agents(world.session)] == [1, 1]
    assert source.runs(world.agent).items[0].pending_approvals == 1
    source.decide(world.approval, approve=False, actor="op", reason="no")
    assert source.projects()[0].pending_approvals == 1
    assert [a.pending_approvals for a in source.agents(world.session)] == [0, 1]
    assert source.runs(world.agent).items[0].pending_approvals == 0


def test_status_rolls_up_to_the_most_urgent_agent(source: NativeSource, rt: AgentRuntime,
                                                  world: World) -> None:
    assert source.projects()[0].status == "running"  # the planner started a run; the coder is idle
    rt.set_agent_status(world.sub_agent, "waiting")
    assert source.tasks(world.project)[0].status == "waiting"
    assert source.projects()[0].status == "waiting"
    rt.set_agent_status(world.sub_agent, "done")
    rt.set_run_status(world.run, "failed", error="boom")
    assert source.tasks(world.project)[0].status == "failed"
    assert roll_up([]) == "idle"
    assert roll_up(["done", "cancelled"]) == "done"


def test_runs_page_newest_first(source: NativeSource, rt: AgentRuntime, world: World) -> None:
    ids = [world.run]
    for n in range(4):
        time.sleep(0.002)
        ids.append(rt.start_run(world.agent, f"run {n}"))
    newest_first = list(reversed(ids))
    first = source.runs(world.agent, offset=0, limit=2)
    assert [r.id for r in first.items] == newest_first[:2]
    assert (first.total, first.has_more) == (5, True)
    last = source.runs(world.agent, offset=4, limit=2)
    assert [r.id for r in last.items] == newest_first[4:]
    assert not last.has_more
    assert source.runs(world.sub_agent).items == ()


def test_locate_finds_the_tree_path_of_any_entity(source: NativeSource, rt: AgentRuntime,
                                                  world: World) -> None:
    sub_run = rt.start_run(world.sub_agent, "Write the fix")
    span = rt.start_span(sub_run, "tool", "write_file")
    approval = rt.request_approval(sub_run, "write_file", {"path": "a.py"}, span_id=span)
    chain = (world.agent, world.sub_agent)
    expected = Location(world.project, world.task, world.session, chain, sub_run, span)
    assert source.locate("span", span) == expected
    assert source.locate("approval", approval) == expected
    assert source.locate("run", sub_run) == Location(world.project, world.task, world.session, chain, sub_run)
    assert source.locate("agent", world.agent).agent_ids == (world.agent,)
    assert source.locate("session", world.session) == Location(world.project, world.task, world.session)
    assert source.locate("project", world.project) == Location(world.project)
    with pytest.raises(NotFound):
        source.locate("run", "run_missing")
    with pytest.raises(NotFound):
        source.locate("gizmo", world.run)


def test_run_and_agent_return_fresh_rows(source: NativeSource, rt: AgentRuntime, world: World) -> None:
    rt.set_agent_status(world.sub_agent, "waiting")
    assert source.agent(world.sub_agent).status == "waiting"
    assert source.agent(world.agent).run_count == 1
    assert next(p for p in source.projects() if p.id == world.project).status == "waiting"
    assert source.run(world.run).pending_approvals == 1
    with pytest.raises(NotFound):
        source.run("run_missing")
    with pytest.raises(NotFound):
        source.agent("agt_missing")


def test_spans_accumulate_usage_on_their_run(source: NativeSource, rt: AgentRuntime, world: World) -> None:
    root = rt.start_span(world.run, "agent", "planner")
    call = rt.start_span(world.run, "model", "chat", parent_span_id=root, input_text="hi")
    rt.finish_span(call, output_text="hello", input_tokens=100, output_tokens=20, cost_usd=0.5,
                   attributes={"temperature": 0})
    rt.finish_span(root)
    table = source.span_table(world.run)
    assert table.ids == [root, call] and table.parent_ids == [None, root]
    span = source.span(call)
    assert (span.output_text, span.usage.total_tokens, span.attributes) == ("hello", 120, {"temperature": 0})
    run = source.runs(world.agent).items[0]
    assert (run.usage.input_tokens, run.usage.output_tokens, run.usage.cost_usd) == (100, 20, 0.5)
    assert len(source.span_table("run_missing")) == 0


def _texts(source: NativeSource, span_id: str) -> list[tuple[str, int, str]]:
    return [(s.item_id, s.revision, s.content) for s in source.sent_context(span_id)]


def test_sent_context_replays_what_the_model_saw_after_edits_and_compactions(
        source: NativeSource, rt: AgentRuntime, world: World) -> None:
    first = rt.start_span(world.run, "model", "call 1", context_of_agent=world.agent)
    seen = _texts(source, first)
    assert [item for item, _, _ in seen] == list(world.items)
    ctx = source.context(world.agent)
    source.edit_item(world.items[0], "a new system prompt", ctx.items[0].revision, "op")
    ctx = source.context(world.agent)
    source.set_group_visibility(world.groups[1], False, ctx.groups[1].revision, "op")
    ctx = source.context(world.agent)
    source.compact(world.agent, world.items[:2], "summary of the start", "", ctx.context_revision, "op")
    second = rt.start_span(world.run, "model", "call 2", context_of_agent=world.agent)
    assert _texts(source, first) == seen  # unchanged by everything that happened since
    later = source.sent_context(second)
    assert [s.content for s in later] == ["summary of the start", "assistant answers"]
    assert source.span(second).context_revision == source.context(world.agent).context_revision


def test_runtime_refuses_dangling_references(rt: AgentRuntime, world: World) -> None:
    with pytest.raises(NotFound):
        rt.create_task("prj_missing", "t")
    with pytest.raises(NotFound):
        rt.new_turn_group("agt_missing")
    with pytest.raises(InvalidInput):
        rt.append_context(world.sub_agent, world.groups[0], "message", "user", "not my group")
    with pytest.raises(NotFound):
        rt.start_run("agt_missing", "r")
    with pytest.raises(InvalidInput):
        rt.request_approval(world.run, "shell", "[1, 2]")


def test_wait_for_decision_returns_the_operators_edit(source: NativeSource, rt: AgentRuntime,
                                                      world: World) -> None:
    def operator() -> None:
        time.sleep(0.05)
        source.decide(world.approval, approve=True, actor="alice", edited_arguments='{"cmd": "ls -la"}')

    thread = threading.Thread(target=operator)
    thread.start()
    decision = rt.wait_for_decision(world.approval, timeout_s=5, poll_s=0.01)
    thread.join()
    assert (decision.status, decision.actor, decision.arguments) == ("approved", "alice", '{"cmd":"ls -la"}')


def test_waiting_past_the_deadline_expires_the_approval(source: NativeSource, rt: AgentRuntime,
                                                         world: World) -> None:
    approval = rt.request_approval(world.run, "shell", {"cmd": "rm"}, timeout_s=0.02)
    assert rt.poll_decision(approval) is None or source.approval(approval).status == "expired"
    decision = rt.wait_for_decision(approval, timeout_s=2, poll_s=0.01)
    assert decision.status == "expired"
    assert rt.wait_for_decision(world.approval, timeout_s=0.01, poll_s=0.005).status == "pending"


def test_info_counts_rows(source: NativeSource, world: World) -> None:
    info = source.info()
    assert info.counts["agents"] == 2
    assert info.counts["pending approvals"] == 1
    assert not info.read_only and info.schema_version is not None


def test_a_long_runs_token_sums_pass_the_32_bit_range(rt: AgentRuntime) -> None:
    """Each span's counts fit 32 bits, the run's sums do not: kept on both backends (SQLite's INTEGER is
    64-bit; PostgreSQL's `runs` token columns are BIGINT since 0022_bigint_tokens)."""
    from sqlalchemy import text

    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                       "a", "m"), "r")
    for _ in range(3):
        rt.finish_span(rt.start_span(run, "model", "call"), "ok", None, input_tokens=2_000_000_000,
                       output_tokens=1_000_000_000)
    with rt.store.reading() as session:
        sums = session.execute(text("SELECT input_tokens, output_tokens FROM runs WHERE id = :run"),
                               {"run": run}).one()
    assert tuple(sums) == (6_000_000_000, 3_000_000_000)
