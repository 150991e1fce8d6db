"""Operator commands: each guarded by compare-and-set, audited, and all-or-nothing.

Every refusal is checked with `refused`, which also asserts the database is
byte-for-byte the same dump afterwards: a failed command writes nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentdesk.store.errors import (
    AlreadyDecided,
    Conflict,
    Expired,
    InvalidInput,
    NotFound,
    ReadOnlyStore,
    StaleRevision,
    StoreError,
)
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.validation import payload_hash
from tests.conftest import World, dump


@contextmanager
def refused(path: Path, error: type[StoreError], match: str | None = None) -> Iterator[None]:
    before = dump(path)
    with pytest.raises(error, match=match):
        yield
    assert dump(path) == before


def last_audit(source: NativeSource) -> tuple[str, str, dict[str, object]]:
    record = source.audit_records(limit=1)[0]
    return record.actor, record.action, json.loads(record.payload)


# -- approvals -------------------------------------------------------------------------------

def test_approve_records_actor_and_time(source: NativeSource, world: World) -> None:
    decided = source.decide(world.approval, approve=True, actor="alice")
    assert (decided.status, decided.decided_by, decided.reason) == ("approved", "alice", None)
    assert decided.decided_at is not None and decided.edited_arguments is None
    assert last_audit(source)[:2] == ("alice", "approval.approved")


def test_deny_needs_a_reason(source: NativeSource, store_path: Path, world: World) -> None:
    with refused(store_path, InvalidInput, "reason"):
        source.decide(world.approval, approve=False, actor="alice")
    with refused(store_path, InvalidInput, "reason"):
        source.decide(world.approval, approve=False, actor="alice", reason="   ")
    denied = source.decide(world.approval, approve=False, actor="alice", reason="too risky")
    assert (denied.status, denied.reason) == ("denied", "too risky")


def test_edited_arguments_are_hashed_and_the_audit_keeps_the_original(source: NativeSource,
                                                                      world: World) -> None:
    original = source.approval(world.approval)
    decided = source.decide(world.approval, approve=True, actor="alice",
                            edited_arguments='{"cmd": "ls -la", "cwd": "/tmp"}')
    assert decided.edited_arguments == '{"cmd":"ls -la","cwd":"/tmp"}'
    assert decided.edited_hash == payload_hash("shell", decided.edited_arguments)
    assert decided.arguments == original.arguments and decided.payload_hash == original.payload_hash
    _, _, payload = last_audit(source)
    assert payload["original_arguments"] == original.arguments
    assert payload["edited_hash"] == decided.edited_hash


def test_edited_arguments_are_validated(source: NativeSource, store_path: Path, world: World) -> None:
    with refused(store_path, InvalidInput, "JSON"):
        source.decide(world.approval, approve=True, actor="alice", edited_arguments="{nope")
    with refused(store_path, InvalidInput, "object"):
        source.decide(world.approval, approve=True, actor="alice", edited_arguments="[1]")
    with refused(store_path, InvalidInput, "approving"):
        source.decide(world.approval, approve=False, actor="alice", reason="r", edited_arguments="{}")


def test_second_decision_names_who_decided_and_when(source: NativeSource, store_path: Path,
                                                    world: World) -> None:
    source.decide(world.approval, approve=True, actor="alice")
    with refused(store_path, AlreadyDecided):
        source.decide(world.approval, approve=False, actor="bob", reason="no")
    try:
        source.decide(world.approval, approve=True, actor="bob")
    except AlreadyDecided as exc:
        assert exc.actor == "alice" and exc.status == "approved" and exc.at and "UTC" in exc.at
        assert "alice" in str(exc) and exc.at in str(exc)
    else:
        pytest.fail("a second decision was accepted")


def test_a_second_store_handle_loses_the_race_too(source: NativeSource, store_path: Path,
                                                  world: World) -> None:
    other = NativeSource.open(str(store_path))
    try:
        other.decide(world.approval, approve=True, actor="bob")
        with refused(store_path, AlreadyDecided, "bob"):
            source.decide(world.approval, approve=True, actor="alice")
    finally:
        other.close()


def test_expired_cannot_be_approved(source: NativeSource, rt: AgentRuntime, store_path: Path,
                                    world: World) -> None:
    overdue = rt.request_approval(world.run, "shell", {"cmd": "rm"}, timeout_s=0)
    time.sleep(0.01)
    with refused(store_path, Expired):
        source.decide(overdue, approve=True, actor="alice")
    assert source.expire_overdue() == [overdue]
    assert source.approval(overdue).status == "expired"
    assert last_audit(source)[1] == "approval.expired"
    with refused(store_path, Expired):
        source.decide(overdue, approve=False, actor="alice", reason="late")
    assert source.expire_overdue() == []
    assert source.approval(world.approval).status == "pending"  # not overdue: left alone


def test_unknown_approval_is_not_found(source: NativeSource, store_path: Path) -> None:
    with refused(store_path, NotFound):
        source.decide("apr_missing", approve=True, actor="alice")


def test_decision_updates_the_tool_call(source: NativeSource, store: Store, world: World) -> None:
    source.decide(world.approval, approve=True, actor="alice")
    from agentdesk.store.persistence.schema import ToolCallRow
    with store.reading() as s:
        call = s.get(ToolCallRow, source.approval(world.approval).tool_call_id)
        assert call is not None and call.status == "approved"


# -- context: visibility, lock, edit ---------------------------------------------------------

def test_group_visibility_moves_the_whole_group(source: NativeSource, store_path: Path, world: World) -> None:
    ctx = source.context(world.agent)
    tool_group = ctx.groups[1]
    source.set_group_visibility(tool_group.id, False, tool_group.revision, "alice")
    after = source.context(world.agent)
    hidden = [i for i in after.items if i.group_id == tool_group.id]
    assert len(hidden) == 2 and not any(i.visible for i in hidden)
    assert all(i.revision == 2 for i in hidden)
    assert after.groups[1].revision == tool_group.revision + 1
    assert after.context_revision == ctx.context_revision + 1
    assert after.visible_tokens == ctx.visible_tokens - sum(i.token_estimate for i in hidden)
    with refused(store_path, StaleRevision, "reload"):
        source.set_group_visibility(tool_group.id, True, tool_group.revision, "alice")
    source.set_group_visibility(tool_group.id, True, after.groups[1].revision, "alice")
    assert source.context(world.agent).visible_tokens == ctx.visible_tokens
    with refused(store_path, NotFound):
        source.set_group_visibility("grp_missing", True, 1, "alice")


def test_a_group_holding_a_locked_item_cannot_be_hidden(source: NativeSource, store_path: Path,
                                                        world: World) -> None:
    item = source.context(world.agent).items[2]
    source.set_item_locked(item.id, True, item.revision, "alice")
    group = source.context(world.agent).groups[1]
    with refused(store_path, Conflict, "locked"):
        source.set_group_visibility(group.id, False, group.revision, "alice")


def test_lock_and_unlock_guard_revisions(source: NativeSource, store_path: Path, world: World) -> None:
    item = source.context(world.agent).items[0]
    source.set_item_locked(item.id, True, item.revision, "alice")
    locked = source.context(world.agent).items[0]
    assert locked.locked and locked.revision == item.revision + 1
    with refused(store_path, StaleRevision):
        source.set_item_locked(item.id, False, item.revision, "alice")
    with refused(store_path, Conflict, "locked"):
        source.edit_item(item.id, "changed", locked.revision, "alice")
    source.set_item_locked(item.id, False, locked.revision, "alice")
    assert not source.context(world.agent).items[0].locked
    with refused(store_path, NotFound):
        source.set_item_locked("itm_missing", True, 1, "alice")


def test_edit_bumps_the_revision_and_keeps_history(source: NativeSource, store_path: Path,
                                                   world: World) -> None:
    item = source.context(world.agent).items[1]
    source.edit_item(item.id, "the user asks something else", item.revision, "alice")
    edited = source.context(world.agent).items[1]
    assert (edited.content, edited.revision) == ("the user asks something else", item.revision + 1)
    assert edited.token_estimate == 7
    with refused(store_path, StaleRevision):
        source.edit_item(item.id, "stale edit", item.revision, "alice")
    with refused(store_path, InvalidInput, "actor"):
        source.edit_item(item.id, "no actor", edited.revision, " ")
    assert last_audit(source)[1] == "context.edit"


# -- compaction ------------------------------------------------------------------------------

def test_compaction_replaces_consecutive_items_and_undo_restores_exactly(source: NativeSource,
                                                                         world: World) -> None:
    before = source.context(world.agent)
    covered = [i.id for i in before.items[1:4]]
    comp_id = source.compact(world.agent, covered, "they talked", "the tool call", before.context_revision,
                             "alice")
    during = source.context(world.agent)
    summary = next(i for i in during.items if i.summary_of == comp_id)
    assert [i.id for i in during.items if i.effective_visible] == [before.items[0].id, summary.id,
                                                                   before.items[4].id]
    assert {i.id for i in during.items if i.compaction_id == comp_id} == set(covered)
    assert during.compactions[0].covered_item_ids == tuple(covered)
    assert during.context_revision == before.context_revision + 1
    source.undo_compaction(comp_id, "alice")
    after = source.context(world.agent)
    assert after.items == before.items
    assert after.groups == before.groups
    assert after.visible_tokens == before.visible_tokens
    assert after.context_revision == before.context_revision + 2
    assert after.compactions[0].undone_at is not None


def test_compaction_refusals(source: NativeSource, store_path: Path, world: World) -> None:
    ctx = source.context(world.agent)
    ids = [i.id for i in ctx.items]
    rev = ctx.context_revision
    with refused(store_path, StaleRevision):
        source.compact(world.agent, ids[:2], "s", "", rev - 1, "alice")
    with refused(store_path, InvalidInput, "consecutive"):
        source.compact(world.agent, [ids[0], ids[2]], "s", "", rev, "alice")
    with refused(store_path, InvalidInput, "summary"):
        source.compact(world.agent, ids[:2], "  ", "", rev, "alice")
    with refused(store_path, InvalidInput):
        source.compact(world.agent, [], "s", "", rev, "alice")
    with refused(store_path, InvalidInput, "current context"):
        source.compact(world.agent, [ids[0], "itm_missing"], "s", "", rev, "alice")
    with refused(store_path, NotFound):
        source.compact("agt_missing", ids[:2], "s", "", rev, "alice")
    source.set_group_visibility(ctx.groups[2].id, False, ctx.groups[2].revision, "alice")
    rev += 1
    with refused(store_path, InvalidInput, "Hidden"):
        source.compact(world.agent, ids[3:], "s", "", rev, "alice")
    source.set_item_locked(ids[0], True, ctx.items[0].revision, "alice")
    rev += 1
    with refused(store_path, Conflict, "Locked"):
        source.compact(world.agent, ids[:2], "s", "", rev, "alice")


def test_covered_items_are_frozen_until_undo(source: NativeSource, store_path: Path, world: World) -> None:
    ctx = source.context(world.agent)
    first = ctx.items[0]
    comp_id = source.compact(world.agent, [first.id], "s", "", ctx.context_revision, "alice")
    with refused(store_path, Conflict, "compaction"):
        source.edit_item(first.id, "x", first.revision, "alice")
    with refused(store_path, Conflict, "compaction"):
        source.set_item_locked(first.id, True, first.revision, "alice")
    group = source.context(world.agent).groups[0]
    with refused(store_path, Conflict, "compaction"):
        source.set_group_visibility(group.id, False, group.revision, "alice")
    source.undo_compaction(comp_id, "alice")
    with refused(store_path, Conflict, "already undone"):
        source.undo_compaction(comp_id, "alice")
    with refused(store_path, NotFound):
        source.undo_compaction("cmp_missing", "alice")


def test_nested_compactions_undo_inside_out(source: NativeSource, store_path: Path, world: World) -> None:
    before = source.context(world.agent)
    first_two = [i.id for i in before.items[:2]]
    inner = source.compact(world.agent, first_two, "inner", "", before.context_revision, "alice")
    mid = source.context(world.agent)
    visible = [i.id for i in mid.items if i.effective_visible]
    outer = source.compact(world.agent, visible[:2], "outer", "", mid.context_revision, "alice")
    with refused(store_path, Conflict, "later compaction"):
        source.undo_compaction(inner, "alice")
    source.undo_compaction(outer, "alice")
    assert source.context(world.agent).items == mid.items
    source.undo_compaction(inner, "alice")
    assert source.context(world.agent).items == before.items


def test_commands_are_audited_in_a_verifiable_chain(source: NativeSource, world: World) -> None:
    ctx = source.context(world.agent)
    source.set_item_locked(ctx.items[0].id, True, ctx.items[0].revision, "alice")
    source.decide(world.approval, approve=True, actor="bob")
    actions = [r.action for r in source.audit_records(limit=2)]
    assert actions == ["approval.approved", "context.lock"]
    assert source.verify().ok


def test_read_only_store_refuses_commands(store_path: Path, world: World) -> None:
    ro = NativeSource.open(str(store_path), read_only=True)
    try:
        assert ro.capabilities == frozenset()
        with refused(store_path, ReadOnlyStore):
            ro.decide(world.approval, approve=True, actor="alice")
        assert ro.approval(world.approval).status == "pending"
    finally:
        ro.close()



def test_racing_operators_decide_exactly_once(source: NativeSource, store_path: Path, world: World) -> None:
    """Eight operators on two store handles (separate connections, as separate processes would be)."""
    other = NativeSource.open(str(store_path))
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def operator(n: int) -> None:
        handle = (source, other)[n % 2]
        barrier.wait()
        try:
            handle.decide(world.approval, approve=n % 3 != 0, actor=f"op{n}", reason="race")
            outcomes.append("won")
        except AlreadyDecided:
            outcomes.append("lost")

    threads = [threading.Thread(target=operator, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    other.close()
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]
    decisions = [r for r in source.audit_records(limit=50) if r.action.startswith("approval.")
                 and r.entity_id == world.approval and r.action != "approval.request"]
    assert len(decisions) == 1
