"""Operator commands on an agent's context: visibility, locks, edits, compaction and its undo.

Each is one transaction guarded by compare-and-set on a revision, appends an audit record and records its
changes; a failed guard raises a typed `Conflict` and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.types import Text

from agentdesk.store.audit.state import text_hash
from agentdesk.store.errors import Conflict, InvalidInput, NotFound, StaleRevision
from agentdesk.store.ids import new_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.roles import require
from agentdesk.store.uow import UnitOfWork, adopt_server_changes, affected, on_server
from agentdesk.store.validation import (
    check_name,
    check_text,
    estimate_tokens,
)

SERVER_VISIBILITY = text("SELECT * FROM agentdesk_set_group_visibility(:id, :visible, :expected, :actor, :origin)")
SERVER_LOCK = text("SELECT * FROM agentdesk_set_item_locked(:id, :locked, :expected, :actor, :origin)")
SERVER_EDIT = text("SELECT * FROM agentdesk_edit_item(:id, :content, :expected, :actor, :origin)")
SERVER_COMPACT = text("SELECT * FROM agentdesk_compact(:agent, :items, :summary, :focus, :expected, :actor, :comp, "
                      ":grp, :item, :origin)").bindparams(bindparam("items", type_=ARRAY(Text)))
SERVER_UNCOMPACT = text("SELECT * FROM agentdesk_undo_compaction(:id, :actor, :origin)")
"""On PostgreSQL (migration 0008) context edits go only through these SECURITY DEFINER functions (see
`store.approvals.commands` for why); the SQLite path below does the same work in Python."""


def _bump_context(uow: UnitOfWork, agent_id: str) -> int:
    agent = uow.session.get(sc.AgentRow, agent_id)
    assert agent is not None
    agent.context_revision += 1
    uow.record("context", "update", agent_id, {"agent": agent_id, "session": agent.session_id},
               agent.context_revision)
    return agent.context_revision


def _bump_item(uow: UnitOfWork, item: sc.ContextItemRow, content: str | None = None) -> None:
    if content is not None:
        item.content = content
        item.token_estimate = estimate_tokens(content)
    item.revision += 1
    uow.session.add(sc.ContextItemRevisionRow(item_id=item.id, revision=item.revision, content=item.content,
                                              token_estimate=item.token_estimate, created_at=uow.now))
    uow.record("context_item", "update", item.id, {"agent": item.agent_id, "group": item.group_id},
               item.revision)


def _item(uow: UnitOfWork, item_id: str) -> sc.ContextItemRow:
    item = uow.session.get(sc.ContextItemRow, item_id)
    if item is None or item.removed:
        raise NotFound(_MISSING["item"].format(id=item_id))
    return item


def set_group_visibility(store: Store, group_id: str, visible: bool, expected_revision: int,
                         actor: str) -> None:
    """Show or hide a whole turn group: a tool call and its result always go together."""
    actor = check_name("actor name", actor)
    G, Item = sc.ContextGroupRow, sc.ContextItemRow
    require(store.login, "operator", "showing or hiding context")  # one sentence before anything waits (PostgreSQL)
    with UnitOfWork(store) as uow:
        if on_server(uow):
            _context_outcome(uow, "group", group_id, expected_revision, uow.session.execute(SERVER_VISIBILITY, {
                "id": group_id, "visible": visible, "expected": expected_revision, "actor": actor,
                "origin": store.origin}).one())
            return
        group = uow.session.get(G, group_id)
        if group is None:
            raise NotFound(_MISSING["group"].format(id=group_id))
        if group.revision != expected_revision:
            raise StaleRevision(_STALE["group"].format(id=group_id, now=group.revision, had=expected_revision))
        items = uow.session.execute(select(Item).where(Item.group_id == group_id, Item.removed.is_(False))
                                    ).scalars().all()
        if any(i.compaction_id for i in items):
            raise Conflict(_REFUSED["group", "covered"])
        if not visible and any(i.locked for i in items):
            raise Conflict(_REFUSED["group", "locked"])
        changed = [i for i in items if bool(i.visible) != visible]
        for item in changed:
            item.visible = visible
            _bump_item(uow, item)
        group.revision += 1
        uow.record("context_group", "update", group_id, {"agent": group.agent_id}, group.revision)
        _bump_context(uow, group.agent_id)
        uow.audit(actor, "context.show" if visible else "context.hide", "context_group", group_id,
                  {"items": [i.id for i in changed]})


_MISSING = {"group": "There is no turn group with id {id}.", "item": "There is no context item with id {id}."}
_STALE = {"group": "Turn group {id} changed since you loaded it (revision {now}, you had {had}); reload and try again.",
          "item": "Context item {id} changed since you loaded it (revision {now}, you had {had}); reload and try "
                  "again."}
_REFUSED = {("group", "covered"): "This turn group is covered by a compaction; undo the compaction first.",
            ("group", "locked"): "This turn group holds a locked item; unlock it before hiding the group.",
            ("item", "covered"): "Context item {id} is covered by a compaction; undo the compaction first.",
            ("item", "locked"): "Context item {id} is locked; unlock it before editing."}
"""The sentences a refused context edit gets, the same from the SQLite path and the server's functions."""


