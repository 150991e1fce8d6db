"""A large trace is written in short staged transactions: a decision does not wait for it, and
readers see nothing of it until the flip, then all of it; cancel and stale clean-up leave nothing."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from agentdesk.store.approvals.commands import decide
from agentdesk.store.ingest import importer, staging
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.staged_writer import StagedTraceWriter
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.queries import NativeQueries
from agentdesk.store.runtime import AgentRuntime

SPANS = 20_001
TRACE = "ab" * 16
RUN = "otr_" + TRACE


def big_trace(path: Path, spans: int = SPANS, trace: str = TRACE) -> Path:
    """One trace: an agent span and `spans - 1` model/tool calls under it (plain OTLP/JSON)."""
    base = 1_700_000_000_000_000_000
    root = "c" * 16
    rows = [{"traceId": trace, "spanId": root, "name": "invoke_agent planner", "kind": 1,
             "startTimeUnixNano": str(base), "endTimeUnixNano": str(base + spans * 1_000_000),
             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                            {"key": "gen_ai.agent.name", "value": {"stringValue": "planner"}}]}]
    for n in range(1, spans):
        op = "chat" if n % 2 else "execute_tool"
        rows.append({"traceId": trace, "spanId": f"{n:016x}", "parentSpanId": root, "name": f"{op} {n}",
                     "kind": 3, "startTimeUnixNano": str(base + n * 1_000_000),
                     "endTimeUnixNano": str(base + n * 1_000_000 + 500_000),
                     "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": op}},
                                    {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "10"}}]})
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "big-import"}}]},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": rows}]}]}))
    return path


def visible_runs(store: Store) -> dict[str, int]:
    """Every run the tree shows (walked as the window does), with its span count."""
    q = NativeQueries(store)
    out: dict[str, int] = {}
    for project in q.projects():
        for task in q.tasks(project.id):
            for session in q.sessions(task.id):
                for agent in q.agents(session.id):
                    for run in q.runs(agent.id).items:
                        with store.reading() as s:
                            out[run.id] = s.execute(select(func.count()).select_from(sc.SpanRow)
                                                    .where(sc.SpanRow.run_id == run.id)).scalar_one()
    return out


def staged_rows(store: Store) -> int:
    with store.reading() as s:
        return int(s.execute(select(func.count()).select_from(sc.ImportStagingRow)).scalar_one())


def events_of(store: Store, run_id: str) -> int:
    with store.reading() as s:
        return int(s.execute(select(func.count()).select_from(sc.ChangeRow)
                             .where(sc.ChangeRow.entity_id == run_id)).scalar_one())


def approvals(store: Store, n: int) -> list[str]:
    rt = AgentRuntime(store, actor="setup")
    session = rt.create_session(rt.create_task(rt.create_project("ops"), "ops"), "ops")
    run = rt.start_run(rt.create_agent(session, "worker", "m"), "work")
    return [rt.request_approval(run, "shell", {"command": f"echo {k}"}, timeout_s=None) for k in range(n)]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_a_decision_during_a_large_trace_does_not_wait_and_the_trace_appears_whole(
        tmp_path: Path, store: Store, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pending = approvals(store, 40)
    path = big_trace(tmp_path / "big.json")
    done = threading.Event()
    outcome: dict[str, Any] = {}
    decided_thrice = threading.Event()
    original_facts = StagedTraceWriter.roll_up_facts

    def facts_after_three_decisions(self: StagedTraceWriter, *args: Any, **kwargs: Any) -> Any:
        # The roll-up read comes after every piece is staged and before the flip, in a read transaction
        # (no writer's turn held): holding the import here until the test has decided three times makes
        # "decided while staged" certain however fast the machine writes (PostgreSQL's pipelined import
        # finished 20,000 spans before a third decision on CI), without holding anything a decision needs.
        decided_thrice.wait(60)
        return original_facts(self, *args, **kwargs)

    monkeypatch.setattr(StagedTraceWriter, "roll_up_facts", facts_after_three_decisions)

    def run_import() -> None:
        try:
            outcome["result"] = import_files(store, [path], helper=False)
        finally:
            done.set()

    worker = threading.Thread(target=run_import)
    worker.start()
    latencies: list[float] = []
    mid_import: list[bool] = []
    seen: list[dict[str, int]] = []
    try:
        while not done.is_set() and pending:
            if staged_rows(store):  # the trace is being written: decide now, and look at the tree
                began = time.monotonic()
                decide(store, pending.pop(), True, "operator")
                latencies.append(time.monotonic() - began)
                mid_import.append(not done.is_set() and staged_rows(store) > 0)
                seen.append(visible_runs(store))
                if sum(mid_import) >= 3:
                    decided_thrice.set()
            time.sleep(0.05)
    finally:
        decided_thrice.set()
        worker.join(120)
    result = outcome["result"]
    assert result.error is None and not result.cancelled and result.report.spans_written == SPANS
    # Each decision committed while the trace was still staged: it did not wait for the whole trace (how long
    # it waited is bench/load_bench.py's figure, "decisions during an import").
    assert sum(mid_import) >= 3, "the test never decided while the trace was staged"
    assert len(latencies) == len(mid_import)
    for tree in seen:  # before the flip, nothing of the trace; a tree that shows it shows all of it
        assert tree.get(RUN, SPANS) == SPANS
    assert sum(RUN not in tree for tree in seen) >= 2
    assert visible_runs(store)[RUN] == SPANS and staged_rows(store) == 0
    assert events_of(store, RUN) >= 2  # the run's insert and its span batch, published at the flip


def test_cancel_mid_trace_leaves_nothing_visible_and_a_reimport_resumes(tmp_path: Path, store: Store,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Short slices, so that several transactions commit before the cancel (a cancel rolls back only
    # the transaction in flight): the re-import then resumes a partly written trace.
    monkeypatch.setattr(importer, "STAGED_SLICE_S", 0.05)
    path = big_trace(tmp_path / "big.json")
    cancel = threading.Event()

    def progress(p: Any) -> None:
        if p.phase == "writing" and p.spans_done >= 6_000:
            cancel.set()

    result = import_files(store, [path], helper=False, progress=progress, cancel=cancel)
    assert result.cancelled
    with store.reading() as s:
        written = s.execute(select(func.count()).select_from(sc.SpanRow).where(sc.SpanRow.run_id == RUN)
                            ).scalar_one()
    assert 6_000 <= written < SPANS  # part of the trace is stored...
    assert RUN not in visible_runs(store) and events_of(store, RUN) == 0  # ...and nothing of it is seen
    assert NativeQueries(store).projects() == []  # not even the project it created
    from agentdesk.store.native import NativeSource
    from agentdesk.store.search.store_search import search_store

    assert [g.run_id for g in search_store(NativeSource(store), "chat").groups] == []

    again = import_files(store, [path], helper=False)
    assert again.report.spans_written == SPANS - written and again.report.duplicates >= written
    assert visible_runs(store) == {RUN: SPANS} and staged_rows(store) == 0


def test_an_abandoned_staged_trace_is_cleaned_up_in_slices(tmp_path: Path, store: Store,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = big_trace(tmp_path / "big.json", 8_000)
    cancel = threading.Event()
    import_files(store, [path], helper=False, cancel=cancel,
                 progress=lambda p: cancel.set() if p.phase == "writing" and p.spans_done >= 3_000 else None)
    assert staged_rows(store) > 0
    assert staging.clean_stale(store) == 0  # recent: its importer may come back
    monkeypatch.setattr(staging, "DELETE_SLICE", 500)
    assert staging.clean_stale(store, now=time.time() + staging.STALE_S + 1) == 1
    with store.reading() as s:
        assert s.execute(select(func.count()).select_from(sc.SpanRow)).scalar_one() == 0
        assert s.get(sc.RunRow, RUN) is None and s.execute(select(sc.AgentRow.id)).first() is None
        assert s.execute(select(sc.ProjectRow.id)).first() is None
    assert staged_rows(store) == 0


def test_a_small_trace_sharing_a_staged_session_makes_the_containers_visible(tmp_path: Path,
                                                                                store: Store) -> None:
    """The containers a crashed import staged are claimed by the next trace that uses them; its run shows."""
    path = big_trace(tmp_path / "big.json", 5_000)
    cancel = threading.Event()
    import_files(store, [path], helper=False, cancel=cancel,
                 progress=lambda p: cancel.set() if p.phase == "writing" and p.spans_done >= 2_000 else None)
    small = big_trace(tmp_path / "small.json", 10, trace="cd" * 16)  # same service: same project and task
    import_files(store, [small], helper=False)
    assert visible_runs(store) == {"otr_" + "cd" * 16: 10}


def test_a_staged_run_asked_for_by_id_is_as_absent_as_from_the_tree(tmp_path: Path, store: Store,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A saved selection, a search hit or `--select` naming a half-imported run finds nothing until the
    flip: the run, its agent, its spans and its location are "not found", then all of them are there."""
    from agentdesk.store.errors import NotFound

    monkeypatch.setattr(importer, "STAGED_SLICE_S", 0.0)  # every piece commits: some before the cancel

    path = big_trace(tmp_path / "big.json", 8_000)
    cancel = threading.Event()
    import_files(store, [path], helper=False, cancel=cancel,
                 progress=lambda p: cancel.set() if p.phase == "writing" and p.spans_done >= 3_000 else None)
    assert staged_rows(store) > 0
    q = NativeQueries(store)
    with store.reading() as s:
        staged_run = s.get(sc.RunRow, RUN)
        assert staged_run is not None  # stored, only hidden
        agent_id = staged_run.agent_id
        span_id = s.execute(select(sc.SpanRow.id).where(sc.SpanRow.run_id == RUN).limit(1)).scalar_one()
    from agentdesk.store.persistence.bus import EntityKind

    for ask in (lambda: q.run(RUN), lambda: q.agent(agent_id), lambda: q.span(span_id),
                lambda: q.locate(EntityKind.RUN, RUN), lambda: q.locate(EntityKind.SPAN, span_id)):
        with pytest.raises(NotFound):
            ask()
    import_files(store, [path], helper=False)  # resumes and flips
    assert q.run(RUN).id == RUN and q.agent(agent_id).id == agent_id and q.span(span_id).id == span_id
    assert q.locate(EntityKind.SPAN, span_id).run_id == RUN


def test_admin_prune_also_removes_abandoned_partial_imports(tmp_path: Path, store: Store, store_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from agentdesk.cli.main import main

    path = big_trace(tmp_path / "big.json", 8_000)
    cancel = threading.Event()
    import_files(store, [path], helper=False, cancel=cancel,
                 progress=lambda p: cancel.set() if p.phase == "writing" and p.spans_done >= 3_000 else None)
    assert staged_rows(store) > 0
    assert main(["--store", str(store_path), "admin", "prune", "--keep-days", "1"]) == 0
    assert "abandoned" not in capsys.readouterr().out and staged_rows(store) > 0  # recent: may resume
    monkeypatch.setattr(staging, "STALE_S", 0.0)
    assert main(["--store", str(store_path), "admin", "prune", "--keep-days", "1"]) == 0
    assert capsys.readouterr().out.strip().endswith("Removed 1 abandoned partial import.")
    assert staged_rows(store) == 0
    with store.reading() as s:
        assert s.get(sc.RunRow, RUN) is None
