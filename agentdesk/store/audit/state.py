"""Does the current state agree with what the audit log says happened?

A chain that holds proves only that the log was not rewritten; someone who can
write the store can still change the tables it describes. So after the chain
verifies, the log is replayed into what each row must look like now, and the
tables are compared with that, in a stable order, stopping at the first row that
disagrees:

- an approval: its request fixes tool, arguments, payload hash and (from this
  version on) its creation facts (tool call, run, agent, span, created and
  expiry times); its *first* decision fixes status, decided-by, the deciding
  rule, the reason, the edited arguments and their hash, and the approved
  arguments hash. An approval is requested once and closed once: a second request
  record, or a second decision record for an approval already closed, is itself
  tampering (the first decision wins: a row deleted and written back "approved"
  with freshly appended records is named, not replayed);
- a tool call: each belongs to the approval that requested it, with its tool,
  arguments and run, and a status no other than its approval's;
- a rule (`approval_rules`): its create/update records fix effect, tool,
  matcher, scope, expiry, note, enabled, revision and author; a rule row with no
  record, or removed in the log, is named (hit counts are not audited);
- a context item: the revision and content hash an operator's edit recorded,
  the lock state the last lock/unlock left, and every item's content must equal
  its current revision's.

`approval_record_disagrees` is the same comparison for one approval, used by the
runtime before an agent acts on a decision (store/audit/guard.py).

Not covered (said in docs/audit.md): what the runtime writes without an audit
record (context items it appends, spans, runs' usage), and rules' hit counts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from agentdesk.store.persistence import schema as sc

DECISIONS = {"approval.approved": "approved", "approval.denied": "denied", "approval.expired": "expired",
             "approval.withdrawn": "withdrawn"}
"""Audit actions that close an approval, and the status each leaves (withdrawn: `commands.withdraw`)."""
REQUEST_FACTS = ("tool_call_id", "run_id", "agent_id", "span_id", "created_at", "expires_at")
"""Columns an approval's request record binds, when the record names them (`expires_at` always did)."""
RULE_FIELDS = ("effect", "tool", "matcher", "project_id", "agent_id", "session_id", "expires_at", "note",
               "enabled")
"""The columns of a rule its audit records hold (`rules.commands._snapshot`)."""
RULE_ACTIONS = ("rule.create", "rule.update", "rule.remove")
CLOSED_CALL_STATUSES = frozenset({"pending", "approved", "denied", "expired", "withdrawn"})
"""Tool-call statuses that state a decision: a tool call may only state its approval's (or pending, expired)."""
BATCH = 2000


def text_hash(text: str) -> str:
    """sha256 of text as stored (UTF-8), the form `store.text.arguments.arguments_hash` uses."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Disagreement:
    row: str
    """"approval apr_…", "rule rul_…", "tool call tcl_…" or "context item itm_…"."""
    sentence: str


@dataclass
class _Approval:
    approval_id: str
    request_seq: int | None = None
    tool: str | None = None
    arguments: str | None = None
    arguments_hash: str | None = None
    payload_hash: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"
    status_seq: int | None = None
    decided_by: str | None = None
    approved_hash: str | None = None
    checks_approved_hash: bool = False
    rule_id: str | None = None
    reason: str | None = None
    edited_arguments: str | None = None
    edited_hash: str | None = None
    checks_edited_hash: bool = False
    conflict: tuple[int, str] | None = None
    """(seq, sentence): the first record that contradicts the approval's history (a second request/decision)."""

    def take(self, seq: int, actor: str, action: str, payload: dict[str, Any]) -> None:
        """Replay one audit record of this approval, in seq order."""
        if self.conflict is not None:
            return
        if action == "approval.request":
            if self.request_seq is not None or self.status_seq is not None:
                first = self.request_seq or self.status_seq
                self.conflict = (seq, f"Approval {self.approval_id} has a second request in the audit log (record "
                                      f"{seq}) after record {first}: an approval is requested once, so the row was "
                                      "deleted and written again, and records appended to match.")
                return
            args = payload.get("arguments")
            self.request_seq, self.tool, self.payload_hash = seq, payload.get("tool"), payload.get("payload_hash")
            self.arguments = args if isinstance(args, str) else None
            self.arguments_hash = text_hash(args) if isinstance(args, str) else None
            self.facts = {key: payload[key] for key in REQUEST_FACTS if key in payload}
        elif action in DECISIONS:
            if self.status_seq is not None:
                by = "" if self.decided_by is None else f" by {_shown(self.decided_by)}"
                self.conflict = (seq, f"Approval {self.approval_id} was decided twice in the audit log: record "
                                      f"{self.status_seq} closed it as {self.status}{by}, and record {seq} says "
                                      f"{DECISIONS[action]} by {_shown(actor)}. The first decision stands; a later "
                                      "contradicting record is tampering.")
                return
            self.status, self.status_seq = DECISIONS[action], seq
            if action != "approval.expired":
                self.decided_by = actor
            if "shown_arguments_hash" in payload:
                self.checks_approved_hash = True
                self.approved_hash = payload.get("shown_arguments_hash")
            rule_id, reason = payload.get("rule_id"), payload.get("reason")
            self.rule_id = rule_id if isinstance(rule_id, str) else None
            self.reason = reason if isinstance(reason, str) else None
            edited = payload.get("edited_arguments")
            self.edited_arguments = edited if isinstance(edited, str) else None
            if "edited_hash" in payload:
                self.checks_edited_hash = True
                found = payload.get("edited_hash")
                self.edited_hash = found if isinstance(found, str) else None