def _context_outcome(uow: UnitOfWork, kind: str, entity_id: str, expected: int, found: Any) -> None:
    """What a context function answered: adopted, or the SQLite path's typed error."""
    if found.outcome == "not found":
        raise NotFound(_MISSING[kind].format(id=entity_id))
    if found.outcome == "stale":
        raise StaleRevision(_STALE[kind].format(id=entity_id, now=found.revision, had=expected))
    if found.outcome != "ok":
        raise Conflict(_REFUSED[kind, found.outcome].format(id=entity_id))
    adopt_server_changes(uow, found.changes)


def _guard_item_revision(item: sc.ContextItemRow, expected_revision: int) -> None:
    if item.revision != expected_revision:
        raise StaleRevision(_STALE["item"].format(id=item.id, now=item.revision, had=expected_revision))


def _guard_not_covered(item: sc.ContextItemRow) -> None:
    """A covered item stays frozen while its compaction lives, so undo restores exactly what was covered."""
    if item.compaction_id:
        raise Conflict(_REFUSED["item", "covered"].format(id=item.id))


def _touch_group(uow: UnitOfWork, group_id: str) -> None:
    group = uow.session.get(sc.ContextGroupRow, group_id)
    assert group is not None
    group.revision += 1
    uow.record("context_group", "update", group_id, {"agent": group.agent_id}, group.revision)


def set_item_locked(store: Store, item_id: str, locked: bool, expected_revision: int, actor: str) -> None:
    actor = check_name("actor name", actor)
    require(store.login, "operator", "locking context")  # one sentence before anything waits (PostgreSQL)
    with UnitOfWork(store) as uow:
        if on_server(uow):
            _context_outcome(uow, "item", item_id, expected_revision, uow.session.execute(SERVER_LOCK, {
                "id": item_id, "locked": locked, "expected": expected_revision, "actor": actor,
                "origin": store.origin}).one())
            return
        item = _item(uow, item_id)
        _guard_item_revision(item, expected_revision)
        _guard_not_covered(item)
        item.locked = locked
        _bump_item(uow, item)
        _touch_group(uow, item.group_id)
        _bump_context(uow, item.agent_id)
        uow.audit(actor, "context.lock" if locked else "context.unlock", "context_item", item_id, {})


def edit_item(store: Store, item_id: str, content: str, expected_revision: int, actor: str) -> None:
    actor = check_name("actor name", actor)
    check_text("item content", content)
    require(store.login, "operator", "editing context")  # one sentence before anything waits (PostgreSQL)
    with UnitOfWork(store) as uow:
        if on_server(uow):
            _context_outcome(uow, "item", item_id, expected_revision, uow.session.execute(SERVER_EDIT, {
                "id": item_id, "content": content, "expected": expected_revision, "actor": actor,
                "origin": store.origin}).one())
            return
        item = _item(uow, item_id)
        _guard_item_revision(item, expected_revision)
        if item.locked:
            raise Conflict(_REFUSED["item", "locked"].format(id=item_id))
        _guard_not_covered(item)
        before = item.content
        _bump_item(uow, item, content)
        _touch_group(uow, item.group_id)
        _bump_context(uow, item.agent_id)
        uow.audit(actor, "context.edit", "context_item", item_id,
                  {"before_revision": expected_revision, "before_tokens": estimate_tokens(before),
                   "after_tokens": item.token_estimate, "after_hash": text_hash(content)})


