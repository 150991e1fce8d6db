"""Does the current state agree with what the audit log says happened?

A chain that holds proves only that the log was not rewritten; someone who can
write the store can still change the tables it describes. So after the chain
verifies, the log is replayed into what each approval must look like now (its
request fixes tool, arguments and payload hash; its decision fixes status,
decided-by and the approved arguments hash) and what each operator-edited
context item must hold (the revision and content hash the edit recorded, the lock
state the last lock/unlock left), and the tables are compared with that, in a
stable order, stopping at the first row that disagrees.

Not covered (said in docs/audit.md): what the runtime writes without an audit
record (context items it appends, spans, runs' usage).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from agentdesk.store.persistence import schema as sc

DECISIONS = {"approval.approved": "approved", "approval.denied": "denied", "approval.expired": "expired",
             "approval.withdrawn": "withdrawn"}
"""Audit actions that close an approval, and the status each leaves (withdrawn: `commands.withdraw`)."""
BATCH = 2000


def text_hash(text: str) -> str:
    """sha256 of text as stored (UTF-8), the form `store.text.arguments.arguments_hash` uses."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Disagreement:
    row: str
    """"approval apr_…" or "context item itm_…"."""
    sentence: str


@dataclass
class _Approval:
    request_seq: int | None = None
    tool: str | None = None
    arguments_hash: str | None = None
    payload_hash: str | None = None
    status: str = "pending"
    status_seq: int | None = None
    decided_by: str | None = None
    approved_hash: str | None = None
    checks_approved_hash: bool = False


@dataclass
class _Item:
    edits: list[tuple[int, int, str | None]] = field(default_factory=list)
    """(seq, revision after the edit, content hash after the edit or None for older records)."""
    locked: bool | None = None
    lock_seq: int | None = None


@dataclass
class _Expected:
    approvals: dict[str, _Approval] = field(default_factory=dict)
    items: dict[str, _Item] = field(default_factory=dict)


def check_state(session: Session) -> Disagreement | None:
    """The first approval or context item whose row disagrees with the audit log, or None."""
    expected = _replay(session)
    return _check_approvals(session, expected) or _check_items(session, expected)


def _audit_rows(session: Session) -> Iterator[Any]:
    A = sc.AuditRow
    query = select(A.seq, A.actor, A.action, A.entity_id, A.payload).where(
        A.entity.in_(("approval", "context_item")))
    last = 0
    while True:
        rows = session.execute(query.where(A.seq > last).order_by(A.seq).limit(BATCH)).all()
        if not rows:
            return
        yield from rows
        last = int(rows[-1].seq)


def _payload(text: object) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _replay(session: Session) -> _Expected:
    expected = _Expected()
    for row in _audit_rows(session):
        payload, seq = _payload(row.payload), int(row.seq)
        if row.action == "approval.request":
            args = payload.get("arguments")
            expected.approvals[row.entity_id] = _Approval(
                seq, payload.get("tool"), text_hash(args) if isinstance(args, str) else None,
                payload.get("payload_hash"))
        elif row.action in DECISIONS:
            approval = expected.approvals.setdefault(row.entity_id, _Approval())
            approval.status, approval.status_seq = DECISIONS[row.action], seq
            if row.action != "approval.expired":
                approval.decided_by = row.actor
            if "shown_arguments_hash" in payload:
                approval.checks_approved_hash = True
                approval.approved_hash = payload.get("shown_arguments_hash")
        elif row.action == "context.edit":
            before = payload.get("before_revision")
            if type(before) is int:
                after_hash = payload.get("after_hash")
                expected.items.setdefault(row.entity_id, _Item()).edits.append(
                    (seq, before + 1, after_hash if isinstance(after_hash, str) else None))
        elif row.action in ("context.lock", "context.unlock"):
            item = expected.items.setdefault(row.entity_id, _Item())
            item.locked, item.lock_seq = row.action == "context.lock", seq
    return expected


def _check_approvals(session: Session, expected: _Expected) -> Disagreement | None:
    A = sc.ApprovalRow
    query = select(A.id, A.tool_name, A.arguments, A.payload_hash, A.status, A.decided_by, A.approved_hash)
    seen: set[str] = set()
    last: str | None = None
    while True:
        page = query.order_by(A.id).limit(BATCH)
        rows = session.execute(page if last is None else page.where(A.id > last)).all()
        if not rows:
            break
        for row in rows:
            seen.add(str(row.id))
            found = _approval_disagrees(row, expected.approvals.get(row.id))
            if found is not None:
                return found
        last = rows[-1].id
    missing = sorted(set(expected.approvals) - seen)
    if missing:
        gone = expected.approvals[missing[0]]
        return Disagreement(f"approval {missing[0]}", (
            f"Approval {missing[0]} was deleted from the table: the audit log records it (record "
            f"{gone.request_seq or gone.status_seq}) but the approvals table has no such row."))
    return None


