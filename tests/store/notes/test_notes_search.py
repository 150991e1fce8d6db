"""`label:` and `note:` in the span query language: one run's search and the store-wide search, both backends."""

from __future__ import annotations

import pytest

from agentdesk.store.native import NativeSource
from agentdesk.store.notes import commands
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search.query import QueryError, parse
from agentdesk.store.search.run_search import search_run
from agentdesk.store.search.store_search import HitKind, search_store
from tests.conftest import World


@pytest.fixture
def marked(store: Store, rt: AgentRuntime, world: World) -> dict[str, str]:
    spans = {name: rt.start_span(world.run, kind, name) for kind, name in
             (("tool", "read_file"), ("tool", "run_shell"), ("model", "chat"))}
    commands.add_label(store, "span", spans["run_shell"], "needs-review", "alice")
    commands.add_label(store, "span", spans["chat"], "needs-review", "alice")
    commands.add_label(store, "span", spans["chat"], "regression", "alice")
    commands.add_note(store, "span", spans["run_shell"], "Wrong tool: it should have used read_file", "alice")
    commands.add_label(store, "run", world.run, "needs-review", "bob")
    commands.add_label(store, "approval", world.approval, "needs-review", "bob")
    return spans


def test_the_terms_parse() -> None:
    q = parse('label:Needs-Review note:"wrong tool" kind:tool')
    assert q.labels == ("needs-review",) and q.notes == (("wrong", "tool"),) and q.kinds == {"tool"}
    assert parse("label:x").only_marks and not q.only_marks


def test_a_runs_search_finds_its_labelled_and_noted_spans(source: NativeSource, world: World,
                                                          marked: dict[str, str]) -> None:
    assert set(search_run(source, world.run, "label:needs-review").span_ids) == {marked["run_shell"],
                                                                                   marked["chat"]}
    assert search_run(source, world.run, "label:needs-review label:regression").span_ids == [marked["chat"]]
    assert search_run(source, world.run, 'note:"wrong tool"').span_ids == [marked["run_shell"]]
    assert search_run(source, world.run, "label:needs-review kind:model").span_ids == [marked["chat"]]
    assert search_run(source, world.run, "label:nobody-uses-this").span_ids == []


def test_the_store_search_lists_runs_spans_and_approvals_marked(source: NativeSource, world: World,
                                                                marked: dict[str, str]) -> None:
    found = search_store(source, "label:needs-review")
    assert found.totals == {HitKind.RUN: 1, HitKind.SPAN: 2, HitKind.APPROVAL: 1}
    hits = {(h.kind, h.id) for g in found.groups for h in g.hits}
    assert (HitKind.RUN, world.run) in hits and (HitKind.APPROVAL, world.approval) in hits
    mixed = search_store(source, "label:needs-review shell")
    assert {(h.kind, h.id) for g in mixed.groups for h in g.hits} == {(HitKind.SPAN, marked["run_shell"]),
                                                                      (HitKind.APPROVAL, world.approval)}
    assert search_store(source, "note:tool").totals[HitKind.SPAN] == 1


def test_a_source_without_notes_refuses_the_terms_in_one_sentence(world: World, marked: dict[str, str]) -> None:
    class Foreign:  # a source that is not agentdesk's own store (own_store answers None)
        pass
    with pytest.raises(QueryError, match="kept only in agentdesk's own store"):
        search_store(Foreign(), "label:needs-review")  # type: ignore[arg-type]