@dataclass
class RuleRecord:
    seq: int
    snapshot: dict[str, Any]
    revision: int | None
    created_by: str | None
    removed: bool = False
    conflict: tuple[int, str] | None = None


@dataclass
class _Item:
    edits: list[tuple[int, int, str | None]] = field(default_factory=list)
    """(seq, revision after the edit, content hash after the edit or None for older records)."""
    locked: bool | None = None
    lock_seq: int | None = None


@dataclass
class _Expected:
    approvals: dict[str, _Approval] = field(default_factory=dict)
    rules: dict[str, RuleRecord] = field(default_factory=dict)
    items: dict[str, _Item] = field(default_factory=dict)


def check_state(session: Session) -> Disagreement | None:
    """The first approval, rule, tool call or context item whose row disagrees with the audit log, or None."""
    expected = _replay(session)
    return (_check_approvals(session, expected) or _check_tool_calls(session, expected)
            or _check_rules(session, expected) or _check_items(session, expected))


def _audit_rows(session: Session) -> Iterator[Any]:
    A = sc.AuditRow
    query = select(A.seq, A.actor, A.action, A.entity_id, A.payload).where(
        A.entity.in_(("approval", "context_item", "rule")))
    last = 0
    while True:
        rows = session.execute(query.where(A.seq > last).order_by(A.seq).limit(BATCH)).all()
        if not rows:
            return
        yield from rows
        last = int(rows[-1].seq)


def payload_of(text: object) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _replay(session: Session) -> _Expected:
    expected = _Expected()
    for row in _audit_rows(session):
        payload, seq = payload_of(row.payload), int(row.seq)
        if row.action == "approval.request" or row.action in DECISIONS:
            approval = expected.approvals.get(row.entity_id)
            if approval is None:
                approval = expected.approvals[row.entity_id] = _Approval(str(row.entity_id))
            approval.take(seq, row.actor, row.action, payload)
        elif row.action in RULE_ACTIONS:
            take_rule_record(expected.rules, seq, row.actor, row.action, str(row.entity_id), payload)
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


def take_rule_record(rules: dict[str, RuleRecord], seq: int, actor: str, action: str, rule_id: str,
               payload: dict[str, Any]) -> None:
    known = rules.get(rule_id)
    if known is not None and known.conflict is not None:
        return
    if action == "rule.create":
        if known is not None and not known.removed:
            known.conflict = (seq, f"Rule {rule_id} is created a second time in the audit log (record {seq}, "
                                   f"after record {known.seq}): a rule id is made once.")
            return
        rules[rule_id] = RuleRecord(seq, payload, 1, actor)
    elif action == "rule.update":
        after, revision = payload.get("after"), payload.get("revision")
        if known is None or known.removed:
            rules[rule_id] = RuleRecord(seq, {}, None, None, conflict=(seq, (
                f"Rule {rule_id} is updated in the audit log (record {seq}) but no record creates it.")))
            return
        known.seq, known.snapshot = seq, after if isinstance(after, dict) else {}
        known.revision = revision if type(revision) is int else None
    elif known is not None:
        known.seq, known.removed = seq, True
    else:
        rules[rule_id] = RuleRecord(seq, {}, None, None, removed=True)


def approval_record_disagrees(row: Any, records: Iterable[tuple[int, str, str, str]]) -> Disagreement | None:
    """One approval row against its audit records ((seq, actor, action, payload text), in seq order)."""
    want = _Approval(str(row.id))
    for seq, actor, action, payload in records:
        want.take(seq, actor, action, payload_of(payload))
    if want.conflict is not None:
        return Disagreement(f"approval {row.id}", want.conflict[1])
    return _approval_disagrees(row, want)


