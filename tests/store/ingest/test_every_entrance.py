"""Issue 22's "done when": each kind of agent arrives whole through `receive` and through `import`, and alike.

A Phoenix export, an OpenInference agent, the official GenAI instrumentation with `span_only` and with
`event_only` (messages as log records on `/v1/logs`), and agentdesk's own export: each is sent to a live
receiver children first and in random batches (log records among them anywhere), and imported as files. Both
stores must hold the whole tree (every span under its parent, sub-agents under their agent), the messages,
tokens and costs, and be equal row for row.
"""

from __future__ import annotations

import io
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentdesk.store.approvals.commands import decide
from agentdesk.store.ingest.export import export
from agentdesk.store.ingest.spans import span_row_id
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime
from tests.store.ingest import sources
from tests.store.ingest.sources import Source, logs_document, spans_of
from tests.store.ingest.test_one_decoder import assert_same_stores, ordered_rows, receive_all


def agentdesk_export(folder: Path) -> Source:
    """A native run (an agent and its sub-agent, a model call with its context, a tool, a decided approval),
    exported by agentdesk."""
    store = open_store(str(folder / "native.sqlite"))
    try:
        rt = AgentRuntime(store)
        session = rt.create_session(rt.create_task(rt.create_project("native"), "fix"), "fixing")
        agent = rt.create_agent(session, "coder", "gpt-4o-mini")
        group = rt.new_turn_group(agent)
        rt.append_context(agent, group, "message", "user", "Please fix the tests")
        run = rt.start_run(agent, "fix the tests")
        root = rt.start_span(run, "agent", "coder")
        call = rt.start_span(run, "model", "chat gpt-4o-mini", root, context_of_agent=agent)
        rt.finish_span(call, output_text="I will run them", input_tokens=12, output_tokens=5, cost_usd=0.002)
        tool = rt.start_span(run, "tool", "bash", root)
        rt.finish_span(tool, output_text="ok")
        gate = rt.start_span(run, "gate", "approve bash", root)
        decide(store, rt.request_approval(run, "bash", {"cmd": "rm -rf build"}, span_id=gate), approve=True,
               actor="ann", reason="fine")
        rt.finish_span(gate)
        rt.finish_span(root)
        rt.set_run_status(run, "done")
        out = io.StringIO()
        export(store, out, fmt="otlp-json", run_id=run)
    finally:
        store.close()
    doc = json.loads(out.getvalue())
    resource = doc["resourceSpans"][0]["resource"]
    scope = doc["resourceSpans"][0]["scopeSpans"][0]["scope"]
    return Source("agentdesk export", spans_of(doc),
                  lambda s: {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": s}]}]},
                  agents={("coder", None)}, tokens=(12, 5), messages=1)


SOURCES = {"phoenix export": sources.phoenix, "openinference agent": sources.openinference_agent,
           "genai span_only": sources.genai_span_only, "genai event_only": sources.genai_event_only}


def source_of(name: str, folder: Path) -> Source:
    return agentdesk_export(folder) if name == "agentdesk export" else SOURCES[name]()


def id_of(span: dict[str, Any], key: str) -> str | None:
    snake = {"spanId": "span_id", "traceId": "trace_id", "parentSpanId": "parent_span_id"}[key]
    return span.get(key) or span.get(snake)


def requests(source: Source, seed: int) -> list[tuple[str, bytes]]:
    """Children first (the reverse of a parent-first listing) or shuffled, in batches of 1-3 spans; the log
    records in batches anywhere among them."""
    rng = random.Random(seed)
    order = list(reversed(source.spans)) if seed == 0 else rng.sample(source.spans, len(source.spans))
    out: list[tuple[str, bytes]] = []
    while order:
        size = rng.randint(1, 3)
        out.append(("traces", json.dumps(source.wrap(order[:size])).encode()))
        order = order[size:]
    logs = list(source.records)
    while logs:
        size = rng.randint(1, 3)
        out.insert(rng.randint(0, len(out)), ("logs", json.dumps(logs_document(logs[:size])).encode()))
        logs = logs[size:]
    return out


receive = receive_all  # the property test's: every request answered 200, then the receiver stopped (drained)


def import_files_of(path: Path, folder: Path, source: Source) -> None:
    from agentdesk.store.ingest.importer import import_files

    files = [folder / "spans.json"]
    files[0].write_text(json.dumps(source.wrap(source.spans)))
    if source.records:
        files.append(folder / "logs.json")
        files[1].write_text(json.dumps(logs_document(source.records)))
    store = open_store(str(path))
    try:
        result = import_files(store, files, helper=False)
        assert result.error is None, result.error
    finally:
        store.close()


def assert_intact(path: Path, source: Source) -> None:
    """The tree, the agents and sub-agents, the messages, tokens and costs the source sent."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        stored = dict(conn.execute("SELECT id, parent_span_id FROM spans"))
        wanted = {}
        for span in source.spans:
            trace, parent = id_of(span, "traceId"), id_of(span, "parentSpanId")
            assert trace is not None
            wanted[span_row_id(trace, str(id_of(span, "spanId")))] = span_row_id(trace, parent) if parent else None
        assert stored == wanted
        assert conn.execute("SELECT count(*) FROM otel_orphans").fetchone() == (0,)
        names = dict(conn.execute("SELECT id, name FROM agents"))
        agents = {(name, names.get(parent))
                  for name, parent in conn.execute("SELECT name, parent_agent_id FROM agents")}
        assert agents == source.agents
        kinds = [k for (k,) in conn.execute("SELECT kind FROM spans WHERE kind IN ('agent', 'sub_agent')")]
        assert sorted(kinds) == sorted("sub_agent" if p else "agent" for _, p in source.agents)
        run = conn.execute("SELECT input_tokens, output_tokens, cost_usd FROM runs").fetchall()
        assert [r[:2] for r in run] == [source.tokens]
        costs = conn.execute("SELECT sum(cost_usd) FROM spans WHERE kind = 'model'").fetchone()[0]
        assert run[0][2] > 0 and run[0][2] == pytest.approx(costs)
        assert conn.execute("SELECT count(*) FROM context_items").fetchone() == (source.messages,)
        assert all(text for (text,) in conn.execute("SELECT input_text FROM spans WHERE kind = 'model'"))
    finally:
        conn.close()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", [*SOURCES, "agentdesk export"])
def test_each_agent_arrives_whole_and_alike_through_receive_and_import(tmp_path: Path, name: str,
                                                                       seed: int) -> None:
    source = source_of(name, tmp_path)
    receive(tmp_path / "received.sqlite", requests(source, seed))
    import_files_of(tmp_path / "imported.sqlite", tmp_path, source)
    assert_intact(tmp_path / "imported.sqlite", source)
    assert_intact(tmp_path / "received.sqlite", source)
    assert_same_stores(ordered_rows(tmp_path / "received.sqlite"), ordered_rows(tmp_path / "imported.sqlite"))
