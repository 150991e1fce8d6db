"""Notes and labels leave in the export as span events and attributes and come back on import, unchanged."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentdesk.store.ingest import marks_otel
from agentdesk.store.ingest import values as v
from agentdesk.store.ingest.export import export
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.marks_otel import decorate, iso_seconds, marks_of
from agentdesk.store.notes import commands, reads
from agentdesk.store.notes.marks import Label, Marks, Note, Target
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import prebuilt


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


def marks(store: Store) -> list[tuple[Any, ...]]:
    """Every note and label with its kind, author, text and time, without the ids the import chose."""
    return sorted((e.what, e.target.kind, e.author, e.text, e.at) for e in reads.since(store, 0))


def assert_same_marks(left: Store, right: Store) -> None:
    """The same notes and labels, at the same times to within 2 µs: the export keeps microseconds
    (`marks_otel.iso`), so a time compared rounded to milliseconds came back one later now and then (.7054996
    exported as .705500)."""
    a, b = marks(left), marks(right)
    assert [m[:4] for m in a] == [m[:4] for m in b]
    assert all(abs(x[4] - y[4]) <= 2e-6 for x, y in zip(a, b, strict=True)), (a, b)


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
    fresh = open_store(str(prebuilt(tmp_path / "fresh.sqlite")))
    third = open_store(str(prebuilt(tmp_path / "third.sqlite")))
    try:
        result = import_files(fresh, [tmp_path / "a.json"], helper=False)
        assert (result.marks.notes, result.marks.labels) == (2, 4)
        assert_same_marks(fresh, store)
        assert import_files(fresh, [tmp_path / "a.json"], helper=False).marks.notes == 0  # once
        imported = only_run(fresh)
        (tmp_path / "b.json").write_text(exported(fresh, imported))
        again = json.loads((tmp_path / "b.json").read_text())
        events = [e["name"] for rs in again["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
                  for e in s.get("events", [])]
        assert events.count("agentdesk.note") == 2  # the stored copies are replaced, not repeated
        import_files(third, [tmp_path / "b.json"], helper=False)
        assert_same_marks(third, store)
        commands.remove_label(fresh, "run", imported, "regression", "dave")
        assert "regression" not in exported(fresh, imported)
    finally:
        fresh.close()
        third.close()


def test_only_runs_whose_spans_carry_marks_are_read_back(tmp_path: Path, store: Store, rt: AgentRuntime,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The marks are looked for in the runs some span of which names `agentdesk.`: reading every imported
    span back for them cost ~1 s per 100,000 spans. A run without marks is not read; one with them still is."""
    marked, _, _ = native_run(store, rt)
    plain = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("q"), "t"), "s"),
                                         "writer", "m"), "write the docs")
    rt.finish_span(rt.start_span(plain, "agent", "writer"))
    (tmp_path / "marked.json").write_text(exported(store, marked))
    (tmp_path / "plain.json").write_text(exported(store, plain))
    asked: list[str] = []
    found = marks_otel._found

    def recorded(s: Store, runs: list[str]) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
        asked.extend(runs)
        return found(s, runs)

    monkeypatch.setattr(marks_otel, "_found", recorded)
    fresh = open_store(str(prebuilt(tmp_path / "fresh.sqlite")))
    try:
        result = import_files(fresh, [tmp_path / "plain.json", tmp_path / "marked.json"], helper=False)
        assert len(result.report.run_ids) == 2
        assert (result.marks.notes, result.marks.labels) == (2, 4)
        assert_same_marks(fresh, store)
        assert asked == [run for run in result.report.run_ids if run != only_run_named(fresh, "write the docs")]
    finally:
        fresh.close()


def only_run_named(store: Store, title: str) -> str:
    with store.reading() as s:
        return str(s.execute(text("SELECT id FROM runs WHERE title = :t"), {"t": title}).scalar_one())


NOTE_TEXT = st.text(min_size=1, max_size=200).filter(lambda t: t.strip() != "" and "\x00" not in t).filter(
    lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))
LABEL = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=64)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("span", "run", "approval")), NOTE_TEXT), max_size=4),
       st.lists(st.tuples(st.sampled_from(("span", "run", "approval")), LABEL), max_size=4, unique=True),
       st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_any_note_and_label_survive_the_otlp_encoding(notes: list[tuple[str, str]], labels: list[tuple[str, str]],
                                                      at: float) -> None:
    """decorate → OTLP JSON → the decoder's attributes → the marks import reads back: the same texts and labels."""
    target = Target("span", "s", "r")
    marks = {kind: Marks(tuple(Note(f"n{i}", target, text, "alice", None, at, at, "alice", 1)
                               for i, (k, text) in enumerate(notes) if k == kind),
                         tuple(Label(target, label, "bob", None, at) for k, label in labels if k == kind))
             for kind in ("span", "run", "approval")}
    span: dict[str, Any] = {"attributes": []}
    decorate(span, [(kind, m) for kind, m in marks.items() if not m.empty])
    wire = json.loads(json.dumps(span))
    attrs = {**v.json_attributes(wire["attributes"]),
             "otel.events": [{"name": e["name"], "attributes": v.json_attributes(e["attributes"])}
                             for e in wire.get("events", [])]}
    found = marks_of(attrs, {"span": "s", "run": "r", "approval": "a"})
    got_notes = sorted((kind, w["text"], w["author"]) for kind, _, w in found if w["type"] == "note")
    got_labels = sorted((kind, w["label"], w.get("author")) for kind, _, w in found if w["type"] == "label")
    assert got_notes == sorted((kind, text, "alice") for kind, text in notes)
    assert got_labels == sorted((kind, label, "bob") for kind, label in labels)
    assert all(iso_seconds(w["at"]) == pytest.approx(at, abs=1e-5) for _, _, w in found)
