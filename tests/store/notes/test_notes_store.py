"""Notes and labels in the store, on SQLite and PostgreSQL: add, edit, remove, compare-and-set, audit, bus."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from agentdesk.store.audit import Verdict
from agentdesk.store.errors import Conflict, InvalidInput, NotFound, StaleRevision
from agentdesk.store.notes import commands, reads
from agentdesk.store.notes.labels import MAX_NOTE_BYTES, check_label, label_problem
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World
from tests.store.audit.helpers import verify


def test_a_note_on_each_kind_of_target_reads_back_with_who_and_when(store: Store, rt: AgentRuntime,
                                                                     world: World) -> None:
    span = rt.start_span(world.run, "tool", "shell")
    for kind, target in (("span", span), ("run", world.run), ("approval", world.approval)):
        note = commands.add_note(store, kind, target, f"look at this {kind}", "alice")
        assert (note.author, note.revision, note.target.run_id) == ("alice", 1, world.run)
        marks = reads.marks_for(store, kind, target)
        assert [n.text for n in marks.notes] == [f"look at this {kind}"]
    assert reads.marked_runs(store, [world.run, "run_none"]) == {world.run: (3, ())}


def test_edit_and_remove_are_compare_and_set_on_the_revision(store: Store, world: World) -> None:
    note = commands.add_note(store, "run", world.run, "first", "alice")
    edited = commands.edit_note(store, note.id, "second", 1, "bob")
    assert (edited.text, edited.revision, edited.updated_by, edited.author) == ("second", 2, "bob", "alice")
    with pytest.raises(StaleRevision, match="changed by bob"):
        commands.edit_note(store, note.id, "third", 1, "carol")
    with pytest.raises(StaleRevision):
        commands.remove_note(store, note.id, 1, "carol")
    commands.remove_note(store, note.id, 2, "carol")
    assert reads.note_by_id(store, note.id) is None
    with pytest.raises(NotFound):
        commands.edit_note(store, note.id, "x", 3, "carol")


def test_a_label_is_added_once_and_removed_once(store: Store, world: World) -> None:
    label = commands.add_label(store, "approval", world.approval, "needs-review", "alice")
    assert label.id == f"approval:{world.approval}:needs-review"
    with pytest.raises(Conflict, match="already labelled 'needs-review' by alice"):
        commands.add_label(store, "approval", world.approval, "needs-review", "bob")
    commands.remove_label(store, "approval", world.approval, "needs-review", "bob")
    with pytest.raises(Conflict, match="has no label"):
        commands.remove_label(store, "approval", world.approval, "needs-review", "bob")
    assert reads.marks_for(store, "approval", world.approval).empty


def test_missing_targets_and_bad_input_are_one_sentence(store: Store, world: World) -> None:
    with pytest.raises(NotFound, match="There is no span nope"):
        commands.add_note(store, "span", "nope", "x", "alice")
    with pytest.raises(NotFound):
        commands.add_label(store, "run", "nope", "regression", "alice")
    with pytest.raises(InvalidInput, match="1,000,000 bytes"):
        commands.add_note(store, "run", world.run, "x" * (MAX_NOTE_BYTES + 1), "alice")
    with pytest.raises(InvalidInput, match="no control"):
        commands.add_label(store, "run", world.run, "needs\u200breview", "alice")
    with pytest.raises(InvalidInput, match="span, a run or an approval"):
        commands.add_note(store, "agent", world.agent, "x", "alice")
    with pytest.raises(InvalidInput, match="actor name"):
        commands.add_note(store, "run", world.run, "x", " ")


def test_a_note_of_exactly_one_megabyte_is_kept(store: Store, world: World) -> None:
    note = commands.add_note(store, "run", world.run, "é" * (MAX_NOTE_BYTES // 2), "alice")
    assert len(note.text.encode()) == MAX_NOTE_BYTES


def test_every_write_is_audited_and_the_chain_verifies(store: Store, world: World) -> None:
    note = commands.add_note(store, "run", world.run, "watch it", "alice")
    commands.edit_note(store, note.id, "watch it closely", 1, "alice")
    commands.add_label(store, "run", world.run, "regression", "alice")
    commands.remove_label(store, "run", world.run, "regression", "bob")
    commands.remove_note(store, note.id, 2, "bob")
    with store.reading() as s:
        actions = s.execute(select(sc.AuditRow.action, sc.AuditRow.actor).where(
            sc.AuditRow.entity.in_(("note", "label"))).order_by(sc.AuditRow.seq)).all()
    assert [tuple(a) for a in actions] == [("note.add", "alice"), ("note.edit", "alice"), ("label.add", "alice"),
                                           ("label.remove", "bob"), ("note.remove", "bob")]
    assert verify(store).verdict == Verdict.INTACT, verify(store).reason


def test_writes_go_over_the_change_bus_with_the_run_as_parent(store: Store, world: World) -> None:
    heard: list[Change] = []
    store.bus.subscribe(heard.extend)
    note = commands.add_note(store, "approval", world.approval, "hm", "alice")
    commands.add_label(store, "approval", world.approval, "bad-tool-choice", "alice")
    got = [(c.entity, c.op, c.id, c.parent("run"), c.parent("target")) for c in heard]
    target = f"approval:{world.approval}"
    assert got == [("note", "insert", note.id, world.run, target),
                   ("label", "insert", f"{target}:bad-tool-choice", world.run, target)]


def test_since_lists_notes_and_labels_newest_first_and_filters_by_label(store: Store, rt: AgentRuntime,
                                                                         world: World) -> None:
    span = rt.start_span(world.run, "llm", "chat")
    commands.add_note(store, "span", span, "wrong tool", "alice")
    commands.add_label(store, "span", span, "bad-tool-choice", "alice")
    commands.add_note(store, "run", world.run, "fine", "bob")
    every = reads.since(store, 0)
    assert {(e.what, e.text, e.author) for e in every} == {("note", "wrong tool", "alice"),
                                                           ("label", "bad-tool-choice", "alice"),
                                                           ("note", "fine", "bob")}
    assert [e.at for e in every] == sorted((e.at for e in every), reverse=True)
    tagged = reads.since(store, 0, label="bad-tool-choice")
    assert {(e.what, e.text) for e in tagged} == {("note", "wrong tool"), ("label", "bad-tool-choice")}
    assert all(e.labels == ("bad-tool-choice",) for e in tagged)
    assert reads.since(store, every[0].at + 1) == []


def test_a_bare_id_resolves_to_its_kind(store: Store, rt: AgentRuntime, world: World) -> None:
    span = rt.start_span(world.run, "tool", "shell")
    assert reads.resolve(store, span).kind == "span"
    assert reads.resolve(store, world.approval).kind == "approval"
    assert reads.resolve(store, f"run:{world.run}").id == world.run
    with pytest.raises(NotFound):
        reads.resolve(store, "nothing")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80))
def test_a_label_is_accepted_only_when_it_reads_as_itself(label: str) -> None:
    problem = label_problem(label)
    readable = (0 < len(label) <= 64 and label == label.strip()
                and all(c == " " or __import__("unicodedata").category(c)[0] not in "CZ" for c in label))
    assert (problem is None) == readable
    if readable:
        assert check_label(label) == label


LABELS = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=64)


@pytest.mark.sqlite_only
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(LABELS, min_size=1, max_size=4, unique=True))
def test_labels_round_trip_through_the_store(store: Store, world: World, labels: list[str]) -> None:
    for label in labels:
        commands.add_label(store, "run", world.run, label, "alice")
    assert reads.marks_for(store, "run", world.run).label_names == tuple(sorted(labels))
    for label in labels:
        commands.remove_label(store, "run", world.run, label, "alice")
    assert reads.marks_for(store, "run", world.run).empty


def test_racing_edits_and_labels_apply_exactly_once(store_path: object, store: Store, world: World) -> None:
    """Four operators, each with their own store handle, edit the same revision and add the same label at once:
    one edit and one label win; the others hear who was first."""
    note = commands.add_note(store, "run", world.run, "start", "alice")
    handles = [open_store(str(store_path)) for _ in range(4)]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(handles))

    def operator(n: int) -> None:
        barrier.wait()
        for write in (lambda: commands.edit_note(handles[n], note.id, f"edit {n}", 1, f"op{n}"),
                      lambda: commands.add_label(handles[n], "run", world.run, "needs-review", f"op{n}")):
            try:
                write()
                outcomes.append("won")
            except Conflict as exc:
                outcomes.append(type(exc).__name__)
    threads = [threading.Thread(target=operator, args=(n,)) for n in range(len(handles))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        for h in handles:
            h.close()
    assert outcomes.count("won") == 2 and len(outcomes) == 8
    final = reads.note_by_id(store, note.id)
    assert final is not None and final.revision == 2
    assert len(reads.marks_for(store, "run", world.run).labels) == 1
