"""Reading notes and labels: on one target, over a run, marked runs for the tree, and "since T" for a shift.

Plain SELECTs any viewer may run (on PostgreSQL viewers, operators and admins read both tables; agents do not).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentdesk.store.errors import InvalidInput, NotFound
from agentdesk.store.notes.labels import TARGET_KINDS
from agentdesk.store.notes.marks import Entry, Label, Marks, Note, Target
from agentdesk.store.notes.targets import find_target, target_run
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store

N, L = sc.NoteRow, sc.LabelRow
RUN_CHUNK = 500
"""Runs asked about per query (SQLite allows 32,766 parameters; keep each IN list small anyway)."""


def readable(store: Store) -> bool:
    """Whether this store's login may read notes (SQLite: yes; PostgreSQL: viewers and above, not agents).

    Readers that also serve agent logins (the export) ask first: a refused SELECT would end their
    transaction, and an agent's export is whole without the operators' notes."""
    login = store.login
    return login is None or login.may("viewer")


def note_of(row: sc.NoteRow) -> Note:
    return Note(row.id, Target(row.target_kind, row.target_id, row.run_id), row.body, row.author,
                row.author_login, row.created_at, row.updated_at, row.updated_by, row.revision)


def label_row(row: sc.LabelRow) -> Label:
    return Label(Target(row.target_kind, row.target_id, row.run_id), row.label, row.author, row.author_login,
                 row.created_at)


def note_by_id(store: Store, note_id: str) -> Note | None:
    with store.reading() as s:
        row = s.get(N, note_id)
        return None if row is None else note_of(row)


def label_of(store: Store, kind: str, target_id: str, label: str) -> Label | None:
    with store.reading() as s:
        row = s.get(L, (kind, target_id, label))
        return None if row is None else label_row(row)


def marks_for(store: Store, kind: str, target_id: str) -> Marks:
    """The notes (oldest first) and labels (sorted) on one span, run or approval."""
    with store.reading() as s:
        notes = s.execute(select(N).where(N.target_kind == kind, N.target_id == target_id)
                          .order_by(N.created_at, N.id)).scalars().all()
        labels = s.execute(select(L).where(L.target_kind == kind, L.target_id == target_id)
                           .order_by(L.label)).scalars().all()
        return Marks(tuple(note_of(n) for n in notes), tuple(label_row(x) for x in labels))


def marks_in_run(store: Store, run_id: str, kind: str | None = None) -> dict[str, Marks]:
    """Every marked target of one run (or only its spans, `kind="span"`), by target id: export, diff, timeline."""
    with store.reading() as s:
        return _group(s, [run_id], kind)


def _group(s: Session, run_ids: list[str], kind: str | None) -> dict[str, Marks]:
    notes_q = select(N).where(N.run_id.in_(run_ids)).order_by(N.created_at, N.id)
    labels_q = select(L).where(L.run_id.in_(run_ids)).order_by(L.label)
    if kind is not None:
        notes_q, labels_q = notes_q.where(N.target_kind == kind), labels_q.where(L.target_kind == kind)
    notes: dict[str, list[Note]] = defaultdict(list)
    labels: dict[str, list[Label]] = defaultdict(list)
    for n in s.execute(notes_q).scalars():
        notes[n.target_id].append(note_of(n))
    for x in s.execute(labels_q).scalars():
        labels[x.target_id].append(label_row(x))
    return {key: Marks(tuple(notes.get(key, ())), tuple(labels.get(key, ()))) for key in {*notes, *labels}}


def marked_runs(store: Store, run_ids: Iterable[str]) -> dict[str, tuple[int, tuple[str, ...]]]:
    """For each given run that has any: (notes anywhere in it, the labels anywhere in it, sorted)."""
    wanted = list(dict.fromkeys(run_ids))
    counts: dict[str, int] = defaultdict(int)
    names: dict[str, set[str]] = defaultdict(set)
    with store.reading() as s:
        for start in range(0, len(wanted), RUN_CHUNK):
            chunk = wanted[start:start + RUN_CHUNK]
            for run in s.execute(select(N.run_id).where(N.run_id.in_(chunk))).scalars():
                counts[run] += 1
            for run, label in s.execute(select(L.run_id, L.label).where(L.run_id.in_(chunk))).all():
                names[run].add(label)
    return {run: (counts.get(run, 0), tuple(sorted(names.get(run, ())))) for run in {*counts, *names}}


def since(store: Store, at: float, label: str | None = None) -> list[Entry]:
    """Every note written or edited and every label added at or after `at`, newest first.

    With `label`, only that label's entries and the notes on targets that carry it (what the next shift asks:
    "what was marked needs-review, and what did they say about it")."""
    with store.reading() as s:
        labels_q = select(L).where(L.created_at >= at)
        notes_q = select(N).where(N.updated_at >= at)
        if label is not None:
            labels_q = labels_q.where(L.label == label)
            notes_q = notes_q.where(N.target_id.in_(select(L.target_id).where(L.label == label)))
        label_rows = s.execute(labels_q).scalars().all()
        note_rows = s.execute(notes_q).scalars().all()
        keys = {(r.target_kind, r.target_id) for r in label_rows} | {(r.target_kind, r.target_id) for r in note_rows}
        on_target = _labels_on(s, keys)
        entries = [Entry("label", Target(r.target_kind, r.target_id, r.run_id), r.author, r.author_login,
                         r.created_at, r.label, labels=on_target.get((r.target_kind, r.target_id), ()))
                   for r in label_rows]
        entries += [Entry("note", Target(r.target_kind, r.target_id, r.run_id), r.updated_by,
                          r.updated_login or r.author_login, r.updated_at, r.body, r.id,
                          on_target.get((r.target_kind, r.target_id), ()))
                    for r in note_rows if label is None or label in on_target.get((r.target_kind, r.target_id), ())]
    return sorted(entries, key=lambda e: (-e.at, e.what, e.target.key, e.text))


def _labels_on(s: Session, keys: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, ...]]:
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    ids = list({target for _, target in keys})
    for start in range(0, len(ids), RUN_CHUNK):
        for kind, target, name in s.execute(select(L.target_kind, L.target_id, L.label)
                                            .where(L.target_id.in_(ids[start:start + RUN_CHUNK]))).all():
            if (kind, target) in keys:
                found[(kind, target)].add(name)
    return {key: tuple(sorted(names)) for key, names in found.items()}


def resolve(store: Store, given: str) -> Target:
    """A command line's target: `span:ID`, `run:ID`, `approval:ID`, or a bare id that names exactly one."""
    kind, sep, rest = given.partition(":")
    with store.reading() as s:
        if sep and kind in TARGET_KINDS:
            run = target_run(s, kind, rest)
            if run is None:
                raise NotFound(f"There is no {kind} {rest}.")
            return Target(kind, rest, run)
        found = find_target(s, given)
    if not found:
        raise NotFound(f"No span, run or approval has the id {given}.")
    if len(found) > 1:
        kinds = " and ".join(k for k, _ in found)
        raise InvalidInput(f"The id {given} names a {kinds}; say which, e.g. {found[0][0]}:{given}.")
    return Target(found[0][0], given, found[0][1])


