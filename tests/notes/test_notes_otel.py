"""Notes and labels leave in the export as span events and attributes and come back on import, unchanged."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from sqlalchemy import text

from agentdesk.store.ingest.export import export
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.notes import commands, reads
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime


def native_run(store: Store, rt: AgentRuntime) -> tuple[str, str, str]:
    agent = rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"), "coder", "m")
    run = rt.start_run(agent, "fix the tests")
    root = rt.start_span(run, "agent", "coder")
    tool = rt.start_span(run, "tool", "run_shell", root)
    gate = rt.start_span(run, "gate", "approve bash", root)
    approval = rt.request_approval(run, "bash", {"cmd": "ls"}, span_id=gate)
    for span in (tool, gate, root):
        rt.finish_span(span)
    commands.add_note(store, "span", tool, "Chose the shell where read_file would do.\nSecond line.", "alice")
    commands.add_label(store, "span", tool, "bad-tool-choice", "alice")
    commands.add_label(store, "span", tool, "needs-review", "bob")
    commands.add_note(store, "run", run, "Flaky since Tuesday", "bob")
    commands.add_label(store, "run", run, "regression", "bob")
    commands.add_label(store, "approval", approval, "needs-review", "carol")
    return run, tool, approval


def exported(store: Store, run: str) -> str:
    buffer = io.StringIO()
    export(store, buffer, fmt="otlp-json", run_id=run)
    return buffer.getvalue()


def shape(store: Store) -> set[tuple[Any, ...]]:
    """Every note and label with its kind, author, time and text, without the ids the import chose."""
    entries = reads.since(store, 0)
    return {(e.what, e.target.kind, e.author, round(e.at, 3), e.text) for e in entries}


def only_run(store: Store) -> str:
    with store.reading() as s:
        return str(s.execute(text("SELECT id FROM runs")).scalar_one())


def test_export_carries_events_and_attributes(store: Store, rt: AgentRuntime) -> None:
    run, _, _ = native_run(store, rt)
    doc = json.loads(exported(store, run))
    spans = {s["name"]: s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}
    attrs = {a["key"]: a["value"] for a in spans["run_shell"]["attributes"]}
    assert attrs["agentdesk.labels"] == {"arrayValue": {"values": [{"stringValue": "bad-tool-choice"},
                                                                   {"stringValue": "needs-review"}]}}
    note = next(e for e in spans["run_shell"]["events"] if e["name"] == "agentdesk.note")
    fields = {a["key"]: a["value"]["stringValue"] for a in note["attributes"]}
    assert fields["agentdesk.note.author"] == "alice" and fields["agentdesk.note.text"].startswith("Chose the shell")
    assert fields["agentdesk.note.at"].endswith("Z")
    assert {a["key"] for a in spans["coder"]["attributes"]} >= {"agentdesk.run.labels"}
    assert {a["key"] for a in spans["approve bash"]["attributes"]} >= {"agentdesk.approval.labels"}


def test_export_import_export_round_trips(tmp_path: Path, store: Store, rt: AgentRuntime) -> None:
    run, _, _ = native_run(store, rt)
    (tmp_path / "a.json").write_text(exported(store, run))
    fresh = open_store(str(tmp_path / "fresh.sqlite"))
    third = open_store(str(tmp_path / "third.sqlite"))
    try:
        result = import_files(fresh, [tmp_path / "a.json"], helper=False)
        assert (result.marks.notes, result.marks.labels) == (2, 4)
        assert shape(fresh) == shape(store)
        assert import_files(fresh, [tmp_path / "a.json"], helper=False).marks.notes == 0  # once
        imported = only_run(fresh)
        (tmp_path / "b.json").write_text(exported(fresh, imported))
        again = json.loads((tmp_path / "b.json").read_text())
        events = [e["name"] for rs in again["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
                  for e in s.get("events", [])]
        assert events.count("agentdesk.note") == 2  # the stored copies are replaced, not repeated
        import_files(third, [tmp_path / "b.json"], helper=False)
        assert shape(third) == shape(store)
        commands.remove_label(fresh, "run", imported, "regression", "dave")
        assert "regression" not in exported(fresh, imported)
    finally:
        fresh.close()
        third.close()
