"""The command side of the contract: a capability is offered iff its writer exists and works.

A source implements only the writer protocols it can carry out (`ApprovalWriter`,
`ContextWriter`); `capabilities` says what it may do right now and `why_not` why not.
Every behaviour here runs against the read-only and the writable opening alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agentdesk.store.errors import AlreadyDecided, Conflict, ReadOnlyStore, Unsupported
from agentdesk.store.persistence.bus import Change
from agentdesk.store.source import Capability, Source, approval_writer, context_writer
from tests.contract.kinds import Kind

DECISIONS = (Capability.APPROVE, Capability.DENY, Capability.EDIT_ARGUMENTS)
CONTEXT_EDITS = (Capability.SET_VISIBILITY, Capability.LOCK, Capability.EDIT_ITEM, Capability.COMPACT,
                 Capability.UNDO_COMPACTION)
REFUSED = (Unsupported, ReadOnlyStore)


def attempts(source: Source, ids: dict[str, str], kind: Kind) -> dict[Capability, Callable[[], object]]:
    """One real call per capability, on the fixture's own ids (each is refused first when not offered)."""
    approval = ids[kind.decidable]
    context = source.context(ids[kind.context_agent])
    group = context.groups[0].id if context.groups else "no-such-group"
    item = context.items[0].id if context.items else "no-such-item"
    decisions, edits = approval_writer(source), context_writer(source)
    calls: dict[Capability, Callable[[], object]] = {}
    if decisions is not None:
        calls[Capability.EDIT_ARGUMENTS] = lambda: decisions.decide(approval, True, "contract", "edited",
                                                                    edited_arguments='{"cmd": "true"}')
    if edits is not None:
        calls[Capability.SET_VISIBILITY] = lambda: edits.set_group_visibility(group, False, 0, "contract")
        calls[Capability.LOCK] = lambda: edits.set_item_locked(item, True, 0, "contract")
        calls[Capability.EDIT_ITEM] = lambda: edits.edit_item(item, "[]", 0, "contract")
        calls[Capability.COMPACT] = lambda: edits.compact(context.agent_id, [item], "summary", "", 0, "contract")
        calls[Capability.UNDO_COMPACTION] = lambda: edits.undo_compaction("no-such-compaction", "contract")
    return calls


@pytest.mark.parametrize("opening", ["reader", "writer"])
def test_capabilities_why_not_and_writers_agree(opening: str, request: pytest.FixtureRequest, kind: Kind,
                                                built: tuple[Path, dict[str, str]]) -> None:
    source: Source = request.getfixturevalue(opening)
    offered = source.capabilities
    if opening == "reader":
        assert offered == frozenset(), "a read-only opening offers no command"
    for capability in Capability:
        reason = source.why_not(capability)
        assert (reason == "") == (capability in offered), (capability, reason)
    assert (approval_writer(source) is not None) >= bool(offered & set(DECISIONS))
    assert (context_writer(source) is not None) >= bool(offered & set(CONTEXT_EDITS))
    for capability, call in attempts(source, built[1], kind).items():
        if capability not in offered:  # the method exists, but refuses before touching anything
            with pytest.raises(REFUSED):
                call()
    if approval_writer(source) is not None and Capability.APPROVE not in offered:
        with pytest.raises(REFUSED):
            approval_writer(source).decide(built[1][kind.decidable], True, "contract")  # type: ignore[union-attr]


def test_a_decision_is_recorded_exactly_once(writer: Source, kind: Kind, built: tuple[Path, dict[str, str]]) -> None:
    path, ids = built
    approval_id = ids[kind.decidable]
    decisions = approval_writer(writer)
    assert decisions is not None and Capability.APPROVE in writer.capabilities
    rivals = [kind.open(path, writes=True) for _ in range(3)]
    outcomes: list[str] = []
    heard: list[Change] = []
    for rival in rivals:
        rival.bus.subscribe(heard.extend)
    barrier = threading.Barrier(len(rivals))

    def decide(source: Source, n: int) -> None:
        barrier.wait()
        try:
            approval_writer(source).decide(approval_id, n % 2 == 0, f"contract-{n}", "race")  # type: ignore[union-attr]
            outcomes.append("won")
        except (AlreadyDecided, Conflict) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=decide, args=(s, n)) for n, s in enumerate(rivals)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    for rival in rivals:
        rival.close()
    assert sorted(outcomes).count("won") == 1 and len(outcomes) == len(rivals), outcomes
    decided = writer.approval(approval_id)
    assert decided.status in ("approved", "denied") and decided.decided_at is not None
    assert ("approval", approval_id) in {(c.entity, c.id) for c in heard}  # published after the commit
    with pytest.raises(AlreadyDecided):
        decisions.decide(approval_id, True, "contract", "once more")
    assert approval_id not in {a.id for a in writer.approvals("pending")}


def test_context_edits_where_offered(writer: Source, kind: Kind, built: tuple[Path, dict[str, str]]) -> None:
    edits = context_writer(writer)
    offered = writer.capabilities & set(CONTEXT_EDITS)
    if edits is None:
        assert not offered
        return
    agent_id = built[1][kind.context_agent]
    if Capability.SET_VISIBILITY in offered:
        context = writer.context(agent_id)
        group = next(g for g in context.groups
                     if all(i.visible and not i.locked and i.compaction_id is None
                            for i in context.items if i.group_id == g.id)
                     and any(i.group_id == g.id for i in context.items))
        edits.set_group_visibility(group.id, False, group.revision, "contract")
        hidden = writer.context(agent_id)
        assert not any(i.visible for i in hidden.items if i.group_id == group.id)
        assert hidden.context_revision != context.context_revision
    if Capability.EDIT_ITEM in offered and kind.edit is not None:
        key, content = kind.edit
        item = next(i for i in writer.context(agent_id).items if i.id == built[1][key])
        with pytest.raises(Conflict):  # a stale revision is refused, nothing written
            edits.edit_item(item.id, content, item.revision + 7, "contract")
        edits.edit_item(item.id, content, item.revision, "contract")
        assert next(i for i in writer.context(agent_id).items if i.id == item.id).content == content
    if Capability.COMPACT in offered:
        context = writer.context(agent_id)
        free = [i.visible and not i.locked and i.compaction_id is None for i in context.items]
        first = next(n for n in range(len(free) - 1) if free[n] and free[n + 1])  # two neighbours, both free
        covered = [context.items[first].id, context.items[first + 1].id]
        compaction = edits.compact(agent_id, covered, "what they said", "", context.context_revision, "contract")
        compacted = writer.context(agent_id)
        assert all(i.compaction_id == compaction for i in compacted.items if i.id in covered)
        if Capability.UNDO_COMPACTION in offered:
            edits.undo_compaction(compaction, "contract")
            assert all(i.compaction_id is None for i in writer.context(agent_id).items if i.id in covered)
    if Capability.LOCK in offered:
        item = next(i for i in writer.context(agent_id).items if not i.locked and i.compaction_id is None)
        edits.set_item_locked(item.id, True, item.revision, "contract")
        assert next(i for i in writer.context(agent_id).items if i.id == item.id).locked


def test_expiry_where_offered(writer: Source) -> None:
    """A runtime with deadlines expires what is overdue (and says which); one without refuses to pretend."""
    if Capability.EXPIRE in writer.capabilities:
        expired = writer.expire_overdue()
        assert all(writer.approval(a).status == "expired" for a in expired)
        assert writer.expire_overdue() == []  # nothing is expired twice
    else:
        assert writer.why_not(Capability.EXPIRE)
        assert writer.expire_overdue() == []