APPROVAL_COLUMNS = tuple(getattr(sc.ApprovalRow, name) for name in (
    "id", "tool_name", "arguments", "payload_hash", "status", "decided_by", "approved_hash", "decided_by_rule",
    "reason", "edited_arguments", "edited_hash", *REQUEST_FACTS))
"""What the state check reads of an approval row (the runtime's guard reads the same)."""


def _check_approvals(session: Session, expected: _Expected) -> Disagreement | None:
    conflicts = sorted((a.conflict[0], a.approval_id, a.conflict[1]) for a in expected.approvals.values()
                       if a.conflict is not None)
    if conflicts:
        _, approval_id, sentence = conflicts[0]
        return Disagreement(f"approval {approval_id}", sentence)
    A = sc.ApprovalRow
    query = select(*APPROVAL_COLUMNS)
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
    for key, value in want.facts.items():
        if getattr(row, key, None) != value:
            return Disagreement(name, f"Approval {row.id}'s {key} was changed in the table: it is "
                                      f"{_shown(getattr(row, key, None))}, but its request (record "
                                      f"{want.request_seq}) says {_shown(value)}.")
    where = f"record {want.status_seq}" if want.status_seq else f"its request, record {want.request_seq}"
    if row.status != want.status:
        return Disagreement(name, f"Approval {row.id} is {_shown(row.status)} in the table but "
                                  f"{want.status} in the audit log ({where}): its status was changed directly.")
    if row.decided_by != want.decided_by:  # pending and expired: nobody (expiry records its actor, not a decider)
        return Disagreement(name, f"Approval {row.id} says it was decided by {_shown(row.decided_by)}, but the "
                                  f"audit log ({where}) says by {_shown(want.decided_by)}.")
    if want.checks_approved_hash and row.approved_hash != want.approved_hash:
        return Disagreement(name, f"Approval {row.id}'s approved arguments hash was changed in the table: it "
                                  f"differs from the one its decision ({where}) recorded.")
    if row.decided_by_rule != want.rule_id:
        return Disagreement(name, f"Approval {row.id}'s deciding rule was changed in the table: it says "
                                  f"{_shown(row.decided_by_rule)}, the audit log ({where}) says "
                                  f"{_shown(want.rule_id)}.")
    if row.reason != want.reason:
        return Disagreement(name, f"Approval {row.id}'s reason was changed in the table: it says "
                                  f"{_shown(row.reason)}, the audit log ({where}) says {_shown(want.reason)}.")
    if row.edited_arguments != want.edited_arguments:
        return Disagreement(name, f"Approval {row.id}'s edited arguments were changed in the table: they are "
                                  f"{_shown(row.edited_arguments)}, but its decision ({where}) recorded "
                                  f"{_shown(want.edited_arguments)}; the agent would run arguments nobody "
                                  "approved.")
    if (want.checks_edited_hash or row.edited_hash is not None) and row.edited_hash != want.edited_hash:
        return Disagreement(name, f"Approval {row.id}'s edited arguments hash was changed in the table: it "
                                  f"differs from the one its decision ({where}) recorded.")
    return None


def _check_tool_calls(session: Session, expected: _Expected) -> Disagreement | None:
    """Each tool call belongs to one audited approval: same tool, arguments and run; no other decision."""
    T, A = sc.ToolCallRow, sc.ApprovalRow
    query = (select(T.id, T.run_id, T.tool_name, T.arguments, T.status, A.id.label("approval_id"),
                    A.run_id.label("approval_run"))
             .outerjoin(A, A.tool_call_id == T.id))
    last: str | None = None
    while True:
        page = query.order_by(T.id, A.id).limit(BATCH)
        rows = session.execute(page if last is None else page.where(T.id > last)).all()
        if not rows:
            return None
        for row in rows:
            found = _tool_call_disagrees(row, expected.approvals.get(row.approval_id) if row.approval_id else None)
            if found is not None:
                return found
        last = rows[-1].id