def compact(store: Store, agent_id: str, item_ids: Sequence[str], summary: str, focus: str,
            expected_context_revision: int, actor: str) -> str:
    """Replace a run of consecutive visible, unlocked items by one summary item."""
    actor = check_name("actor name", actor)
    summary = check_text("summary", summary.strip())
    if not summary:
        raise InvalidInput("A summary is required.")
    focus = check_text("focus", (focus or "").strip())
    if not item_ids:
        raise InvalidInput("Choose at least one item to compact.")
    Item = sc.ContextItemRow
    require(store.login, "operator", "compacting context")  # one sentence before anything waits (PostgreSQL)
    with UnitOfWork(store) as uow:
        if on_server(uow):
            comp_id = new_id("cmp")
            found = uow.session.execute(SERVER_COMPACT, {
                "agent": agent_id, "items": list(item_ids), "summary": summary, "focus": focus,
                "expected": expected_context_revision, "actor": actor, "comp": comp_id, "grp": new_id("grp"),
                "item": new_id("itm"), "origin": store.origin}).one()
            if found.outcome == "not found":
                raise NotFound(f"There is no agent with id {agent_id}.")
            if found.outcome == "stale":
                raise StaleRevision(f"The context of agent {agent_id} changed since you loaded it (revision "
                                    f"{found.revision}, you had {expected_context_revision}); reload and try again.")
            if found.outcome != "ok":
                raise (Conflict if found.outcome == "locked" else InvalidInput)(_SELECTION[found.outcome])
            adopt_server_changes(uow, found.changes)
            return comp_id
        agent = uow.session.get(sc.AgentRow, agent_id)
        if agent is None:
            raise NotFound(f"There is no agent with id {agent_id}.")
        if agent.context_revision != expected_context_revision:
            raise StaleRevision(f"The context of {agent.name} changed since you loaded it (revision "
                                f"{agent.context_revision}, you had {expected_context_revision}); "
                                "reload and try again.")
        listed = uow.session.execute(
            select(Item).where(Item.agent_id == agent_id, Item.removed.is_(False),
                               Item.compaction_id.is_(None))
            .order_by(Item.position, Item.summary_of.is_(None), Item.created_at)).scalars().all()
        covered = _consecutive_selection(listed, set(item_ids))
        comp_id = new_id("cmp")
        group = sc.ContextGroupRow(id=new_id("grp"), agent_id=agent_id, kind="compaction", revision=1,
                                   ordinal=_group_ordinal(uow, covered[0]), created_at=uow.now)
        summary_item = sc.ContextItemRow(
            id=new_id("itm"), agent_id=agent_id, group_id=group.id, position=covered[0].position,
            kind="compaction", role="system", content=summary, visible=True, locked=False, revision=1,
            token_estimate=estimate_tokens(summary), summary_of=comp_id, removed=False,
            created_at=uow.now)
        uow.session.add_all([group, summary_item])
        uow.session.flush()
        uow.session.add(sc.ContextItemRevisionRow(
            item_id=summary_item.id, revision=1, content=summary, token_estimate=summary_item.token_estimate,
            created_at=uow.now))
        uow.session.add(sc.CompactionRow(
            id=comp_id, agent_id=agent_id, summary_item_id=summary_item.id,
            covered_item_ids=json.dumps([i.id for i in covered]), focus=focus,
            source_revision=expected_context_revision, created_at=uow.now, created_by=actor))
        for item in covered:
            item.compaction_id = comp_id
            uow.record("context_item", "update", item.id, {"agent": agent_id, "group": item.group_id},
                       item.revision)
        uow.record("context_item", "insert", summary_item.id, {"agent": agent_id, "group": group.id}, 1)
        uow.record("compaction", "insert", comp_id, {"agent": agent_id}, 1)
        _bump_context(uow, agent_id)
        uow.audit(actor, "context.compact", "compaction", comp_id, {
            "covered": [i.id for i in covered], "focus": focus,
            "source_revision": expected_context_revision,
            "tokens_before": sum(i.token_estimate for i in covered),
            "tokens_after": summary_item.token_estimate})
        return comp_id


