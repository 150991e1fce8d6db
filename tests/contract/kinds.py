"""The five sources the contract runs against: how each is built, opened and written to from outside.

A `Kind` builds its database (the native store through `AgentRuntime`, the four
foreign runtimes from their fixtures in `tests/store/sources/`), opens it read-only or with
writes, and names the few ids a behaviour needs that the tree walk cannot find on its
own (the approval to decide, the item to edit). `write` is the runtime in another
connection (a subprocess for the foreign ones) committing new rows; it returns the
changes the source's follower must turn them into.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.source import Source
from agentdesk.store.sources import open_source
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture
from tests.store.sources.fixtures_maka import build_maka_fixture
from tests.store.sources.fixtures_stageflow import build_stageflow_fixture
from tests.store.sources.fixtures_vgxness import build_vgxness_fixture
from tests.store.sources.foreign_helpers import run_python
from tests.store.sources.test_lensagent import RUNTIME_WRITES as LENSAGENT_WRITER
from tests.store.sources.test_maka_live import WRITER as MAKA_WRITER
from tests.store.sources.test_stageflow import WRITER as STAGEFLOW_WRITER
from tests.store.sources.test_vgxness import WRITER as VGXNESS_WRITER

Expected = set[tuple[str, str, str]]
"""(entity, op, id) of the changes a write must produce."""


@dataclass(frozen=True)
class Kind:
    name: str
    build: Callable[[Path], dict[str, str]]
    write: Callable[[Path, dict[str, str]], Expected]
    decidable: str
    """Key in the built ids of a pending approval a writer may decide."""
    context_agent: str
    """Key of an agent whose context has groups and items."""
    edit: tuple[str, str] | None = None
    """(key of an editable item, new content) where EDIT_ITEM is supported."""
    has_context: bool = True
    """False for a runtime that keeps no agent context (its window reads as empty)."""

    def __str__(self) -> str:
        return self.name

    def open(self, path: Path, *, writes: bool) -> Source:
        if self.name == "agentdesk":  # open_source opens our own stores read-write: ask for read-only here
            return NativeSource(open_store(str(path), create=False, read_only=not writes))
        return open_source(str(path), allow_writes=writes)


# -- agentdesk's own store ---------------------------------------------------------------------
def build_native(path: Path) -> dict[str, str]:
    store = open_store(str(path))
    try:
        rt = AgentRuntime(store)
        project = rt.create_project("Payments")
        task = rt.create_task(project, "Fix the flaky test")
        session = rt.create_session(task, "Session 1")
        agent = rt.create_agent(session, "planner", "model-a")
        rt.create_agent(session, "coder", "model-b", parent_agent_id=agent)
        run = rt.start_run(agent, "Investigate")
        root = rt.start_span(run, "agent", "planner turn")
        for n in range(6):
            span = rt.start_span(run, "tool", f"step {n}", parent_span_id=root, input_text=f"input {n}")
            rt.finish_span(span, output_text=f"output {n}", input_tokens=n, output_tokens=2 * n)
        items = []
        for kind, contents in (("turn", ["system prompt", "user asks"]), ("tool", ["file contents " * 20]),
                               ("turn", ["assistant answers", "user thanks"])):
            group = rt.new_turn_group(agent, kind)
            items += [rt.append_context(agent, group, "message", "user", text) for text in contents]
        approval = rt.request_approval(run, "shell", {"cmd": "ls"})
        NativeSource(store).decide(rt.request_approval(run, "shell", {"cmd": "pwd"}), True, "ops")
        return {"project": project, "agent": agent, "run": run, "pending": approval, "item": items[1]}
    finally:
        store.close()


def write_native(path: Path, ids: dict[str, str]) -> Expected:
    """Another Store (another connection, another origin) adds a span and asks for an approval."""
    store = open_store(str(path), create=False)
    try:
        rt = AgentRuntime(store)
        span = rt.start_span(ids["run"], "tool", "written elsewhere")
        approval = rt.request_approval(ids["run"], "deploy", {"env": "prod"})
    finally:
        store.close()
    return {("span", "insert", span), ("approval", "insert", approval)}


# -- the four foreign runtimes, written by their own SQL in another process ----------------------
def steps(writer: str, *runs: tuple[str, ...]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        for arguments in runs:
            run_python(writer, str(path), *arguments)
    return write


def foreign(writer: Callable[[Path], None], expected: Expected) -> Callable[[Path, dict[str, str]], Expected]:
    def write(path: Path, ids: dict[str, str]) -> Expected:
        writer(path)
        return expected
    return write


KINDS = (
    Kind("agentdesk", build_native, write_native, "pending", "agent", ("item", "edited by the contract")),
    Kind("lensagent", build_lensagent_fixture,
         foreign(steps(LENSAGENT_WRITER, ()),
                 {("approval", "insert", "cal_live"), ("span", "insert", "call:cal_live")}),
         "pending_call", "agent", ("open_item", '[{"id":"call_B1","name":"run_shell","arguments":{}}]')),
    Kind("stageflow", build_stageflow_fixture,
         foreign(steps(STAGEFLOW_WRITER, ("span",), ("approval", "3600")),
                 {("span", "insert", "sp_live"), ("approval", "insert", "apr_live")}),
         "pending_approval", "agent"),
    Kind("vgxness", build_vgxness_fixture,
         foreign(steps(VGXNESS_WRITER, ("event",), ("approval",)),
                 {("span", "insert", "rev_live"), ("span", "insert", "chk_live"), ("approval", "insert", "apv_live")}),
         "pending_approval", "agent", has_context=False),
    Kind("maka", build_maka_fixture,
         foreign(steps(MAKA_WRITER, ()), {("approval", "insert", "req_live"),
                                          ("span", "insert", "tool:ses_grand/run_g1/live_1")}),
         "pending", "agent_main"),
)
