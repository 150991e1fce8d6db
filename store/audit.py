"""Hash-chained audit log, in the spirit of lensagent's event log.

Every record's hash covers its own fields and the previous record's hash, so
editing or deleting any record breaks the chain from that point on, and
`verify_chain` names the first broken record.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from agentdesk.store.schema import AuditRow

GENESIS = "0" * 64


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_hash(prev_hash: str, at: float, actor: str, action: str, entity: str,
                entity_id: str, payload: str) -> str:
    body = canonical_json([prev_hash, repr(at), actor, action, entity, entity_id, payload])
    return hashlib.sha256(body.encode()).hexdigest()


class AuditAppender:
    """Appends records inside one transaction; remembers the tail between appends."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._tail: str | None = None

    def append(self, actor: str, action: str, entity: str, entity_id: str,
               payload: dict[str, Any], at: float | None = None) -> str:
        if self._tail is None:
            last = self._session.execute(
                select(AuditRow.hash).order_by(AuditRow.seq.desc()).limit(1)).scalar()
            self._tail = last or GENESIS
        at = time.time() if at is None else at
        text = canonical_json(payload)
        digest = record_hash(self._tail, at, actor, action, entity, entity_id, text)
        self._session.execute(insert(AuditRow).values(
            at=at, actor=actor, action=action, entity=entity, entity_id=entity_id,
            payload=text, prev_hash=self._tail, hash=digest))
        self._tail = digest
        return digest


@dataclass(frozen=True, slots=True)
class ChainReport:
    records: int
    broken_seq: int | None
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.broken_seq is None


def verify_chain(session: Session, batch: int = 5000) -> ChainReport:
    """Walk the whole chain in order and stop at the first record that does not hold."""
    prev = GENESIS
    count = 0
    last_seq = 0
    while True:
        rows = session.execute(
            select(AuditRow).where(AuditRow.seq > last_seq).order_by(AuditRow.seq).limit(batch)
        ).scalars().all()
        if not rows:
            return ChainReport(count, None, None)
        for row in rows:
            if row.prev_hash != prev:
                return ChainReport(count, row.seq, "its previous-hash does not match the record before it")
            expected = record_hash(row.prev_hash, row.at, row.actor, row.action, row.entity,
                                   row.entity_id, row.payload)
            if expected != row.hash:
                return ChainReport(count, row.seq, "its content does not match its hash")
            prev = row.hash
            count += 1
            last_seq = row.seq
