"""Every view's read on both backends (issue 21): agentdesk's own store on SQLite and on PostgreSQL answers
the tree, timeline, context, approvals, search, critical path, diff and export the same way.

The store is the contract's native fixture (`kinds.build_native`) plus a second run to compare; each read
is asserted on what that fixture holds, so a path that works on one backend only fails here (the timeline
asserted a SQLite connection; search scanned span by span on PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentdesk.cli import main as cli
from agentdesk.store.analysis.run_diff import diff_runs
from agentdesk.store.analysis.run_path import run_path
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from agentdesk.store.readmodel import ApprovalStatus
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search.run_search import search_run
from agentdesk.store.search.store_search import HitKind, search_store
from agentdesk.store.timeline.read import span_columns
from tests.contract.kinds import build_native


@pytest.fixture
def built(store_path: Path) -> dict[str, str]:
    ids = build_native(store_path)
    store = open_store(str(store_path))
    try:
        rt = AgentRuntime(store)
        again = rt.start_run(ids["agent"], "Investigate again")
        root = rt.start_span(again, "agent", "planner turn")
        for n in range(4):
            rt.finish_span(rt.start_span(again, "tool", f"step {n}", parent_span_id=root, input_text=f"input {n}"))
        rt.finish_span(root)
        ids["again"] = again
    finally:
        store.close()
    return ids


@pytest.fixture
def viewer(store_path: Path, built: dict[str, str]) -> Iterator[NativeSource]:
    """Read-only, as a viewer's window opens it."""
    source = NativeSource(open_store(str(store_path), create=False, read_only=True))
    yield source
    source.close()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return code, captured.out


def test_tree_reaches_both_runs(viewer: NativeSource, built: dict[str, str]) -> None:
    projects = viewer.projects()
    assert [p.name for p in projects] == ["Payments"]
    runs = viewer.runs(built["agent"]).items
    assert {r.id for r in runs} == {built["run"], built["again"]}


def test_timeline_reads_the_run(viewer: NativeSource, built: dict[str, str]) -> None:
    columns = span_columns(viewer, built["run"])
    assert len(columns) == 7 and columns.complete and columns.keys is not None
    assert sorted(columns.names) == ["planner turn", *(f"step {n}" for n in range(6))]
    first = span_columns(viewer, built["run"], 3)
    assert list(first.ids) == list(columns.ids)[:3] and not first.complete


def test_context_and_approvals(viewer: NativeSource, built: dict[str, str]) -> None:
    context = viewer.context(built["agent"])
    assert built["item"] in {i.id for i in context.items} and len(context.groups) == 3
    assert [a.id for a in viewer.approvals(ApprovalStatus.PENDING)] == [built["pending"]]
    assert len(viewer.approvals(None)) == 2


def test_search_in_a_run_and_across_the_store(viewer: NativeSource, built: dict[str, str],
                                             capsys: pytest.CaptureFixture[str], store_path: Path) -> None:
    assert search_run(viewer, built["run"], "input 3").total == 1
    assert search_run(viewer, built["run"], "kind:tool step").total == 6
    found = search_store(viewer, "step")
    assert found.totals[HitKind.SPAN] == 10 and not found.scanned
    code, out = _cli(capsys, "--store", str(store_path), "search", "input", "--run", built["again"], "--json")
    answer = json.loads(out)
    assert code == 0 and answer["total"] == 4 and not answer["scanned"]


def test_critical_path_and_diff(viewer: NativeSource, built: dict[str, str],
                                capsys: pytest.CaptureFixture[str], store_path: Path) -> None:
    path = run_path(viewer, built["again"])
    assert len(path.path) >= 1 and path.rows()[0]["name"] == "planner turn"
    diff = diff_runs(viewer, built["run"], built["again"])
    assert diff is not None
    code, out = _cli(capsys, "--store", str(store_path), "critical-path", built["again"], "--json")
    assert code == 0 and json.loads(out)["run_id"] == built["again"]
    code, out = _cli(capsys, "--store", str(store_path), "diff", built["run"], built["again"], "--json")
    assert code == 0 and json.loads(out)


def test_export_writes_every_span(built: dict[str, str], capsys: pytest.CaptureFixture[str], store_path: Path,
                                  tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    code, _out = _cli(capsys, "--store", str(store_path), "export", built["run"], "-o", str(target))
    assert code == 0
    document: dict[str, Any] = json.loads(target.read_text())
    spans = [s for r in document["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
    assert {s["name"] for s in spans} >= {"planner turn", *(f"step {n}" for n in range(6))}
