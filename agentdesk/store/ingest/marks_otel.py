"""Notes and labels as OpenTelemetry: out on the spans they sit on, back in on import.

A note leaves as a span event `agentdesk.note` (its time is when it was written) with attributes
`agentdesk.note.target` (span, run or approval), `.id`, `.author`, `.at` (ISO 8601, UTC) and `.text`; a label
as an event `agentdesk.label` (target, label, author, at) plus the array attribute `agentdesk.labels` (a span's
own), `agentdesk.run.labels` (on the run's root span) or `agentdesk.approval.labels` (on an approval's span),
so a tool that only filters by attributes (Phoenix, Jaeger) finds them too. A run's marks go on its root span,
an approval's on the span that carries it.

Import turns these back into notes and labels of the imported run, with their first author and time, once (a
second import of the same file finds them there and skips them). The stored span keeps what arrived; export
writes the current notes and labels from their tables instead of those copies, so a label removed after the
import does not come back on the next export.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select

from agentdesk.store.errors import Conflict, NotFound, PermissionRefused
from agentdesk.store.ingest import values as v
from agentdesk.store.notes import commands
from agentdesk.store.notes.marks import Marks
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.text.jsonsafe import loads

IN_CHUNK = 500
"""Runs per IN (...) lookup: well under SQLite's bound-parameter limit."""

NOTE_EVENT = "agentdesk.note"
LABEL_EVENT = "agentdesk.label"
LABEL_KEYS = {"span": "agentdesk.labels", "run": "agentdesk.run.labels", "approval": "agentdesk.approval.labels"}
OURS = frozenset(LABEL_KEYS.values())
IMPORT_AUTHOR = "import"
"""Who a label read only from an `agentdesk.*labels` attribute (no event saying who) is recorded as."""


MARKED = "agentdesk."
"""Every mark's event name and attribute key starts with this (and so do agentdesk's other keys)."""
MARK_NAMES = (NOTE_EVENT, LABEL_EVENT, *LABEL_KEYS.values())


def may_carry_marks(attributes: str) -> bool:
    """Whether a span's attributes (as JSON text) may hold a note or a label to restore: they name a mark's event
    or key (agentdesk's own export names `agentdesk.` keys on every span, so that prefix says too little)."""
    return MARKED in attributes and any(name in attributes for name in MARK_NAMES)


def _may_carry_marks(dialect: str) -> ColumnElement[bool]:
    """Spans whose attributes may hold `agentdesk.` keys: the text says so, or (SQLite) it is stored compressed
    (persistence/payloads.py), which LIKE cannot see into; the parse after the query decides."""
    like = sc.SpanRow.attributes.contains(MARKED)
    return or_(like, func.typeof(sc.SpanRow.attributes) == "blob") if dialect == "sqlite" else like


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def decorate(span: dict[str, Any], marks: list[tuple[str, Marks]]) -> None:
    """Add the notes and labels of `marks` ((kind, Marks) of each target the span stands for) to an OTLP span."""
    events, attributes = [], []
    for kind, m in marks:
        if m.labels:
            attributes.append({"key": LABEL_KEYS[kind], "value": v.to_any_value(list(m.label_names))})
        for label in m.labels:
            events.append(_event(LABEL_EVENT, label.created_at, {
                "agentdesk.label.target": kind, "agentdesk.label.label": label.label,
                "agentdesk.label.author": label.author, "agentdesk.label.at": iso(label.created_at)}))
        for note in m.notes:
            events.append(_event(NOTE_EVENT, note.created_at, {
                "agentdesk.note.target": kind, "agentdesk.note.id": note.id, "agentdesk.note.author": note.author,
                "agentdesk.note.at": iso(note.created_at), "agentdesk.note.text": note.text}))
    if attributes:
        span["attributes"] = [a for a in span["attributes"] if a["key"] not in OURS] + attributes
    if events:
        span["events"] = [e for e in span.get("events", []) if e["name"] not in (NOTE_EVENT, LABEL_EVENT)] + events


def _event(name: str, at: float, attributes: dict[str, Any]) -> dict[str, Any]:
    return {"timeUnixNano": str(int(at * 1e9)), "name": name, "attributes": v.to_attributes(attributes)}


def strip_stored(attrs: dict[str, Any]) -> dict[str, Any]:
    """An imported span's stored attributes without the copies of notes and labels it arrived with."""
    if not (OURS & attrs.keys() or _has_ours(attrs.get("otel.events"))):
        return attrs
    out = {k: val for k, val in attrs.items() if k not in OURS}
    if isinstance(out.get("otel.events"), list):
        out["otel.events"] = [e for e in out["otel.events"]
                              if not (isinstance(e, dict) and e.get("name") in (NOTE_EVENT, LABEL_EVENT))]
    return out