def _tool_call_disagrees(row: Any, want: _Approval | None) -> Disagreement | None:
    name = f"tool call {row.id}"
    if row.approval_id is None or want is None:
        return Disagreement(name, f"Tool call {row.id} belongs to no approval the audit log records: it was "
                                  "written into the table directly.")
    source = f"the request of approval {row.approval_id} (record {want.request_seq})"
    if want.tool is not None and row.tool_name != want.tool:
        return Disagreement(name, f"Tool call {row.id}'s tool was changed in the table: it is "
                                  f"{_shown(row.tool_name)}, {source} says {_shown(want.tool)}.")
    if want.arguments_hash is not None and (not isinstance(row.arguments, str)
                                            or text_hash(row.arguments) != want.arguments_hash):
        return Disagreement(name, f"Tool call {row.id}'s arguments were changed in the table: they are not the "
                                  f"arguments {source} holds.")
    if row.run_id != row.approval_run:
        return Disagreement(name, f"Tool call {row.id}'s run was changed in the table: it is "
                                  f"{_shown(row.run_id)}, its approval {row.approval_id} is in run "
                                  f"{_shown(row.approval_run)}.")
    allowed = {want.status} | ({"pending"} if want.status == "expired" else set())
    if (row.status in CLOSED_CALL_STATUSES and row.status not in allowed) or (
            row.status not in CLOSED_CALL_STATUSES and want.status != "approved"):
        return Disagreement(name, f"Tool call {row.id} says {_shown(row.status)}, but its approval "
                                  f"{row.approval_id} is {want.status} in the audit log: its status was changed "
                                  "directly.")
    return None


def _check_rules(session: Session, expected: _Expected) -> Disagreement | None:
    """Every rule row as its last create/update record left it; none without a record, none removed."""
    conflicts = sorted((r.conflict[0], rid, r.conflict[1]) for rid, r in expected.rules.items()
                       if r.conflict is not None)
    if conflicts:
        _, rule_id, sentence = conflicts[0]
        return Disagreement(f"rule {rule_id}", sentence)
    R = sc.RuleRow
    rows = session.execute(select(R.id, R.effect, R.tool, R.matcher, R.project_id, R.agent_id, R.session_id,
                                  R.expires_at, R.note, R.enabled, R.revision, R.created_by)
                           .order_by(R.id)).all()
    seen: set[str] = set()
    for row in rows:
        seen.add(str(row.id))
        found = rule_disagrees(row, expected.rules.get(str(row.id)))
        if found is not None:
            return found
    for rule_id in sorted(set(expected.rules) - seen):
        want = expected.rules[rule_id]
        if not want.removed:
            return Disagreement(f"rule {rule_id}", (
                f"Rule {rule_id} was deleted from the table: the audit log (record {want.seq}) says it exists, "
                "and rules are removed only with a record."))
    return None


def rule_disagrees(row: Any, want: RuleRecord | None) -> Disagreement | None:
    """One rule row against what its audit records say (None: they agree)."""
    name = f"rule {row.id}"
    if want is None:
        return Disagreement(name, f"Rule {row.id} has no record in the audit log: it was written into the "
                                  "table directly, and no rule decides without one.")
    if want.conflict is not None:
        return Disagreement(name, want.conflict[1])
    if want.removed:
        return Disagreement(name, f"Rule {row.id} was removed (record {want.seq}) but is in the table again: "
                                  "it was written back directly.")
    for column in RULE_FIELDS:
        value, recorded = getattr(row, column), want.snapshot.get(column)
        if not _rule_field_equal(column, value, recorded):
            return Disagreement(name, f"Rule {row.id}'s {column} was changed in the table: it is "
                                      f"{_shown(value)}, but the audit log (record {want.seq}) says "
                                      f"{_shown(_plain(column, recorded))}.")
    if want.revision is not None and row.revision != want.revision:
        return Disagreement(name, f"Rule {row.id}'s revision was changed in the table: it is "
                                  f"{_shown(row.revision)}, the audit log (record {want.seq}) says {want.revision}.")
    if want.created_by is not None and row.created_by != want.created_by:
        return Disagreement(name, f"Rule {row.id}'s author was changed in the table: it says "
                                  f"{_shown(row.created_by)}, the audit log says {_shown(want.created_by)}.")
    return None


def _rule_field_equal(column: str, value: Any, recorded: Any) -> bool:
    if column == "matcher":
        if not isinstance(value, str):
            return False
        try:
            return _canonical(json.loads(value)) == _canonical(recorded)
        except ValueError:
            return False
    if column == "enabled":
        return isinstance(value, bool | int) and bool(value) is bool(recorded) and isinstance(recorded, bool)
    if column == "expires_at":
        return (value is None and recorded is None) or (
            isinstance(value, int | float) and isinstance(recorded, int | float) and float(value) == float(recorded))
    return bool(value == recorded)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(column: str, value: Any) -> Any:
    return _canonical(value) if column == "matcher" else value


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
