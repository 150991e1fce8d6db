"""The client library against a real store: registration, the approval gate, context read-back.

Operators' decisions come from another thread here (the same store commands the
window and the CLI call); tests/client/test_example_e2e.py does it across processes.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentdesk.client import AgentDesk, ApprovalResult, Outcome
from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.errors import InvalidInput
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from tests.waiting import eventually, wait_until


@pytest.fixture
def desk(store_path: Path) -> Iterator[AgentDesk]:
    with AgentDesk.connect(str(store_path), actor="test-agent") as opened:
        yield opened


def operator(store: Store, act: Callable[[str], object]) -> threading.Thread:
    """Decide the first pending approval as soon as it shows up, like a person watching the queue."""
    def watch() -> None:
        source = NativeSource(store)
        pending = eventually(lambda: source.approvals("pending"), what="a pending approval")
        act(pending[0].id)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_register_reuses_project_and_task_by_name(desk: AgentDesk) -> None:
    first = desk.register(project="billing", agent="refunder", model="m1")
    second = desk.register(project="billing", agent="auditor", model="m1")
    assert first.project_id == second.project_id
    assert first.session_id != second.session_id  # each registration is a conversation of its own
    source = NativeSource(desk.store)
    assert [p.name for p in source.projects()] == ["billing"]
    assert desk.attach(first.id).session_id == first.session_id


def test_approved_with_the_operators_edit(desk: AgentDesk) -> None:
    agent = desk.register(project="ops", agent="deployer")
    edited = '{"cmd": "ls /tmp", "dry_run": true}'
    thread = operator(desk.store, lambda aid: approval_commands.decide(desk.store, aid, True, "alice", None, edited))
    with agent.run("deploy") as run, run.span("agent", "deploy"):
        result = run.request_approval("shell", {"cmd": "rm -rf /tmp"}, expires_in=30)
    thread.join()
    assert result.outcome is Outcome.APPROVED and result.approved and result.edited
    assert result.arguments == {"cmd": "ls /tmp", "dry_run": True}
    assert result.original_arguments == {"cmd": "rm -rf /tmp"}
    assert result.decided_by == "alice"
    source = NativeSource(desk.store)
    approval = source.approval(result.approval_id)
    gate = source.span(approval.span_id or "")
    assert (gate.kind, gate.status) == ("gate", "ok")
    assert gate.parent_span_id is not None  # nested under the span that was open
    run_row = source.runs(agent.id).items[0]
    assert run_row.status == "done"


def test_denied_carries_the_reason(desk: AgentDesk) -> None:
    agent = desk.register(project="ops", agent="deployer")
    thread = operator(desk.store,
                      lambda aid: approval_commands.decide(desk.store, aid, False, "bob", "not on a Friday"))
    run = agent.start_run("deploy")
    result = run.request_approval("shell", {"cmd": "deploy"}, expires_in=30)
    thread.join()
    assert result.denied and not result.approved and not result.edited
    assert result.reason == "not on a Friday" and result.decided_by == "bob"
    assert result.arguments == {"cmd": "deploy"}
    assert "not on a Friday" in result.describe()
    source = NativeSource(desk.store)
    assert source.span(source.approval(result.approval_id).span_id or "").status == "error"


def test_expires_when_nobody_decides(desk: AgentDesk) -> None:
    run = desk.register(project="ops", agent="deployer").start_run("deploy")
    result = run.request_approval("shell", {"cmd": "deploy"}, expires_in=0.3)
    assert result.expired and result.decided_by is None
    stored = NativeSource(desk.store).approval(result.approval_id)
    assert stored.status == "expired"
    assert stored.decided_at is not None and stored.expires_at is not None
    assert stored.decided_at >= stored.expires_at  # not a moment before its time


def test_bad_arguments_are_refused_before_anything_is_written(desk: AgentDesk) -> None:
    run = desk.register(project="ops", agent="deployer").start_run("deploy")
    with pytest.raises(ValueError):
        run.request_approval("shell", {"cmd": "x"}, expires_in=0)
    with pytest.raises(InvalidInput):
        run.request_approval("shell", {"blob": "x" * 1_100_000})
    assert NativeSource(desk.store).approvals("all") == []


def test_async_variant_keeps_the_loop_running(desk: AgentDesk) -> None:
    agent = desk.register(project="ops", agent="async-agent")
    run = agent.start_run("deploy")
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    async def main() -> ApprovalResult:
        tick = asyncio.create_task(ticker())
        def after_ten_ticks(aid: str) -> None:  # decided only if the loop keeps ticking while the agent waits
            seen = len(ticks)
            wait_until(lambda: len(ticks) >= seen + 10, what="ten ticks of the agent's loop during its wait")
            approval_commands.decide(desk.store, aid, True, "carol", "fine", '{"n": 2}')

        operator(desk.store, after_ten_ticks)
        result = await run.arequest_approval("scale", {"n": 20}, expires_in=30)
        tick.cancel()
        return result

    result = asyncio.run(main())
    assert result.arguments == {"n": 2} and result.reason == "fine"
    assert len(ticks) >= 10  # the loop ticked all along the wait


def test_async_cancel_withdraws_the_request(desk: AgentDesk) -> None:
    agent = desk.register(project="ops", agent="async-agent")
    run = agent.start_run("deploy")

    async def main() -> None:
        with pytest.raises(TimeoutError):  # the caller's own deadline cancels the task
            await asyncio.wait_for(run.arequest_approval("scale", {"n": 20}, expires_in=30), 0.3)

    asyncio.run(main())
    source = NativeSource(desk.store)
    assert source.approvals("pending") == []
    approval = source.approvals("withdrawn")[0]
    assert approval.decided_by == "test-agent" and "cancelled" in (approval.reason or "")
    assert source.span(approval.span_id or "").status == "cancelled"
    assert source.runs(agent.id).items[0].status == "running"


def test_a_local_timeout_withdraws_and_says_so(desk: AgentDesk) -> None:
    run = desk.register(project="ops", agent="deployer").start_run("deploy")
    result = run.request_approval("shell", {"cmd": "deploy"}, expires_in=60, timeout=0.2)
    assert result.withdrawn and not result.approved and result.arguments == {"cmd": "deploy"}
    assert "withdrawn" in result.describe()
    source = NativeSource(desk.store)
    assert source.approval(result.approval_id).status == "withdrawn"
    assert source.approvals("pending") == []


def test_async_timeout_withdraws(desk: AgentDesk) -> None:
    run = desk.register(project="ops", agent="deployer").start_run("deploy")
    result = asyncio.run(run.arequest_approval("shell", {"cmd": "x"}, expires_in=60, timeout=0.2))
    assert result.outcome is Outcome.WITHDRAWN
    assert NativeSource(desk.store).approval(result.approval_id).status == "withdrawn"


def test_a_decision_made_before_the_timeout_stands(desk: AgentDesk) -> None:
    run = desk.register(project="ops", agent="deployer").start_run("deploy")
    operator(desk.store, lambda aid: approval_commands.decide(desk.store, aid, True, "carol"))
    result = run.request_approval("shell", {"cmd": "deploy"}, expires_in=60, timeout=3)
    assert result.approved and result.decided_by == "carol"


def test_ctrl_c_while_waiting_withdraws(desk: AgentDesk, monkeypatch: pytest.MonkeyPatch) -> None:
    run = desk.register(project="ops", agent="deployer").start_run("deploy")
    calls = {"n": 0}
    real_sleep = time.sleep

    def interrupted(seconds: float) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr("agentdesk.store.runtime.time.sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run.request_approval("shell", {"cmd": "deploy"}, expires_in=60)
    monkeypatch.undo()
    source = NativeSource(desk.store)
    withdrawn = source.approvals("withdrawn")
    assert len(withdrawn) == 1 and "interrupted" in (withdrawn[0].reason or "")


def test_context_reads_back_the_operators_changes(desk: AgentDesk) -> None:
    agent = desk.register(project="ops", agent="reader")
    agent.add_context("You are careful.", role="system", locked=True)
    agent.new_turn()
    noisy = [agent.add_context(f"log line {n}", role="tool", kind="result") for n in range(3)]
    agent.new_turn()
    question = agent.add_context("What failed?", role="user")
    source = NativeSource(desk.store)
    snap = source.context(agent.id)
    item = next(i for i in snap.items if i.id == question)
    source.edit_item(question, "What failed last night?", item.revision, "alice")
    snap = source.context(agent.id)
    compaction_id = source.compact(agent.id, noisy, "three log lines, nothing failed", "", snap.context_revision,
                                "alice")
    context = agent.context()
    assert [e.content for e in context.entries] == [
        "You are careful.", "three log lines, nothing failed", "What failed last night?"]
    assert [e.locked for e in context.entries] == [True, False, False]
    assert [e.edited for e in context.entries] == [False, False, True]
    assert context.entries[1].kind == "compaction" and context.hidden == 3
    assert context.messages()[2] == {"role": "user", "content": "What failed last night?"}
    source.undo_compaction(compaction_id, "alice")
    group = next(g for g in source.context(agent.id).groups if g.kind == "turn" and g.ordinal == 2)
    source.set_group_visibility(group.id, False, group.revision, "alice")
    assert [e.content for e in agent.context().entries] == ["You are careful.", "What failed last night?"]


def test_model_call_records_what_was_sent(desk: AgentDesk) -> None:
    agent = desk.register(project="ops", agent="reader")
    agent.add_context("hello", role="user")
    with agent.run("chat") as run, run.model_call("chat m1") as span:
        span.output, span.input_tokens, span.output_tokens = "hi", 3, 1
    source = NativeSource(desk.store)
    sent = source.sent_context(span.id)
    assert [s.content for s in sent] == ["hello"]
    assert source.span(span.id).usage.input_tokens == 3


def test_a_failing_block_fails_the_span_and_the_run(desk: AgentDesk) -> None:
    agent = desk.register(project="ops", agent="reader")
    with pytest.raises(RuntimeError), agent.run("chat") as run, run.span("tool", "boom") as span:
        raise RuntimeError("disk full")
    source = NativeSource(desk.store)
    assert source.span(span.id).status == "error"
    assert "disk full" in (source.span(span.id).error or "")
    assert source.runs(agent.id).items[0].status == "failed"


def test_an_agents_project_and_its_otel_spans_share_one_project(desk: AgentDesk) -> None:
    from agentdesk.store.ingest import ingest_json

    agent = desk.register(project="cleanup-agent", agent="janitor")
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "invoke_agent janitor", "kind": 1,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000"}
    ingest_json(desk.store, {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "cleanup-agent"}}]},
        "scopeSpans": [{"spans": [span]}]}]})
    projects = NativeSource(desk.store).projects()
    assert [(p.id, p.name) for p in projects] == [(agent.project_id, "cleanup-agent")]


def test_ids_for_otel_traces_match_the_receivers() -> None:
    from agentdesk.client import otel_span_id, trace_run_id
    from agentdesk.store.ingest.spans import run_row_id, span_row_id

    trace, span = 0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B174
    assert trace_run_id(trace) == trace_run_id(f"{trace:032X}") == run_row_id(f"{trace:032x}")
    assert otel_span_id(trace, span) == span_row_id(f"{trace:032x}", f"{span:016x}")


def test_join_trace_gates_a_tool_inside_the_received_run(desk: AgentDesk) -> None:
    from agentdesk.client import otel_span_id
    from agentdesk.store.errors import NotFound
    from agentdesk.store.ingest import ingest_json

    trace, root, tool = "ab" * 16, "01" * 8, "02" * 8
    with pytest.raises(NotFound, match="agentdesk receive"):
        desk.join_trace(trace, wait_s=0.2)

    def span(span_id: str, name: str, parent: str | None = None) -> dict[str, object]:
        raw: dict[str, object] = {"traceId": trace, "spanId": span_id, "name": name, "kind": 1,
                                  "startTimeUnixNano": "1700000000000000000",
                                  "endTimeUnixNano": "1700000001000000000",
                                  "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]}
        if parent:
            raw["parentSpanId"] = parent
        return raw

    def send(*spans: dict[str, object]) -> None:
        ingest_json(desk.store, {"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
            "scopeSpans": [{"spans": list(spans)}]}]})

    send(span("03" * 8, "chat m1", root))  # the first batch: a model call that already ended
    run = desk.join_trace(int(trace, 16))
    thread = operator(desk.store, lambda aid: approval_commands.decide(desk.store, aid, True, "ann"))
    result = run.request_approval("shell", {"cmd": "ls"}, parent_span_id=otel_span_id(trace, tool), expires_in=30)
    thread.join()
    assert result.approved
    send(span(tool, "execute_tool shell", root), span(root, "invoke_agent a"))  # the tool span arrives later
    source = NativeSource(desk.store)
    approval = source.approval(result.approval_id)
    assert approval.run_id == run.id == "otr_" + trace
    gate = source.span(approval.span_id or "")
    assert gate.parent_span_id == otel_span_id(trace, tool)
    assert source.span(gate.parent_span_id).name == "execute_tool shell"


def test_an_approval_asked_before_its_agent_span_arrived_moves_to_the_real_agent(desk: AgentDesk) -> None:
    from sqlalchemy import select

    from agentdesk.store.ingest import ingest_json
    from agentdesk.store.persistence import schema as sc

    trace, root, chat = "cd" * 16, "01" * 8, "03" * 8

    def send(*spans: tuple[str, str, str | None, str]) -> None:
        ingest_json(desk.store, {"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
            "scopeSpans": [{"spans": [{
                "traceId": trace, "spanId": sid, "name": name, "kind": 1, **({"parentSpanId": p} if p else {}),
                "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": op}},
                               {"key": "gen_ai.agent.name", "value": {"stringValue": "deployer"}}]}
                for sid, name, p, op in spans]}]}]})

    send((chat, "chat m1", root, "chat"))  # children first: the run is filed under a stand-in agent
    run = desk.join_trace(trace)
    stand_in = run.agent.id
    waiting = threading.Thread(target=lambda: run.request_approval("shell", {"cmd": "ls"}, expires_in=30,
                                                                    timeout=20), daemon=True)
    waiting.start()
    source = NativeSource(desk.store)
    pending = eventually(lambda: source.approvals("pending"), what="a pending approval")[0]
    assert pending.agent_id == stand_in
    with desk.store.reading() as s:
        before = s.execute(select(sc.ChangeRow.seq).order_by(sc.ChangeRow.seq.desc())).scalars().first() or 0
    send((root, "invoke_agent deployer", None, "invoke_agent"))  # the agent span, last (it ended last)
    moved = source.approval(pending.id)
    real = source.runs(moved.agent_id).items[0]
    assert moved.agent_id != stand_in and real.id == run.id and moved.agent_name == "deployer"
    assert moved.status == "pending"
    with desk.store.reading() as s:
        changes = s.execute(select(sc.ChangeRow.entity, sc.ChangeRow.entity_id, sc.ChangeRow.parents)
                            .where(sc.ChangeRow.seq > before)).all()
        assert s.get(sc.AgentRow, stand_in) is None  # nothing is left on the stand-in
    approval_changes = [json.loads(p) for e, i, p in changes if e == "approval" and i == pending.id]
    assert any(c["agent"] == moved.agent_id for c in approval_changes)  # (heartbeats log changes too)
    approval_commands.decide(desk.store, pending.id, True, "ann")
    waiting.join(10)
    assert source.approval(pending.id).status == "approved"


def test_spans_nest_within_their_own_run_only(desk: AgentDesk) -> None:
    agent = desk.register(project="ops", agent="two-runs")
    first, second = agent.start_run("one"), agent.start_run("two")
    with first.span("agent", "outer") as outer, first.span("tool", "inner") as inner, \
            second.span("tool", "elsewhere") as elsewhere:
        pass
    source = NativeSource(desk.store)
    assert source.span(inner.id).parent_span_id == outer.id
    assert source.span(elsewhere.id).parent_span_id is None  # another run's open span is no parent
