"""The signed records a backup and a restore leave in the chain (what `verify` needs to tell them apart)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from sqlalchemy import select

from agentdesk.store.audit import restore as marks
from agentdesk.store.errors import PermissionRefused
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.schema import AuditRow
from agentdesk.store.uow import UnitOfWork


@dataclass(frozen=True, slots=True)
class Mark:
    """A backup's marker record: its id, when it was taken, and the record it is."""

    backup_id: str
    taken_at: float
    seq: int


def actor_of(store: Store) -> str:
    return store.login.name if store.login is not None else "agentdesk"


def require_owner(store: Store, doing: str) -> None:
    """On PostgreSQL only the store's owner (or a superuser) backs up, restores and re-bases (docs/postgres.md)."""
    login = store.login
    if login is not None and not login.owner:
        raise PermissionRefused(f"{login.name} is not the store's owner; {doing} needs the owner (the login that "
                                "ran `agentdesk init`) or a superuser.")


def mark_backup(store: Store) -> Mark:
    """Append the `store.backup` record the copy taken next will hold (one audited unit of work)."""
    backup_id, taken_at = uuid.uuid4().hex, time.time()
    with UnitOfWork(store) as uow:
        uow.audit(actor_of(store), marks.BACKUP_ACTION, marks.ENTITY, backup_id,
                  {"backup_id": backup_id, "taken_at": taken_at})
        head = uow.audit_head
    assert head is not None
    return Mark(backup_id, taken_at, head[0])


@dataclass(frozen=True, slots=True)
class Restored:
    """What `restore` put back: the backup's marker (None: a copy taken without one) and the last record."""

    mark: Mark | None
    head: int
    record: int | None
    """The `store.restore` record appended after it (None when there was no marker to name)."""


def record_restore(store: Store) -> Restored:
    """Find the restored copy's marker and last record, and append the `store.restore` record naming both."""
    with store.reading() as session:
        head = session.execute(select(AuditRow.seq).order_by(AuditRow.seq.desc()).limit(1)).scalar()
        row = session.execute(select(AuditRow.seq, AuditRow.payload).where(AuditRow.action == marks.BACKUP_ACTION)
                              .order_by(AuditRow.seq.desc()).limit(1)).first()
    mark = None
    if row is not None:
        payload = json.loads(row.payload)
        mark = Mark(str(payload["backup_id"]), float(payload["taken_at"]), int(row.seq))
    if mark is None or head is None:
        return Restored(None, int(head or 0), None)
    with UnitOfWork(store) as uow:
        uow.audit(actor_of(store), marks.RESTORE_ACTION, marks.ENTITY, mark.backup_id,
                  {"backup_id": mark.backup_id, "taken_at": mark.taken_at, "backup_seq": mark.seq,
                   "head": int(head)})
        written = uow.audit_head
    return Restored(mark, int(head), None if written is None else written[0])
