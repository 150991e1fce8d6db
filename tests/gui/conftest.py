"""Fixtures for view tests: an offscreen Qt, a small store with every kind of data, and Services."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import prebuilt


@dataclass
class World:
    """Ids of a small, fully populated store (see `build_world`)."""

    path: Path
    project_id: str
    task_id: str
    session_id: str
    agent_id: str
    sub_agent_id: str
    run_id: str
    model_span_id: str
    tool_span_id: str
    error_span_id: str
    approval_ids: list[str]
    group_ids: list[str]
    item_ids: list[str]


def build_world(path: Path) -> World:
    source = NativeSource.open(str(path))
    rt = AgentRuntime(source.store)
    pid = rt.create_project("Payments service")
    tid = rt.create_task(pid, "Fix flaky settlement test")
    sid = rt.create_session(tid, "Session 1")
    aid = rt.create_agent(sid, "planner", "claude-sonnet-4", context_budget=8_000)
    sub = rt.create_agent(sid, "coder", "gpt-4.1", parent_agent_id=aid)
    rid = rt.start_run(aid, "Investigate failure")
    groups, items = [], []
    g = rt.new_turn_group(aid, "turn")
    groups.append(g)
    items.append(rt.append_context(aid, g, "message", "system", "You are a careful planner."))
    items.append(rt.append_context(aid, g, "message", "user", "The settlement test fails about 1 in 20 runs."))
    g = rt.new_turn_group(aid, "tool")
    groups.append(g)
    items.append(rt.append_context(aid, g, "tool_calls", "assistant", '{"tool": "read_file", "path": "settle.py"}'))
    items.append(rt.append_context(aid, g, "result", "tool", "<b>def settle():</b>\n    ...\n" * 40))
    g = rt.new_turn_group(aid, "turn")
    groups.append(g)
    items.append(rt.append_context(aid, g, "message", "assistant", "The race is in the ledger lock. ✓ ünïcode"))
    root = rt.start_span(rid, "agent", "planner")
    model = rt.start_span(rid, "model", "claude-sonnet-4 chat", parent_span_id=root, context_of_agent=aid,
                          input_text='{"messages": 5}')
    rt.finish_span(model, "ok", "I will read settle.py", input_tokens=1200, output_tokens=180, cost_usd=0.0123)
    tool = rt.start_span(rid, "tool", "read_file", parent_span_id=root, attributes={"path": "settle.py"})
    rt.finish_span(tool, "ok", "<html><a href='x'>not a link</a></html>")
    err = rt.start_span(rid, "tool", "run_shell", parent_span_id=root)
    rt.finish_span(err, "error", None, error="exit status 1: pytest failed")
    rt.start_span(rid, "sub_agent", "coder", parent_span_id=root)
    approvals = [
        rt.request_approval(rid, "run_shell", {"cmd": "pytest -x tests/test_settle.py"}, span_id=tool, timeout_s=600),
        rt.request_approval(rid, "write_file", {"path": "settle.py", "content": "fix"}, span_id=tool, timeout_s=900),
        rt.request_approval(rid, "send_email", {"to": "<script>alert(1)</script>"}, timeout_s=1200),
    ]
    source.close()
    return World(path, pid, tid, sid, aid, sub, rid, model, tool, err, approvals, groups, items)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return build_world(prebuilt(tmp_path / "store.sqlite"))


@pytest.fixture
def services(world: World, qtbot: object) -> Iterator[Services]:
    source = NativeSource.open(str(world.path))
    source.watch(poll_interval_s=0.02)
    services = Services.create(source, actor="tester", coalesce_ms=10)
    yield services
    services.close()
    source.close()


@pytest.fixture(autouse=True)
def qasync_loop(qapp: Any) -> Iterator[Any]:
    """The window's `@asyncSlot` coroutines run on qasync's loop, as in the app; qtbot's event processing
    drives it, so the tests wait for their results the same way they wait for any Qt signal."""
    import asyncio

    import qasync

    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    yield loop
    # Store reads still in flight when the test ends are closed here, as their answers have nothing left to
    # reach, rather than left for garbage collection to warn about ("never awaited"). Not by running the loop:
    # that would deliver answers to widgets already deleted.
    for task in asyncio.all_tasks(loop):
        if not task.done():
            task.get_coro().close()
    asyncio.set_event_loop(None)
    loop.close()  # now, while its Qt objects live (at garbage collection they may already be gone)