def _has_ours(events: object) -> bool:
    return isinstance(events, list) and any(isinstance(e, dict) and e.get("name") in (NOTE_EVENT, LABEL_EVENT)
                                            for e in events)


@dataclass
class Restored:
    notes: int = 0
    labels: int = 0
    skipped: int = 0
    """Marks that could not be restored: already there, a target not found, or a login that may not write."""
    refused: str | None = None


def restore(store: Store, run_ids: list[str]) -> Restored:
    """The notes and labels the imported runs' spans carried, written back as notes and labels of those runs."""
    done = Restored()
    found = _found(store, run_ids)
    for run_id in run_ids:
        for kind, target, what in found.get(run_id, ()):
            try:
                _write(store, run_id, kind, target, what, done)
            except (Conflict, NotFound):
                done.skipped += 1
            except PermissionRefused as exc:  # an agent login importing: the marks stay as plain events
                done.refused = str(exc)
                done.skipped += 1
                return done
    return done


def _write(store: Store, run_id: str, kind: str, target: str, what: dict[str, Any], done: Restored) -> None:
    at = iso_seconds(what.get("at"))
    if what["type"] == "note":
        original = str(what.get("id") or what.get("text"))
        note_id = "otn_" + hashlib.sha256(f"{run_id}\n{kind}\n{target}\n{original}".encode()).hexdigest()[:32]
        commands.add_note(store, kind, target, str(what.get("text") or ""), str(what.get("author") or IMPORT_AUTHOR),
                          note_id=note_id, written_at=at)
        done.notes += 1
    else:
        commands.add_label(store, kind, target, str(what["label"]), str(what.get("author") or IMPORT_AUTHOR),
                           written_at=at)
        done.labels += 1


def iso_seconds(text: object) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def _found(store: Store, run_ids: list[str]) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    """Run -> (kind, target id, note or label) for every mark the runs' stored spans carry.

    One read for all the runs, `IN_CHUNK` runs a statement: one read per run was two statements and a
    transaction per imported trace (5,000 round-trip triples for 5,000 small traces on PostgreSQL)."""
    found: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    approvals: dict[str, str] = {}
    rows: list[tuple[str, str, str | None]] = []
    with store.reading() as s:
        for n in range(0, len(run_ids), IN_CHUNK):
            some = run_ids[n:n + IN_CHUNK]
            approvals.update((span, a) for a, span in s.execute(
                select(sc.ApprovalRow.id, sc.ApprovalRow.span_id).where(sc.ApprovalRow.run_id.in_(some))).all()
                if span)
            rows += [(r, i, t) for i, r, t in s.execute(
                select(sc.SpanRow.id, sc.SpanRow.run_id, sc.SpanRow.attributes).where(
                    sc.SpanRow.run_id.in_(some), _may_carry_marks(s.get_bind().dialect.name))).all()]
    for run_id, span_id, text in rows:
        try:
            attrs = loads(text or "{}")
        except ValueError:
            continue
        if not isinstance(attrs, dict):
            continue
        targets = {"span": span_id, "run": run_id, "approval": approvals.get(span_id, "")}
        found.setdefault(run_id, []).extend(marks_of(attrs, targets))
    return found


def marks_of(attrs: dict[str, Any], targets: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    found: list[tuple[str, str, dict[str, Any]]] = []
    labelled: set[tuple[str, str]] = set()
    for event in attrs.get("otel.events") or []:
        if not isinstance(event, dict) or event.get("name") not in (NOTE_EVENT, LABEL_EVENT):
            continue
        a = event.get("attributes") or {}
        prefix = "agentdesk.note." if event["name"] == NOTE_EVENT else "agentdesk.label."
        kind = str(a.get(prefix + "target") or "span")
        target = targets.get(kind)
        if not target:
            continue
        what = {k[len(prefix):]: val for k, val in a.items() if k.startswith(prefix)}
        what["type"] = "note" if event["name"] == NOTE_EVENT else "label"
        if what["type"] == "label":
            labelled.add((kind, str(what.get("label"))))
        found.append((kind, target, what))
    for kind, key in LABEL_KEYS.items():  # labels named only in the attribute (another tool added them)
        names = attrs.get(key)
        if targets.get(kind) and isinstance(names, list):
            found += [(kind, targets[kind], {"type": "label", "label": str(name)}) for name in names
                      if (kind, str(name)) not in labelled]
    return found
