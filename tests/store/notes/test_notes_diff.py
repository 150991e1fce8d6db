"""The run diff shows what operators left on each side's spans: in the store's result, the CLI and the rows."""

from __future__ import annotations

import json

import pytest

import agentdesk.cli.main as cli
from agentdesk.model.diff.rows import build_rows
from agentdesk.store.analysis.run_diff import diff_runs
from agentdesk.store.native import NativeSource
from agentdesk.store.notes import commands
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World


def two_runs(store: Store, rt: AgentRuntime, world: World) -> tuple[str, str, str, str]:
    spans = []
    for run in (world.run, rt.start_run(world.agent, "again")):
        span = rt.start_span(run, "tool", "run_shell")
        rt.finish_span(span)
        spans.append((run, span))
    (run_a, span_a), (run_b, span_b) = spans
    commands.add_label(store, "span", span_a, "needs-review", "alice")
    commands.add_note(store, "span", span_b, "better \x1b[31mnow", "bob")
    return run_a, span_a, run_b, span_b


def test_each_side_carries_its_marks(store: Store, rt: AgentRuntime, world: World) -> None:
    run_a, span_a, run_b, span_b = two_runs(store, rt, world)
    diff = diff_runs(NativeSource(store), run_a, run_b)
    assert diff.marks_line(span_a, span_b) == "A: needs-review · B: 1 note"
    rows = build_rows(diff).rows
    assert [r.marks for r in rows if r.b_span == span_b] == ["A: needs-review · B: 1 note"]


def test_the_cli_diff_names_them(capsys: pytest.CaptureFixture[str], store: Store, store_path: object,
                                 rt: AgentRuntime, world: World) -> None:
    run_a, _, run_b, _ = two_runs(store, rt, world)
    assert cli.main(["diff", "--store", str(store_path), run_a, run_b]) == 0
    assert "⚑ A: needs-review · B: 1 note" in capsys.readouterr().out
    assert cli.main(["diff", "--store", str(store_path), run_a, run_b, "--json"]) == 0
    spans = json.loads(capsys.readouterr().out)["spans"]
    pair = next(p for p in spans if p["a"] and p["b"] and p["a"]["name"] == "run_shell")
    assert pair["a"]["labels"] == ["needs-review"]
    assert pair["b"]["notes"][0]["text"] == "better ⟨ESC⟩[31mnow"  # agent-safe JSON: the escape is a mark
