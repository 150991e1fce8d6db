"""The runtime acts only on rows their audit records vouch for (SQLite: the store file is the only guard).

On SQLite whoever can write the store file can write any row, so before the runtime
acts on a row a person or a rule wrote, it checks that row against the records the
audit log holds for it, each record's hash and HMAC checked with the store's key:

- `rule_refusal`: before a rule decides a new approval (`rules.apply.apply_rules`),
  the rule row must equal what its last create/update record says (effect, tool,
  matcher, scope, expiry, note, enabled, revision, author). A rule that does not is
  ignored: the call goes to a person, a `rule.refused` audit record names the rule
  and why, and a warning is logged (`agentdesk.audit`).
- `decision_refusal`: before an agent gets a decision back (`AgentRuntime.poll_decision`),
  the approval row must agree with its request and its first decision record (status,
  decider, reason, edited arguments and their hash, approved hash); the runtime then
  treats a decision that does not as a denial saying so (the agent never runs
  arguments nobody approved).

The rule records are read once per process and then only the records appended since
(seq is SQLite's rowid: appends are serial), so a rule costs one primary-key lookup per
request; an approval's records are read from its request record on (remembered by the
process that requested it; another process reads them once, by a scan of the log).

On PostgreSQL the database is the guard (grants: no login below admin writes rules,
decisions only through the SECURITY DEFINER functions), so these return None there.
Someone holding the audit key can still forge a matching record: docs/audit.md.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agentdesk.store.audit import chain, keys, state
from agentdesk.store.persistence import schema as sc

log = logging.getLogger("agentdesk.audit")
A = sc.AuditRow
RECORD_COLUMNS = (A.seq, A.at, A.actor, A.action, A.entity, A.entity_id, A.payload, A.prev_hash, A.hash, A.mac)
RULE_COLUMNS = tuple(getattr(sc.RuleRow, name) for name in (
    "id", *state.RULE_FIELDS, "revision", "created_by"))
REMEMBERED = 10_000
"""Request records remembered per process (approval id -> seq): the newest, for agents waiting on them."""


def applies(session: Session) -> bool:
    """The guard runs on SQLite stores; on PostgreSQL the grants keep rows and their records together."""
    return not chain.server_signs(session)


def _key(session: Session) -> keys.AuditKey | None:
    store_id = chain.store_id_of(session)
    if store_id is None:
        return None
    cached = chain._KEYS.get((str(keys.config_dir()), store_id))
    if cached is not None:
        return cached
    try:
        return keys.load_key(store_id)
    except keys.KeyUnavailable:
        return None


def sound(record: Any, key: keys.AuditKey | None) -> bool:
    """The record's content matches its hash and, from the key's first record on, its HMAC the hash.

    Only the record itself is checked, not its place in the chain (that is `verify`'s walk): a record
    before the key's first one (an upgraded store) is vouched for by its hash alone. Seqs start at 1:
    a record squeezed in at 0 or below is never ours.
    """
    if type(record.seq) is not int or record.seq < 1:
        return False
    texts = (record.actor, record.action, record.entity, record.entity_id, record.payload, record.prev_hash,
             record.hash)
    if not all(isinstance(t, str) for t in texts) or not isinstance(record.at, int | float) \
            or isinstance(record.at, bool):
        return False
    digest = chain.record_hash(record.prev_hash, record.at, record.actor, record.action, record.entity,
                               record.entity_id, record.payload)
    if digest != record.hash:
        return False
    if key is None or (int(record.seq) < key.first_keyed and record.mac is None):
        return True
    if not isinstance(record.mac, str):
        return False
    signer = key.signer(record.hash, record.mac)  # any key this machine holds for the store (issue 26)
    return signer is not None and int(record.seq) >= signer.keyed_from


# -- rules -------------------------------------------------------------------------------------
@dataclass
class _RuleLog:
    store_id: str
    last_seq: int = 0
    last_hash: str | None = None
    rules: dict[str, Any] = field(default_factory=dict)
    """rule id -> state.RuleRecord: what its sound records say."""


_rule_logs: dict[str, _RuleLog] = {}
_lock = threading.Lock()


def _rule_log(session: Session, location: str) -> _RuleLog:
    """This store's rule records, read on from where this process left off (inside the caller's transaction)."""
    store_id = chain.store_id_of(session) or ""
    head = int(session.execute(select(func.max(A.seq))).scalar() or 0)
    known = _rule_logs.get(location)
    if known is not None and known.last_seq:
        # The record we stopped at must still be there: a rolled-back append's seq is reused by SQLite.
        still = session.execute(select(A.hash).where(A.seq == known.last_seq)).scalar()
        if still != known.last_hash:
            known = None
    if known is None or known.store_id != store_id or head < known.last_seq:
        known = _rule_logs[location] = _RuleLog(store_id)
    if head > known.last_seq:
        key = _key(session)
        records = session.execute(select(*RECORD_COLUMNS).where(
            A.seq > known.last_seq, A.seq <= head, A.entity == "rule", A.action.in_(state.RULE_ACTIONS))
            .order_by(A.seq)).all()
        for record in records:
            seq, rule_id = int(record.seq), str(record.entity_id)
            if not sound(record, key):
                known.rules[rule_id] = state.RuleRecord(seq, {}, None, None, conflict=(seq, (
                    f"Rule {rule_id}'s audit record {seq} does not hold: its hash or HMAC does not verify.")))
                continue
            state.take_rule_record(known.rules, seq, record.actor, record.action, rule_id,
                                   state.payload_of(record.payload))
        known.last_seq = head
        known.last_hash = session.execute(select(A.hash).where(A.seq == head)).scalar()
    return known


def rule_refusal(session: Session, location: str, rule_id: str) -> str | None:
    """Why this rule row may not decide (one sentence), or None when it is what its audit records say."""
    if not applies(session):
        return None
    with _lock:
        want = _rule_log(session, location).rules.get(rule_id)
    row = session.execute(select(*RULE_COLUMNS).where(sc.RuleRow.id == rule_id)).first()
    if row is None:
        return f"Rule {rule_id} is not in the table."
    found = state.rule_disagrees(row, want)
    return None if found is None else found.sentence


# -- decisions ---------------------------------------------------------------------------------
_requests: OrderedDict[str, int] = OrderedDict()


def remember_request(approval_id: str, seq: int | None) -> None:
    """The seq of an approval's request record, so reading its decision back starts there."""
    if seq is None:
        return
    with _lock:
        _requests[approval_id] = seq
        while len(_requests) > REMEMBERED:
            _requests.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Refusal:
    sentence: str
    requested_arguments: str | None
    """The arguments the request record holds (what the agent asked with), when it could be read."""


def decision_refusal(session: Session, row: sc.ApprovalRow) -> Refusal | None:
    """Why this decided approval row may not be acted on, or None when its audit records vouch for it."""
    if not applies(session):
        return None
    with _lock:
        since = _requests.get(row.id, 0)
    records = session.execute(select(*RECORD_COLUMNS).where(
        A.seq >= since, A.entity == "approval", A.entity_id == row.id).order_by(A.seq)).all()
    key = _key(session)
    requested = None
    for record in records:
        if record.action == "approval.request" and requested is None:
            found = state.payload_of(record.payload).get("arguments")
            requested = found if isinstance(found, str) else None
        if not sound(record, key):
            return Refusal(f"Approval {row.id}'s audit record {record.seq} does not hold: its hash or HMAC does "
                           "not verify.", requested)
    found = state.approval_record_disagrees(
        row, [(int(r.seq), str(r.actor), str(r.action), str(r.payload)) for r in records])
    return None if found is None else Refusal(found.sentence, requested)
