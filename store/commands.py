"""Operator commands on agentdesk's own schema.

Each is one transaction guarded by compare-and-set (a status or a revision),
appends an audit record and records its changes; a failed guard raises a typed
`Conflict` and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.types import Text

from agentdesk.store import readmodel as rm
from agentdesk.store import schema as sc
from agentdesk.store.audit.state import text_hash
from agentdesk.store.bus import Change
from agentdesk.store.convert import ts_opt
from agentdesk.store.database import Store
from agentdesk.store.errors import AlreadyDecided, Conflict, Expired, InvalidInput, NotFound, StaleRevision
from agentdesk.store.ids import new_id
from agentdesk.store.queries import NativeQueries
from agentdesk.store.text.arguments import arguments_hash, check_expected_hash, guard_arguments
from agentdesk.store.uow import UnitOfWork, affected
from agentdesk.store.validation import (
    canonical_arguments,
    check_name,
    check_text,
    estimate_tokens,
    parse_json_arguments,
    payload_hash,
)

SERVER_DECIDE = text("SELECT * FROM agentdesk_decide(:id, :approve, :actor, :reason, :edited, :expected, :origin)")
SERVER_WITHDRAW = text("SELECT * FROM agentdesk_withdraw(:id, :actor, :reason, :origin)")
SERVER_EXPIRE = text("SELECT * FROM agentdesk_expire_overdue(:actor, :origin)")
SERVER_VISIBILITY = text("SELECT * FROM agentdesk_set_group_visibility(:id, :visible, :expected, :actor, :origin)")
SERVER_LOCK = text("SELECT * FROM agentdesk_set_item_locked(:id, :locked, :expected, :actor, :origin)")
SERVER_EDIT = text("SELECT * FROM agentdesk_edit_item(:id, :content, :expected, :actor, :origin)")
SERVER_COMPACT = text("SELECT * FROM agentdesk_compact(:agent, :items, :summary, :focus, :expected, :actor, :comp, "
                      ":grp, :item, :origin)").bindparams(bindparam("items", type_=ARRAY(Text)))
SERVER_UNCOMPACT = text("SELECT * FROM agentdesk_undo_compaction(:id, :actor, :origin)")
"""On PostgreSQL (migration 0008) approvals and context edits go only through these SECURITY DEFINER functions: the
server does the compare-and-set, the hashes, the audit and the change log, so a hand-written client gets
exactly what agentdesk does or nothing. The checks of the caller's input stay here, shared by both
backends; the SQLite path below does the same work in Python."""


def on_server(uow: UnitOfWork) -> bool:
    """True when the store's own functions do the write (PostgreSQL)."""
    return uow.store.is_postgres


def adopt_server_changes(uow: UnitOfWork, changes: Any) -> None:
    """The change-log rows a server function wrote (a JSON array), published by the unit of work."""
    uow.adopt([Change(c["entity"], c["op"], c["id"], dict(c["parents"] or {}), c["revision"], c["seq"],
                      c["origin"], c["at"]) for c in (changes or [])])


def approval_parents(row: sc.ApprovalRow) -> dict[str, str]:
    return {"project": row.project_id, "task": row.task_id, "session": row.session_id,
            "agent": row.agent_id, "run": row.run_id}


def decide(store: Store, approval_id: str, approve: bool, actor: str, reason: str | None = None,
           edited_arguments: str | None = None, *, expected_arguments_hash: str | None = None) -> rm.Approval:
    """Approve or deny a pending, unexpired approval, exactly once even across processes.

    `expected_arguments_hash` is the hash of the arguments the operator was shown: when the stored
    arguments no longer hash to it, the decision is refused as stale. The hash of what was stored
    is recorded with the decision (`approved_hash`, and in the audit record).
    """
    actor = check_name("actor name", actor)
    expected = check_expected_hash(expected_arguments_hash)
    reason = check_name("reason", reason, required=not approve) or None
    edited = edited_hash = None
    if edited_arguments is not None:
        if not approve:
            raise InvalidInput("Arguments can only be edited when approving.")
        edited = canonical_arguments(parse_json_arguments(edited_arguments))
    A = sc.ApprovalRow
    status = "approved" if approve else "denied"
    if store.is_postgres:
        with UnitOfWork(store) as uow:
            found = uow.session.execute(SERVER_DECIDE, {
                "id": approval_id, "approve": approve, "actor": actor, "reason": reason, "edited": edited,
                "expected": expected, "origin": store.origin}).one()
            _server_outcome(uow, approval_id, found, expected)
        return NativeQueries(store).approval(approval_id)
    with UnitOfWork(store) as uow:
        row = uow.session.get(A, approval_id)
        if row is None:
            raise NotFound(f"There is no approval with id {approval_id}.")
        if edited is not None:
            edited_hash = payload_hash(row.tool_name, edited)
        shown_hash = arguments_hash(row.arguments)
        guard_arguments(approval_id, shown_hash, expected)
        won = affected(uow.session.execute(
            update(A).where(A.id == approval_id, A.status == "pending",
                            (A.expires_at.is_(None)) | (A.expires_at > uow.now))
            .values(status=status, decided_at=uow.now, decided_by=actor, reason=reason,
                    edited_arguments=edited, edited_hash=edited_hash, approved_hash=shown_hash,
                    revision=A.revision + 1)
            .execution_options(synchronize_session=False)))
        if won != 1:
            _explain_lost_decision(uow, approval_id)
        if row.tool_call_id:
            uow.session.execute(update(sc.ToolCallRow).where(sc.ToolCallRow.id == row.tool_call_id)
                                .values(status=status))
        uow.audit(actor, f"approval.{status}", "approval", approval_id, {
            "reason": reason, "tool": row.tool_name, "original_arguments": row.arguments,
            "payload_hash": row.payload_hash, "edited_arguments": edited, "edited_hash": edited_hash,
            "shown_arguments_hash": shown_hash})
        uow.record("approval", "update", approval_id, approval_parents(row), row.revision + 1)
    return NativeQueries(store).approval(approval_id)


