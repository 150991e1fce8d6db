"""The receiver-facing ingest API: idempotent, order-independent, one transaction per call."""

from __future__ import annotations

import random

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentdesk.store.audit import verify_chain
from agentdesk.store.ingest import BadRecord, ingest_json, ingest_request
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.schema import ChangeRow, SpanRow
from tests.store.ingest.traces import agent_trace, otlp_json, request_of


def tree_of(source: NativeSource, run_id: str) -> dict[str, str | None]:
    table = source.span_table(run_id)
    return dict(zip(table.ids, table.parent_ids, strict=True))


def only_run(source: NativeSource) -> str:
    (project,) = source.projects()
    (task,) = source.tasks(project.id)
    (session,) = source.sessions(task.id)
    runs = [r for a in source.agents(session.id) for r in source.runs(a.id).items]
    assert len(runs) == 1
    return runs[0].id


def test_a_trace_maps_onto_project_session_agents_and_run(store: Store, source: NativeSource) -> None:
    report = ingest_request(store, request_of(agent_trace()))
    assert (report.spans_written, report.duplicates, report.orphans_pending) == (8, 0, 0)
    (project,) = source.projects()
    assert project.name == "support-bot"
    (session,) = source.sessions(source.tasks(project.id)[0].id)
    assert session.title == "conv-1"
    agents = {a.name: a for a in source.agents(session.id)}
    assert set(agents) == {"planner", "reviewer"}
    assert agents["reviewer"].parent_agent_id == agents["planner"].id
    assert agents["planner"].model == "gpt-5"
    run = source.runs(agents["planner"].id).items[0]
    assert (run.status, run.usage.input_tokens, run.usage.output_tokens) == ("done", 208, 42)
    kinds = sorted(source.span_table(run.id).kinds)
    assert kinds == ["agent", "internal", "model", "model", "model", "sub_agent", "tool", "tool"]


def test_what_the_model_saw_keeps_roles_tool_calls_and_unknown_parts(store: Store, source: NativeSource) -> None:
    ingest_request(store, request_of(agent_trace()))
    run_id = only_run(source)
    table = source.span_table(run_id)
    models = [i for i, k in zip(table.ids, table.kinds, strict=True) if k == "model"]
    seen = [[(s.role, s.kind, s.content) for s in source.sent_context(m)] for m in models]
    second = max(seen, key=len)
    assert second[0] == ("system", "message", "Be careful.")
    assert second[1] == ("user", "message", "Fix the build")
    assert second[2][1] == "tool_calls" and second[2][2].startswith('run_tests({"path": "tests/"})')
    assert '[hologram] {"shape": "cube"}' in second[2][2]
    assert second[3] == ("tool", "result", "0 failed")
    assert [("user", "message", "Review this diff")] in seen  # the older gen_ai.prompt.N shape


def test_reingesting_adds_nothing_and_audits_each_call_once(store: Store, source: NativeSource) -> None:
    request = request_of(agent_trace())
    ingest_request(store, request)
    with store.reading() as s:
        changes = s.query(ChangeRow).count()
    again = ingest_request(store, request)
    assert (again.spans_written, again.duplicates) == (0, 8)
    with store.reading() as s:
        assert s.query(SpanRow).count() == 8
        report = verify_chain(s)
        assert report.ok and report.records == 2
        assert s.query(ChangeRow).count() - changes <= 3  # run + session update, no per-span rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batches_in_any_order_end_in_the_same_tree(store: Store, source: NativeSource, seed: int) -> None:
    spans = agent_trace()
    expected_parents = {s.context.span_id: s.parent.span_id if s.parent else None for s in spans}
    shuffled = spans[:]
    random.Random(seed).shuffle(shuffled)
    for n in range(0, len(shuffled), 2):
        ingest_request(store, request_of(shuffled[n:n + 2]))
    run_id = only_run(source)
    tree = tree_of(source, run_id)
    assert len(tree) == len(spans)
    for row_id, parent in tree.items():
        otel_parent = expected_parents[int(row_id[33:], 16)]
        assert parent == (None if otel_parent is None else f"o{row_id[1:33]}{otel_parent:016x}")
    assert all("agentdesk.orphan" not in source.span(i).attributes for i in tree)


