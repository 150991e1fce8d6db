"""Search across the store: spans of every run, approvals and context items, on native and foreign sources."""

from __future__ import annotations

from pathlib import Path

from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search.store_search import HitKind, search_store
from agentdesk.store.sources import open_source
from tests.conftest import World
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture


def test_native_store_search_groups_every_kind_by_run(source: NativeSource, world: World, rt: AgentRuntime) -> None:
    span = rt.start_span(world.run, "tool", "shell", input_text='{"cmd": "ls -la"}')
    rt.finish_span(span, output_text="file contents listed")
    found = search_store(source, "file contents")
    assert not found.scanned
    assert found.totals[HitKind.SPAN] == 1 and found.totals[HitKind.CONTEXT] == 1
    (group,) = found.groups
    assert group.run_id == world.run and group.title == "Investigate" and group.agent == "planner"
    kinds = {h.kind for h in group.hits}
    assert kinds == {HitKind.SPAN, HitKind.CONTEXT}
    assert [h.span_id for h in group.hits if h.kind is HitKind.SPAN] == [span]
    approvals = search_store(source, "ls")
    assert approvals.totals[HitKind.APPROVAL] == 1
    assert search_store(source, "kind:tool").totals == {HitKind.SPAN: 1, HitKind.APPROVAL: 0, HitKind.CONTEXT: 0}


def test_limit_caps_the_listed_hits_not_the_count(source: NativeSource, world: World, rt: AgentRuntime) -> None:
    for n in range(5):
        rt.start_span(world.run, "tool", f"step {n}")
    found = search_store(source, "step", limit=2)
    assert found.totals[HitKind.SPAN] == 5
    assert sum(len(g.hits) for g in found.groups) == 2


def test_foreign_store_search_scans_run_by_run(tmp_path: Path) -> None:
    path = tmp_path / "lensagent.db"
    build_lensagent_fixture(path)
    source = open_source(str(path))
    try:
        found = search_store(source, "kind:tool")
        assert found.scanned and found.totals[HitKind.SPAN] > 0
        assert all(h.run_id == g.run_id for g in found.groups for h in g.hits)
    finally:
        source.close()
