"""Run-to-run alignment: hypothesis properties on the pure function, then diffs through real sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentdesk.store.analysis.align import Change, RunSpans, align, classify
from agentdesk.store.analysis.run_diff import diff_runs, summary_line
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.sources import open_source
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture

NAMES = ["plan", "chat", "read_file", "shell"]


@st.composite
def runs(draw: st.DrawFn) -> RunSpans:
    n = draw(st.integers(min_value=0, max_value=25))
    parents, kinds, names, starts, ends, args = [], [], [], [], [], []
    for i in range(n):
        parents.append(draw(st.integers(min_value=-1, max_value=i - 1)))
        name = draw(st.sampled_from(NAMES))
        kinds.append("tool" if name in ("read_file", "shell") else "model")
        names.append(name)
        start = float(i)
        starts.append(start)
        ends.append(start + draw(st.sampled_from([0.01, 0.5, 1.0, 2.0, 5.0])))
        args.append(draw(st.sampled_from(["a", "b"])) if kinds[-1] == "tool" else None)
    return RunSpans([f"s{i}" for i in range(n)], parents, kinds, names, ["ok"] * n, starts, ends, args)


@given(runs())
def test_a_run_against_itself_is_all_same(run: RunSpans) -> None:
    alignment = align(run, run)
    assert len(alignment.pairs) == len(run)
    assert all(p.change is Change.SAME and p.a == p.b for p in alignment.pairs)


@given(runs(), runs())
def test_alignment_is_symmetric(a: RunSpans, b: RunSpans) -> None:
    forward = {(p.a, p.b, p.change) for p in align(a, b).pairs}
    backward = {(p.b, p.a, p.change.mirrored) for p in align(b, a).pairs}
    assert forward == backward


@given(runs(), runs())
def test_every_span_appears_exactly_once(a: RunSpans, b: RunSpans) -> None:
    pairs = align(a, b).pairs
    assert sorted(p.a for p in pairs if p.a is not None) == list(range(len(a)))
    assert sorted(p.b for p in pairs if p.b is not None) == list(range(len(b)))
    for p in pairs:  # a row's parent row pairs the spans' parents
        if p.parent is not None:
            up = pairs[p.parent]
            assert p.a is None or up.a == a.parents[p.a]
            assert p.b is None or up.b == b.parents[p.b]


def test_tool_calls_align_by_arguments_and_durations_classify() -> None:
    a = RunSpans(["r", "t1", "t2", "m"], [-1, 0, 0, 0], ["agent", "tool", "tool", "model"],
                 ["run", "read_file", "read_file", "chat"], ["ok"] * 4, [0, 1, 2, 3], [10, 2, 3, 4],
                 [None, "x", "y", None])
    b = RunSpans(["R", "T2", "M", "T3"], [-1, 0, 0, 0], ["agent", "tool", "model", "tool"],
                 ["run", "read_file", "chat", "read_file"], ["ok"] * 4, [0, 1, 2, 9], [20, 2, 2.2, 9.5],
                 [None, "y", None, "z"])
    pairs = {(p.a, p.b): p.change for p in align(a, b).pairs}
    assert pairs == {(0, 0): Change.SLOWER, (2, 1): Change.SAME, (3, 2): Change.FASTER,
                     (1, None): Change.REMOVED, (None, 3): Change.ADDED}


def test_small_differences_are_same() -> None:
    assert classify(1.0, 1.04) is Change.SAME
    assert classify(10.0, 10.9) is Change.SAME
    assert classify(10.0, 12.0) is Change.SLOWER
    assert classify(None, 3.0) is Change.SAME


def _run(rt: AgentRuntime, agent: str, files: list[str], prompt: str) -> str:
    run = rt.start_run(agent, "fix")
    root = rt.start_span(run, "agent", "coder")
    group = rt.new_turn_group(agent)
    rt.append_context(agent, group, "message", "user", prompt)
    model = rt.start_span(run, "model", "chat", parent_span_id=root, context_of_agent=agent)
    rt.finish_span(model, input_tokens=100, output_tokens=20, cost_usd=0.01)
    for name in files:
        tool = rt.start_span(run, "tool", "read_file", parent_span_id=root, input_text=f'{{"path": "{name}"}}')
        rt.finish_span(tool, status="error" if name == "missing.py" else "ok")
    rt.finish_span(root)
    rt.set_run_status(run, "done")
    return run


def test_diff_of_two_native_runs(rt: AgentRuntime, source: NativeSource) -> None:
    sid = rt.create_session(rt.create_task(rt.create_project("P"), "T"), "S")
    agent = rt.create_agent(sid, "coder", "m")
    other = rt.create_agent(sid, "coder", "m")
    a = _run(rt, agent, ["a.py", "b.py"], "fix the bug")
    b = _run(rt, other, ["a.py", "missing.py"], "fix the bug, carefully")
    diff = diff_runs(source, a, b)
    counts = diff.alignment.counts()
    assert counts[Change.ADDED] == 1 and counts[Change.REMOVED] == 1
    assert len(diff.alignment.matched()) == 3  # root, chat, read_file a.py
    assert diff.totals_a.errors == 0 and diff.totals_b.errors == 1
    assert diff.totals_a.tokens == 120 and diff.totals_a.spans == 4
    (delta,) = diff.contexts
    assert [i.content for i in delta.only_a] == ["fix the bug"]
    assert [i.content for i in delta.only_b] == ["fix the bug, carefully"]
    assert "1 added, 1 removed" in summary_line(diff)


def test_diff_on_a_foreign_source(tmp_path: Path) -> None:
    path = tmp_path / "lensagent.db"
    build_lensagent_fixture(path)
    source = open_source(str(path))
    try:
        same = diff_runs(source, "run_sub", "run_sub")
        assert all(p.change is Change.SAME for p in same.alignment.pairs)
        assert len(same.alignment.pairs) == len(source.span_table("run_sub")) and not same.contexts
        other = diff_runs(source, "run_1", "run_sub2")
        assert other.alignment.count(Change.ADDED) + other.alignment.count(Change.REMOVED) > 0
    finally:
        source.close()


def test_unknown_run_is_not_found(source: NativeSource) -> None:
    from agentdesk.store.errors import NotFound
    with pytest.raises(NotFound):
        diff_runs(source, "run_a", "run_b")