def _group_ordinal(uow: UnitOfWork, first: sc.ContextItemRow) -> int:
    group = uow.session.get(sc.ContextGroupRow, first.group_id)
    return group.ordinal if group else 0


def _consecutive_selection(listed: Sequence[sc.ContextItemRow],
                           wanted: set[str]) -> list[sc.ContextItemRow]:
    positions = [n for n, item in enumerate(listed) if item.id in wanted]
    if len(positions) != len(wanted):
        raise InvalidInput(_SELECTION["not listed"])
    if positions != list(range(positions[0], positions[0] + len(positions))):
        raise InvalidInput(_SELECTION["not consecutive"])
    chosen = [listed[n] for n in positions]
    if any(not i.visible for i in chosen):
        raise InvalidInput(_SELECTION["hidden"])
    if any(i.locked for i in chosen):
        raise Conflict(_SELECTION["locked"])
    return chosen


_SELECTION = {"not listed": "Some chosen items are not in this agent's current context; reload and try again.",
              "not consecutive": "Only consecutive items can be compacted together.",
              "hidden": "Hidden items cannot be compacted; show them first or leave them out.",
              "locked": "Locked items cannot be compacted; unlock them or leave them out.",
              "nothing chosen": "Choose at least one item to compact."}
"""Why a selection cannot be compacted: the same sentences from the SQLite path and `agentdesk_compact`."""


def undo_compaction(store: Store, compaction_id: str, actor: str) -> None:
    """Bring back exactly the items a compaction covered and retire its summary."""
    actor = check_name("actor name", actor)
    C, Item = sc.CompactionRow, sc.ContextItemRow
    require(store.login, "operator", "undoing a compaction")  # one sentence before anything waits (PostgreSQL)
    with UnitOfWork(store) as uow:
        if on_server(uow):
            found = uow.session.execute(SERVER_UNCOMPACT, {"id": compaction_id, "actor": actor,
                                                           "origin": store.origin}).one()
            if found.outcome == "not found":
                raise NotFound(f"There is no compaction with id {compaction_id}.")
            if found.outcome == "summary covered":
                raise Conflict("This compaction's summary is itself compacted; undo the later compaction first.")
            if found.outcome != "ok":
                raise Conflict(f"Compaction {compaction_id} was already undone.")
            adopt_server_changes(uow, found.changes)
            return
        comp = uow.session.get(C, compaction_id)
        if comp is None:
            raise NotFound(f"There is no compaction with id {compaction_id}.")
        summary = uow.session.get(Item, comp.summary_item_id)
        if summary is not None and summary.compaction_id:
            raise Conflict("This compaction's summary is itself compacted; undo the later compaction first.")
        won = affected(uow.session.execute(
            update(C).where(C.id == compaction_id, C.undone_at.is_(None)).values(undone_at=uow.now)
            .execution_options(synchronize_session=False)))
        if won != 1:
            raise Conflict(f"Compaction {compaction_id} was already undone.")
        covered = uow.session.execute(select(Item).where(Item.compaction_id == compaction_id)).scalars().all()
        for item in covered:
            item.compaction_id = None
            uow.record("context_item", "update", item.id, {"agent": comp.agent_id, "group": item.group_id},
                       item.revision)
        if summary is not None:
            summary.removed = True
            uow.record("context_item", "delete", summary.id,
                       {"agent": comp.agent_id, "group": summary.group_id})
        uow.record("compaction", "update", compaction_id, {"agent": comp.agent_id})
        _bump_context(uow, comp.agent_id)
        uow.audit(actor, "context.uncompact", "compaction", compaction_id,
                  {"restored": [i.id for i in covered]})
