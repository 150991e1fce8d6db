"""Writing notes and labels: one unit of work each, compare-and-set, audited, on the change bus.

On PostgreSQL the server does the write (migration 0018_notes: SECURITY DEFINER functions an operator may call
and nobody below may bypass); on SQLite the same steps run here under the writer's lock. The checks of the
caller's input are shared by both backends, and a guard that fails raises the same typed error on each:
`NotFound` (no such target or note), `Conflict` (the label is already there, or not), `StaleRevision` (someone
edited the note first; says who and when).
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import delete, text, update

from agentdesk.store.errors import Conflict, InvalidInput, NotFound, StaleRevision
from agentdesk.store.ids import new_id
from agentdesk.store.notes.labels import MAX_NOTE_BYTES, check_kind, check_label, check_note
from agentdesk.store.notes.marks import Label, Note, utc_text
from agentdesk.store.notes.targets import parents_of, target_run
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.roles import require
from agentdesk.store.uow import UnitOfWork, adopt_server_changes, affected
from agentdesk.store.validation import check_name

SERVER = {
    "note.add": text("SELECT * FROM agentdesk_note_add(:id, :kind, :target, :body, :actor, :at, :origin)"),
    "note.edit": text("SELECT * FROM agentdesk_note_edit(:id, :body, :expected, :actor, :origin)"),
    "note.remove": text("SELECT * FROM agentdesk_note_remove(:id, :expected, :actor, :origin)"),
    "label.add": text("SELECT * FROM agentdesk_label_add(:kind, :target, :label, :actor, :at, :origin)"),
    "label.remove": text("SELECT * FROM agentdesk_label_remove(:kind, :target, :label, :actor, :origin)"),
}


MAX_READ = MAX_NOTE_BYTES + 1
"""What a reader of a note from a pipe takes at most: one byte past the limit, so the check can refuse it."""


def text_hash(body: str) -> str:
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def add_note(store: Store, kind: str, target_id: str, body: str, actor: str, *,
             note_id: str | None = None, written_at: float | None = None) -> Note:
    """Attach a new note; `note_id` is chosen before the transaction so a retry cannot add it twice.

    `written_at`: when an imported note was first written (never later than now); None for now."""
    kind, body, actor = check_kind(kind), check_note(body), check_name("actor name", actor)
    note_id = note_id or new_id("note")
    if store.is_postgres:
        require(store.login, "operator", "writing a note")
        _on_server(store, "note.add", {"id": note_id, "kind": kind, "target": target_id, "body": body,
                                       "actor": actor, "at": written_at}, _what(kind, target_id))
        return _read_note(store, note_id)
    with UnitOfWork(store) as uow:
        s = uow.session
        if s.get(sc.NoteRow, note_id) is not None:
            raise Conflict(f"Note {note_id} exists already.")
        run = _target_or_missing(s, kind, target_id)
        at = _written(written_at, uow.now)
        s.add(sc.NoteRow(id=note_id, target_kind=kind, target_id=target_id, run_id=run, body=body, author=actor,
                         author_login=None, created_at=at, updated_at=at, updated_by=actor,
                         updated_login=None, revision=1))
        uow.audit(actor, "note.add", "note", note_id, {"target": kind, "target_id": target_id, "run": run,
                                                       "bytes": len(body.encode()), "text_hash": text_hash(body),
                                                       "written_at": written_at})
        uow.record("note", "insert", note_id, parents_of(s, run, kind, target_id), 1)
    return _read_note(store, note_id)


def edit_note(store: Store, note_id: str, body: str, expected_revision: int, actor: str) -> Note:
    """Replace a note's text if nobody changed it since `expected_revision`."""
    body, actor = check_note(body), check_name("actor name", actor)
    if store.is_postgres:
        require(store.login, "operator", "editing a note")
        _on_server(store, "note.edit", {"id": note_id, "body": body, "expected": expected_revision,
                                        "actor": actor}, f"note {note_id}")
        return _read_note(store, note_id)
    with UnitOfWork(store) as uow:
        row = _current_note(uow, note_id, expected_revision)
        N = sc.NoteRow
        won = affected(uow.session.execute(
            update(N).where(N.id == note_id, N.revision == expected_revision)
            .values(body=body, updated_at=uow.now, updated_by=actor, revision=expected_revision + 1)
            .execution_options(synchronize_session=False)))
        assert won == 1  # under the writer's lock, after the check above
        uow.audit(actor, "note.edit", "note", note_id, {"before_revision": expected_revision,
                                                        "bytes": len(body.encode()), "text_hash": text_hash(body)})
        uow.record("note", "update", note_id, parents_of(uow.session, row.run_id, row.target_kind, row.target_id),
                   expected_revision + 1)
    return _read_note(store, note_id)


def remove_note(store: Store, note_id: str, expected_revision: int, actor: str) -> None:
    actor = check_name("actor name", actor)
    if store.is_postgres:
        require(store.login, "operator", "removing a note")
        _on_server(store, "note.remove", {"id": note_id, "expected": expected_revision, "actor": actor},
                   f"note {note_id}")
        return
    with UnitOfWork(store) as uow:
        row = _current_note(uow, note_id, expected_revision)
        parents = parents_of(uow.session, row.run_id, row.target_kind, row.target_id)
        uow.session.execute(delete(sc.NoteRow).where(sc.NoteRow.id == note_id)
                            .execution_options(synchronize_session=False))
        uow.audit(actor, "note.remove", "note", note_id, {"before_revision": expected_revision,
                                                          "target": row.target_kind, "target_id": row.target_id,
                                                          "run": row.run_id})
        uow.record("note", "delete", note_id, parents, expected_revision + 1)