def labelled(store: Store, labels: Iterable[str]) -> dict[tuple[str, str], str]:
    """Targets carrying every one of `labels` (compared casefolded), with their run: `(kind, id) -> run`."""
    wanted = {label.casefold() for label in labels}
    have: dict[tuple[str, str], set[str]] = defaultdict(set)
    runs: dict[tuple[str, str], str] = {}
    with store.reading() as s:
        for kind, target, name, run in s.execute(select(L.target_kind, L.target_id, L.label, L.run_id)).all():
            if name.casefold() in wanted:
                have[(kind, target)].add(name.casefold())
                runs[(kind, target)] = run
    return {key: runs[key] for key, names in have.items() if names >= wanted}


def note_texts(store: Store) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """Every target with notes: `(kind, id) -> (run, [texts])` (what `note:` terms are matched against)."""
    found: dict[tuple[str, str], tuple[str, list[str]]] = {}
    with store.reading() as s:
        for kind, target, run, body in s.execute(select(N.target_kind, N.target_id, N.run_id, N.body)).all():
            found.setdefault((kind, target), (run, []))[1].append(body)
    return found


def marks_by_target(s: Session, run_id: str) -> dict[tuple[str, str], Marks]:
    """Every marked target of one run, by (kind, id), read in the caller's transaction (the export's)."""
    notes: dict[tuple[str, str], list[Note]] = defaultdict(list)
    labels: dict[tuple[str, str], list[Label]] = defaultdict(list)
    for n in s.execute(select(N).where(N.run_id == run_id).order_by(N.created_at, N.id)).scalars():
        notes[(n.target_kind, n.target_id)].append(note_of(n))
    for x in s.execute(select(L).where(L.run_id == run_id).order_by(L.label)).scalars():
        labels[(x.target_kind, x.target_id)].append(label_row(x))
    return {key: Marks(tuple(notes.get(key, ())), tuple(labels.get(key, ()))) for key in {*notes, *labels}}


def every_marked_run(store: Store) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Every run with a note or label anywhere in it: (notes, labels sorted). People write few: read them all."""
    counts: dict[str, int] = defaultdict(int)
    names: dict[str, set[str]] = defaultdict(set)
    with store.reading() as s:
        for run in s.execute(select(N.run_id)).scalars():
            counts[run] += 1
        for run, label in s.execute(select(L.run_id, L.label)).all():
            names[run].add(label)
    return {run: (counts.get(run, 0), tuple(sorted(names.get(run, ())))) for run in {*counts, *names}}
