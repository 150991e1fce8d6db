"""Export: OTLP/JSON(L) out with GenAI attributes and approvals; export → import is the same read model."""

from __future__ import annotations

import io
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentdesk.store.approvals.commands import decide
from agentdesk.store.ingest import ingest_request
from agentdesk.store.ingest.export import export
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import prebuilt
from tests.store.ingest.traces import agent_trace, request_of


def content(value: Any) -> Any:
    """A read-model value without its write counters (revisions count writes, not content)."""
    if isinstance(value, list | tuple):
        return type(value)(content(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        counters = {f: 0 for f in ("revision", "context_revision") if f in value.__dataclass_fields__
                    and isinstance(getattr(value, f), int)}
        inner = {f: content(getattr(value, f)) for f in ("groups", "items") if f in value.__dataclass_fields__}
        return replace(value, **counters, **inner)
    return value


def read_model(source: NativeSource) -> dict[str, Any]:
    """Everything a view can read, by id: the canonical read model of the whole store."""
    out: dict[str, Any] = {}
    for p in source.projects():
        out[p.id] = p
        for t in source.tasks(p.id):
            out[t.id] = t
            for s in source.sessions(t.id):
                out[s.id] = s
                for a in source.agents(s.id):
                    out[a.id] = a
                    out["context " + a.id] = source.context(a.id)
                    for r in source.runs(a.id).items:
                        out[r.id] = r
                        out["spans " + r.id] = source.span_table(r.id)
                        for span_id in source.span_table(r.id).ids:
                            out[span_id] = source.span(span_id)
                            out["sent " + span_id] = source.sent_context(span_id)
    return out


def exported(store: Store, fmt: str, **which: str) -> str:
    buffer = io.StringIO()
    export(store, buffer, fmt=fmt, **which)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt", ["otlp-json", "otlp-jsonl"])
def test_export_then_import_gives_the_same_read_model(tmp_path: Path, store: Store, fmt: str) -> None:
    spans = agent_trace() + agent_trace(service="other", conversation=None, fail_tool=True)
    sub_agent = next(s for s in spans if s.name == "invoke_agent reviewer")
    kept = [s for s in spans if s is not sub_agent]  # its children stay orphans: exported with their real parent
    first, second = kept[:7], kept[7:]  # a trace per batch (rows are dated by the first batch of their trace)
    random.Random(3).shuffle(first)  # out of order within a batch; context positions follow time
    ingest_request(store, request_of(first))
    ingest_request(store, request_of(second))
    path = tmp_path / "out.json"
    project = next(p for p in NativeSource(store).projects() if p.name == "support-bot")
    path.write_text(exported(store, fmt, project=project.id)
                    + exported(store, fmt, project="other").replace('{"resourceSpans"', "\n" + '{"resourceSpans"', 1))
    fresh = open_store(str(prebuilt(tmp_path / "fresh.sqlite")))
    try:
        result = import_files(fresh, [path])
        assert result.error is None
        ours, theirs = read_model(NativeSource(store)), read_model(NativeSource(fresh))
        assert set(ours) == set(theirs)
        for key, value in ours.items():
            assert content(theirs[key]) == content(value), key
    finally:
        fresh.close()


def test_a_native_run_exports_genai_attributes_and_approvals_with_their_decisions(
        tmp_path: Path, store: Store, rt: AgentRuntime) -> None:
    project = rt.create_project("native")
    session = rt.create_session(rt.create_task(project, "fix"), "fixing")
    agent = rt.create_agent(session, "coder", "gpt-5")
    group = rt.new_turn_group(agent)
    rt.append_context(agent, group, "message", "user", "Please fix the tests")
    run = rt.start_run(agent, "fix the tests")
    root = rt.start_span(run, "agent", "coder")
    call = rt.start_span(run, "model", "chat gpt-5", root, context_of_agent=agent)
    rt.finish_span(call, output_text="I will run them", input_tokens=12, output_tokens=5)
    gate = rt.start_span(run, "gate", "approve bash", root)
    approval = rt.request_approval(run, "bash", {"cmd": "rm -rf build"}, span_id=gate)
    decide(store, approval, approve=False, actor="ann", reason="too broad")
    rt.finish_span(gate)
    rt.finish_span(root)
    rt.set_run_status(run, "done")
    doc = json.loads(exported(store, "otlp-json", run_id=run))
    spans = {s["name"]: s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}
    attrs = {name: {a["key"]: a["value"] for a in s["attributes"]} for name, s in spans.items()}
    assert attrs["chat gpt-5"]["gen_ai.operation.name"] == {"stringValue": "chat"}
    assert attrs["chat gpt-5"]["gen_ai.usage.input_tokens"] == {"intValue": "12"}
    sent = json.loads(attrs["chat gpt-5"]["gen_ai.input.messages"]["stringValue"])
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": "Please fix the tests"}]}]
    assert attrs["approve bash"]["agentdesk.approval.status"] == {"stringValue": "denied"}
    assert attrs["approve bash"]["agentdesk.approval.reason"] == {"stringValue": "too broad"}
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans.values())
    path = tmp_path / "native.json"
    path.write_text(json.dumps(doc))
    fresh = open_store(str(prebuilt(tmp_path / "fresh.sqlite")))
    try:
        import_files(fresh, [path])
        src, dst = NativeSource(store), NativeSource(fresh)
        a, b = src.span_table(run), dst.span_table(next(iter(_runs(dst))))
        strip = lambda t: sorted(zip(t.kinds, t.names, t.statuses, t.starts, t.ends, t.input_tokens,  # noqa: E731
                                     t.output_tokens, strict=True))
        assert strip(a) == strip(b)
        model_b = b.ids[b.kinds.index("model")]
        assert [(s.role, s.content) for s in dst.sent_context(model_b)] == [("user", "Please fix the tests")]
        assert replace(dst.span(model_b), id="", run_id="", parent_span_id=None, attributes={}).output_text == \
            "I will run them"
    finally:
        fresh.close()


def _runs(source: NativeSource) -> list[str]:
    return [r.id for p in source.projects() for t in source.tasks(p.id) for s in source.sessions(t.id)
            for a in source.agents(s.id) for r in source.runs(a.id).items]


def test_the_export_command(tmp_path: Path, store_path: Path) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentdesk.cli", "--store", str(store_path), *args],
                              env=env, capture_output=True, text=True, timeout=120)

    store = open_store(str(store_path))
    ingest_request(store, request_of(agent_trace()))
    run_id = _runs(NativeSource(store))[0]
    store.close()
    out = tmp_path / "run.jsonl"
    done = cli("export", run_id, "--format", "otlp-jsonl", "-o", str(out))
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert sum(len(json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]) for line in lines) == 8
    assert cli("export", "otr_nope").returncode == 4
    both = cli("export", run_id, "--project", "x")
    assert both.returncode == 2 and "not both" in both.stderr
    assert json.loads(cli("export", "--project", "support-bot").stdout)["resourceSpans"]