def add_label(store: Store, kind: str, target_id: str, label: str, actor: str, *,
              written_at: float | None = None) -> Label:
    """Put `label` on the target; refused with who put it there if it is there already."""
    kind, label, actor = check_kind(kind), check_label(label), check_name("actor name", actor)
    key = f"{kind}:{target_id}:{label}"
    if store.is_postgres:
        require(store.login, "operator", "labelling")
        _on_server(store, "label.add", {"kind": kind, "target": target_id, "label": label, "actor": actor,
                                        "at": written_at}, _what(kind, target_id), label)
        return _read_label(store, kind, target_id, label)
    with UnitOfWork(store) as uow:
        s = uow.session
        found = s.get(sc.LabelRow, (kind, target_id, label))
        if found is not None:
            raise _already(label, kind, target_id, found.author, found.created_at)
        run = _target_or_missing(s, kind, target_id)
        s.add(sc.LabelRow(target_kind=kind, target_id=target_id, label=label, run_id=run, author=actor,
                          author_login=None, created_at=_written(written_at, uow.now)))
        uow.audit(actor, "label.add", "label", key, {"target": kind, "target_id": target_id, "label": label,
                                                     "run": run, "written_at": written_at})
        uow.record("label", "insert", key, parents_of(s, run, kind, target_id))
    return _read_label(store, kind, target_id, label)


def remove_label(store: Store, kind: str, target_id: str, label: str, actor: str) -> None:
    kind, actor = check_kind(kind), check_name("actor name", actor)
    key = f"{kind}:{target_id}:{label}"
    if store.is_postgres:
        require(store.login, "operator", "removing a label")
        _on_server(store, "label.remove", {"kind": kind, "target": target_id, "label": label, "actor": actor},
                   _what(kind, target_id), label)
        return
    with UnitOfWork(store) as uow:
        s = uow.session
        found = s.get(sc.LabelRow, (kind, target_id, label))
        if found is None:
            _target_or_missing(s, kind, target_id)
            raise _absent(label, kind, target_id)
        parents = parents_of(s, found.run_id, kind, target_id)
        L = sc.LabelRow
        s.execute(delete(L).where(L.target_kind == kind, L.target_id == target_id, L.label == label)
                  .execution_options(synchronize_session=False))
        uow.audit(actor, "label.remove", "label", key, {"target": kind, "target_id": target_id, "label": label,
                                                        "run": found.run_id, "added_by": found.author})
        uow.record("label", "delete", key, parents)


def _on_server(store: Store, action: str, params: dict[str, Any], what: str, label: str = "") -> None:
    """One server function in one unit of work; its outcome becomes the same typed error as on SQLite."""
    with UnitOfWork(store) as uow:
        found = uow.session.execute(SERVER[action], {**params, "origin": store.origin}).one()
        outcome = found.outcome
        if outcome == "not found":
            raise NotFound(f"There is no {what}.")
        if outcome == "stale":
            raise _stale(params["id"], found.revision, found.who, found.at)
        if outcome == "exists" and label:
            raise _already(label, params["kind"], params["target"], found.who, found.at)
        if outcome == "exists":
            raise Conflict(f"Note {params['id']} exists already.")
        if outcome == "absent":
            raise _absent(label, params["kind"], params["target"])
        adopt_server_changes(uow, found.changes)


def _written(written_at: float | None, now: float) -> float:
    if written_at is None:
        return now
    if not (0 <= written_at <= now):
        raise InvalidInput("A note or label cannot have been written in the future or before 1970.")
    return written_at


def _target_or_missing(session: Any, kind: str, target_id: str) -> str:
    run = target_run(session, kind, target_id)
    if run is None:
        raise NotFound(f"There is no {_what(kind, target_id)}.")
    return run


def _current_note(uow: UnitOfWork, note_id: str, expected: int) -> sc.NoteRow:
    row = uow.session.get(sc.NoteRow, note_id)
    if row is None:
        raise NotFound(f"There is no note {note_id}.")
    if row.revision != expected:
        raise _stale(note_id, row.revision, row.updated_by, row.updated_at)
    return row


def _what(kind: str, target_id: str) -> str:
    return f"{kind} {target_id}"


def _stale(note_id: str, revision: int, who: str | None, at: float | None) -> StaleRevision:
    return StaleRevision(f"Note {note_id} was changed by {who or '?'} at {utc_text(at)} (now revision "
                         f"{revision}); reload it and try again.")


def _already(label: str, kind: str, target_id: str, who: str | None, at: float | None) -> Conflict:
    return Conflict(f"The {_what(kind, target_id)} is already labelled {label!r} by "
                    f"{who or '?'} at {utc_text(at)}.")


def _absent(label: str, kind: str, target_id: str) -> Conflict:
    return Conflict(f"The {_what(kind, target_id)} has no label {label!r}.")


def _read_note(store: Store, note_id: str) -> Note:
    from agentdesk.store.notes.reads import note_by_id
    found = note_by_id(store, note_id)
    if found is None:
        raise NotFound(f"There is no note {note_id}.")
    return found


def _read_label(store: Store, kind: str, target_id: str, label: str) -> Label:
    from agentdesk.store.notes.reads import label_of
    found = label_of(store, kind, target_id, label)
    if found is None:
        raise NotFound(f"There is no label {label!r} on the {_what(kind, target_id)}.")
    return found