def withdraw(store: Store, approval_id: str, actor: str, reason: str | None = None) -> rm.Approval:
    """The requesting agent takes back its pending approval (it stopped waiting): exactly once.

    Compare-and-set on status `pending` (a deadline already passed does not matter:
    nobody can decide it any more); a decision or expiry that came first wins and raises
    `AlreadyDecided` / `Expired`. Audited as `approval.withdrawn`, change-logged so the
    queue drops the row.
    """
    actor = check_name("actor name", actor)
    reason = check_name("reason", reason, required=False) or None
    A = sc.ApprovalRow
    if store.is_postgres:
        with UnitOfWork(store) as uow:
            found = uow.session.execute(SERVER_WITHDRAW, {"id": approval_id, "actor": actor, "reason": reason,
                                                          "origin": store.origin}).one()
            _server_outcome(uow, approval_id, found, None)
        return NativeQueries(store).approval(approval_id)
    with UnitOfWork(store) as uow:
        row = uow.session.get(A, approval_id)
        if row is None:
            raise NotFound(f"There is no approval with id {approval_id}.")
        won = affected(uow.session.execute(
            update(A).where(A.id == approval_id, A.status == "pending")
            .values(status="withdrawn", decided_at=uow.now, decided_by=actor, reason=reason,
                    revision=A.revision + 1)
            .execution_options(synchronize_session=False)))
        if won != 1:
            _explain_lost_decision(uow, approval_id)
        if row.tool_call_id:
            uow.session.execute(update(sc.ToolCallRow).where(sc.ToolCallRow.id == row.tool_call_id)
                                .values(status="withdrawn"))
        uow.audit(actor, "approval.withdrawn", "approval", approval_id, {
            "reason": reason, "tool": row.tool_name, "payload_hash": row.payload_hash})
        uow.record("approval", "update", approval_id, approval_parents(row), row.revision + 1)
    return NativeQueries(store).approval(approval_id)


def _server_outcome(uow: UnitOfWork, approval_id: str, found: Any, expected: str | None) -> None:
    """What a decision function answered: the write is adopted, or the same typed error as on SQLite."""
    if found.outcome == "not found":
        raise NotFound(f"There is no approval with id {approval_id}.")
    if found.outcome == "stale":
        guard_arguments(approval_id, found.shown_hash, expected)
    if found.outcome != "ok":
        _lost(approval_id, found.status, found.expires_at, found.decided_by, found.decided_at)
    adopt_server_changes(uow, found.changes)


def _explain_lost_decision(uow: UnitOfWork, approval_id: str) -> None:
    uow.session.expire_all()
    row = uow.session.get(sc.ApprovalRow, approval_id)
    assert row is not None
    _lost(approval_id, row.status, row.expires_at, row.decided_by, row.decided_at)


def _lost(approval_id: str, status: str, expires_at: float | None, decided_by: str | None,
          decided_at: float | None) -> None:
    """The loser of a decision race is told who won and when (or that the approval expired)."""
    if status == "pending":
        raise Expired(f"Approval {approval_id} expired at {rm_time(expires_at)} before it was decided; "
                      "it can no longer be approved or denied.")
    if status == "expired":
        raise Expired(f"Approval {approval_id} expired at {rm_time(expires_at)}; "
                      "it can no longer be approved or denied.")
    raise AlreadyDecided(approval_id, status, decided_by, rm_time(decided_at))


def rm_time(value: float | None) -> str | None:
    moment = ts_opt(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else None


def expire_overdue(store: Store, actor: str = "agentdesk") -> list[str]:
    """Mark every pending approval past its deadline as expired; returns their ids."""
    A = sc.ApprovalRow
    with UnitOfWork(store) as uow:
        if on_server(uow):
            found = uow.session.execute(SERVER_EXPIRE, {"actor": actor, "origin": store.origin}).all()
            adopt_server_changes(uow, [c for row in found for c in row.changes])
            return [str(row.approval_id) for row in found]
        rows = uow.session.execute(select(A).where(A.status == "pending", A.expires_at.is_not(None),
                                                   A.expires_at <= uow.now)).scalars().all()
        expired = []
        for row in rows:
            won = affected(uow.session.execute(
                update(A).where(A.id == row.id, A.status == "pending")
                .values(status="expired", decided_at=uow.now, revision=A.revision + 1)
                .execution_options(synchronize_session=False)))
            if won:
                expired.append(row.id)
                uow.audit(actor, "approval.expired", "approval", row.id, {"expires_at": row.expires_at})
                uow.record("approval", "update", row.id, approval_parents(row), row.revision + 1)
    return expired


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