def test_an_orphan_waits_under_the_root_and_is_placed_when_its_parent_arrives(store: Store,
                                                                              source: NativeSource) -> None:
    spans = sorted(agent_trace(), key=lambda s: s.start_time or 0)
    root, sub_agent = spans[0], next(s for s in spans if s.name == "invoke_agent reviewer")
    children = [s for s in spans if s.parent is not None and s.parent.span_id == sub_agent.context.span_id]
    first = ingest_request(store, request_of([root, *children]))
    assert first.orphans_pending == len(children)
    run_id = only_run(source)
    root_row = next(i for i, p in tree_of(source, run_id).items() if p is None)
    for child in children:
        row = f"o{child.context.trace_id:032x}{child.context.span_id:016x}"
        assert tree_of(source, run_id)[row] == root_row
        assert "has not arrived" in source.span(row).attributes["agentdesk.orphan"]
        assert source.span(row).name == "(orphan) " + child.name
    later = ingest_request(store, request_of([sub_agent]))
    assert (later.placed, later.orphans_pending) == (len(children), 0)
    sub_row = f"o{sub_agent.context.trace_id:032x}{sub_agent.context.span_id:016x}"
    for child in children:
        row = f"o{child.context.trace_id:032x}{child.context.span_id:016x}"
        assert tree_of(source, run_id)[row] == sub_row
        assert "agentdesk.orphan" not in source.span(row).attributes
        assert source.span(row).name == child.name


def test_an_open_span_shows_running_and_completes_when_it_arrives_ended(store: Store,
                                                                         source: NativeSource) -> None:
    doc = otlp_json(agent_trace())
    root = next(s for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"] if "parentSpanId" not in s)
    open_doc = {"resourceSpans": [{**doc["resourceSpans"][0], "scopeSpans": [
        {"scope": {"name": "x"}, "spans": [{**root, "endTimeUnixNano": "0"}]}]}]}
    ingest_json(store, open_doc)
    run_id = only_run(source)
    assert source.run(run_id).status == "running"
    report = ingest_json(store, doc)
    assert report.completed == 1
    assert source.run(run_id).status == "done"


def test_a_bad_span_rejects_the_whole_request_and_writes_nothing(store: Store) -> None:
    doc = otlp_json(agent_trace())
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][3]["startTimeUnixNano"] = "99999999999999999999"
    with pytest.raises(BadRecord, match=r"spans\[3\].*not a plausible time"):
        ingest_json(store, doc)
    with store.reading() as s:
        assert s.query(SpanRow).count() == 0


def test_a_parent_loop_is_refused(store: Store) -> None:
    doc = otlp_json(agent_trace())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["parentSpanId"], spans[1]["parentSpanId"] = spans[1]["spanId"], spans[0]["spanId"]
    with pytest.raises(Exception, match="its own ancestor"):
        ingest_json(store, doc)


def test_an_empty_request_is_fine(store: Store) -> None:
    assert ingest_request(store, ExportTraceServiceRequest()).spans_written == 0


def test_live_order_root_last_files_the_run_under_the_real_agent(store: Store, source: NativeSource) -> None:
    spans = sorted(agent_trace(), key=lambda s: s.end_time or 0)  # the order exporters send them: by end
    for n in range(0, len(spans), 3):
        ingest_request(store, request_of(spans[n:n + 3]))
    (session,) = source.sessions(source.tasks(source.projects()[0].id)[0].id)
    agents = {a.name: a for a in source.agents(session.id)}
    assert set(agents) == {"planner", "reviewer"}  # the stand-in named after the service is gone
    assert agents["reviewer"].parent_agent_id == agents["planner"].id
    run = source.runs(agents["planner"].id).items[0]
    assert run.status == "done"
    contents = [i.content for i in source.context(agents["planner"].id).items]
    assert {"Be careful.", "Fix the build", "0 failed"} <= set(contents)  # what came early moved with the run