def _approval_disagrees(row: Any, want: _Approval | None) -> Disagreement | None:
    name = f"approval {row.id}"
    if want is None or want.request_seq is None:
        return Disagreement(name, f"Approval {row.id} has no request in the audit log: it was written into "
                                  "the table directly.")
    if not isinstance(row.arguments, str) or (want.arguments_hash is not None
                                              and text_hash(row.arguments) != want.arguments_hash):
        return Disagreement(name, f"Approval {row.id}'s arguments were changed in the table: they are not the "
                                  f"arguments its request (record {want.request_seq}) holds.")
    if want.tool is not None and row.tool_name != want.tool:
        return Disagreement(name, f"Approval {row.id}'s tool was changed in the table: the audit log "
                                  f"(record {want.request_seq}) says another tool.")
    if want.payload_hash is not None and row.payload_hash != want.payload_hash:
        return Disagreement(name, f"Approval {row.id}'s payload hash was changed in the table: it differs "
                                  f"from its request (record {want.request_seq}).")
    where = f"record {want.status_seq}" if want.status_seq else f"its request, record {want.request_seq}"
    if row.status != want.status:
        return Disagreement(name, f"Approval {row.id} is {_shown(row.status)} in the table but "
                                  f"{want.status} in the audit log ({where}): its status was changed directly.")
    if want.status in ("approved", "denied") and row.decided_by != want.decided_by:
        return Disagreement(name, f"Approval {row.id} says it was decided by {_shown(row.decided_by)}, but the "
                                  f"audit log ({where}) says by {_shown(want.decided_by)}.")
    if want.checks_approved_hash and row.approved_hash != want.approved_hash:
        return Disagreement(name, f"Approval {row.id}'s approved arguments hash was changed in the table: it "
                                  f"differs from the one its decision ({where}) recorded.")
    return None


def _shown(value: object) -> str:
    if isinstance(value, str):
        return repr(value[:80])
    if isinstance(value, bytes | bytearray | memoryview):
        return f"binary data ({len(bytes(value)):,} bytes)"
    return "nothing" if value is None else repr(value)


def _check_items(session: Session, expected: _Expected) -> Disagreement | None:
    """Operator-touched items against their audit; every item against its own revision history."""
    Item, Rev = sc.ContextItemRow, sc.ContextItemRevisionRow
    for item_id in sorted(expected.items):
        found = _item_disagrees(session, item_id, expected.items[item_id])
        if found is not None:
            return found
    query = (select(Item.id, Item.revision, Item.content, Rev.content.label("stored"))
             .join(Rev, and_(Rev.item_id == Item.id, Rev.revision == Item.revision)))
    last: str | None = None
    while True:
        page = query.order_by(Item.id).limit(BATCH)
        rows = session.execute(page if last is None else page.where(Item.id > last)).all()
        if not rows:
            return None
        for row in rows:
            if row.content != row.stored:
                return Disagreement(f"context item {row.id}", (
                    f"Context item {row.id}'s content was changed in the table: it is not the content of its "
                    f"revision {row.revision}."))
        last = rows[-1].id


def _item_disagrees(session: Session, item_id: str, want: _Item) -> Disagreement | None:
    Item, Rev = sc.ContextItemRow, sc.ContextItemRevisionRow
    name = f"context item {item_id}"
    row = session.execute(select(Item.revision, Item.locked).where(Item.id == item_id)).first()
    if row is None:
        return Disagreement(name, f"Context item {item_id} was deleted from the table: the audit log records "
                                  "edits of it.")
    for seq, revision, digest in want.edits:
        stored = session.execute(select(Rev.content).where(Rev.item_id == item_id, Rev.revision == revision)
                                 ).scalar()
        if stored is None or not isinstance(row.revision, int) or row.revision < revision:
            return Disagreement(name, f"Context item {item_id} lost revision {revision}: the audit log (record "
                                      f"{seq}) records the edit that made it.")
        if digest is not None and (not isinstance(stored, str) or text_hash(stored) != digest):
            return Disagreement(name, f"Context item {item_id}'s revision {revision} was changed in the table: "
                                      f"its content is not what the edit (record {seq}) recorded.")
    if want.locked is not None and bool(row.locked) != want.locked:
        state = "locked" if want.locked else "unlocked"
        return Disagreement(name, f"Context item {item_id} should be {state} (record {want.lock_seq}) but the "
                                  "table says otherwise: its lock was changed directly.")
    return None