def test_a_span_whose_attributes_nest_50000_levels_exports_with_the_marker(store: Store) -> None:
    """An agent's pathological attribute value must not crash the export (json.dumps would recurse)."""
    import sqlite3

    ingest_request(store, request_of(agent_trace()))
    run_id = _runs(NativeSource(store))[0]
    assert store.path is not None
    with sqlite3.connect(store.path) as raw:
        span_id = raw.execute("SELECT id, attributes FROM spans WHERE run_id = ? LIMIT 1", (run_id,)).fetchone()[0]
        raw.execute("UPDATE spans SET attributes = json_set(attributes, '$.deep', 0) WHERE id = ?", (span_id,))
        raw.execute("UPDATE spans SET attributes = replace(attributes, '\"deep\":0', ?) WHERE id = ?",
                    ('"deep":' + "[" * 50_000 + "]" * 50_000, span_id))
    text = exported(store, "otlp-json", run_id=run_id)
    spans = json.loads(text)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attrs = [a for s in spans for a in s["attributes"] if a["key"] == "deep"]
    assert attrs and "too deeply nested" in json.dumps(attrs[0])


def test_otlp_proto_export_reimports_to_the_same_read_model(tmp_path: Path, store: Store) -> None:
    """`--format otlp-proto`: one binary ExportTraceServiceRequest, read back by `import` (and by Phoenix)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    ingest_request(store, request_of(agent_trace()))
    ingest_request(store, request_of(agent_trace(service="other", conversation=None, fail_tool=True)))
    paths = []
    for project in NativeSource(store).projects():
        text = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        export(store, text, fmt="otlp-proto", project=project.id)
        data = text.buffer.getvalue()  # type: ignore[attr-defined]
        assert data[:1] == b"\x0a" and len(ExportTraceServiceRequest.FromString(data).resource_spans) >= 1
        paths.append(tmp_path / f"{project.name}.pb")
        paths[-1].write_bytes(data)
    fresh = open_store(str(prebuilt(tmp_path / "fresh.sqlite")))
    try:
        result = import_files(fresh, paths, helper=False)
        assert result.error is None and result.formats == ["protobuf", "protobuf"]
        ours, theirs = read_model(NativeSource(store)), read_model(NativeSource(fresh))
        assert set(ours) == set(theirs)
        for key, value in ours.items():
            assert content(theirs[key]) == content(value), key
    finally:
        fresh.close()
    with pytest.raises(Exception, match="binary"):
        export(store, io.StringIO(), fmt="otlp-proto", project="other")


def test_a_run_of_gate_spans_exports_as_one_trace_and_comes_back_whole(
        tmp_path: Path, store: Store, rt: AgentRuntime) -> None:
    """A client-library run with only gate spans: the run's agent span is the root, and a re-import finds the
    same agent, model, title and approvals (it used to give 10 roots and the agent named after the service)."""
    project = rt.create_project("gatebench")
    session = rt.create_session(rt.create_task(project, "clean"), "cleaning")
    agent = rt.create_agent(session, "deleter", "gpt-5-mini")
    run = rt.start_run(agent, "delete old builds")
    for n in range(3):
        gate = rt.start_span(run, "gate", f"approve rm {n}")
        approval = rt.request_approval(run, "bash", {"cmd": f"rm -rf build{n}"}, span_id=gate)
        decide(store, approval, approve=n != 1, actor="ann", reason=f"reason {n}")
        rt.finish_span(gate)
    rt.set_run_status(run, "done")
    doc = json.loads(exported(store, "otlp-json", run_id=run))
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    roots = [s for s in spans if "parentSpanId" not in s]
    assert len(roots) == 1 and roots[0]["name"] == "delete old builds"
    assert all(s.get("parentSpanId") == roots[0]["spanId"] for s in spans if s is not roots[0])
    path = tmp_path / "gates.json"
    path.write_text(json.dumps(doc))
    fresh = open_store(str(prebuilt(tmp_path / "fresh.sqlite")))
    try:
        assert import_files(fresh, [path], helper=False).error is None
        dst = NativeSource(fresh)
        agents = [a for p in dst.projects() for t in dst.tasks(p.id) for s in dst.sessions(t.id)
                  for a in dst.agents(s.id)]
        assert [(a.name, a.model) for a in agents] == [("deleter", "gpt-5-mini")]
        runs = dst.runs(agents[0].id).items
        assert [r.title for r in runs] == ["delete old builds"]
        from agentdesk.store.persistence.schema import ApprovalRow
        with fresh.reading() as s:
            got = sorted((a.tool_name, a.arguments, a.status, a.decided_by, a.reason, a.agent_id)
                         for a in s.query(ApprovalRow))
        assert got == [("bash", json.dumps({"cmd": f"rm -rf build{n}"}, separators=(",", ":")),
                        "denied" if n == 1 else "approved", "ann", f"reason {n}", agents[0].id) for n in range(3)]
        assert import_files(fresh, [path], helper=False).report.spans_written == 0  # idempotent
        with fresh.reading() as s:
            assert s.query(ApprovalRow).count() == 3
    finally:
        fresh.close()
