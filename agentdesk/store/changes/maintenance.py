"""Housekeeping that keeps a long-lived store small: pruning the change log.

The change log only exists so watchers in other processes can follow commits;
once every watcher has read a row it is dead weight. Pruning keeps a window
(by age and by count) and never deletes the newest row: SQLite hands out
`max(seq) + 1` for a plain INTEGER PRIMARY KEY, so an emptied log would restart
at 1 and watchers would mistake new changes for ones they already read. A
watcher that fell behind the pruned window notices the gap and publishes a
reset instead of silently missing changes.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import delete, func, select
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from agentdesk.store.audit import AuditAppender
from agentdesk.store.changes.background import BackgroundJob
from agentdesk.store.errors import InvalidInput, ReadOnlyStore, StoreError, StoreUnavailable
from agentdesk.store.persistence.database import Store, describe_operational_error
from agentdesk.store.persistence.schema import ChangeRow
from agentdesk.store.uow import affected

DEFAULT_KEEP_SECONDS = 24 * 3600.0
DEFAULT_KEEP_ROWS = 100_000
log = logging.getLogger(__name__)

DELETE_CHUNK = 50_000
"""Rows per transaction, so pruning a huge backlog never holds the write lock for long."""


def prune_change_log(store: Store, *, keep_seconds: float | None = DEFAULT_KEEP_SECONDS,
                     keep_rows: int = DEFAULT_KEEP_ROWS, actor: str = "agentdesk",
                     now: float | None = None) -> int:
    """Delete change-log rows older than `keep_seconds` and outside the newest `keep_rows`.

    A row survives if either rule keeps it; `keep_seconds=None` prunes by count only.
    Returns how many rows were deleted.
    """
    if store.read_only:
        raise ReadOnlyStore(f"The store {store.display_name} is open read-only.")
    if keep_rows < 1:
        raise InvalidInput("Pruning must keep at least the newest change (keep_rows >= 1).")
    cutoff = None if keep_seconds is None else (time.time() if now is None else now) - keep_seconds
    total = 0
    try:
        while True:
            deleted = _prune_chunk(store, cutoff, keep_rows, actor)
            total += deleted
            if deleted < DELETE_CHUNK:
                return total
    except (OperationalError, ProgrammingError) as exc:  # locked, lost, or (PostgreSQL) a login without DELETE
        raise StoreUnavailable(describe_operational_error(exc, store.url)) from exc


def _prune_chunk(store: Store, cutoff: float | None, keep_rows: int, actor: str) -> int:
    """Delete one chunk from the *front* of the log: pruning never leaves holes a watcher could miss."""
    with Session(store.write_engine) as session, session.begin():
        audit = AuditAppender(session)
        deleted = _prune_rows(session, audit, cutoff, keep_rows, actor)
    audit.anchor()  # only after the commit succeeded (a raise above skips it)
    return deleted


def _prune_rows(session: Session, audit: AuditAppender, cutoff: float | None, keep_rows: int,
                actor: str) -> int:
    C = ChangeRow
    lowest, highest = session.execute(select(func.min(C.seq), func.max(C.seq))).one()
    if highest is None:
        return 0
    last = min(highest - keep_rows, lowest + DELETE_CHUNK - 1)
    if cutoff is not None:
        first_young = session.execute(select(C.seq).where(C.at >= cutoff)
                                      .order_by(C.seq).limit(1)).scalar()
        if first_young is not None:
            last = min(last, first_young - 1)
    if last < lowest:
        return 0
    deleted = affected(session.execute(delete(C).where(C.seq <= last)
                                       .execution_options(synchronize_session=False)))
    audit.append(actor, "changelog.prune", "change_log", str(last),
                 {"deleted": deleted, "through_seq": last, "cutoff": cutoff})
    return deleted


PRUNE_EVERY_S = 3600.0
FIRST_PRUNE_AFTER_S = 60.0
"""Not at start-up: a window opening should not race the watchers of other windows for the lock."""


class PruneSchedule(BackgroundJob):
    """Prunes the change log every `interval_s` on a daemon thread, for as long as the store stays open.

    Started by every process that watches a store it may prune (the window, `watch`): on
    SQLite the file's user, on PostgreSQL an admin login (only agentdesk_admin may delete
    change-log rows). Failures are logged once and retried next time; a refusal for want of
    privilege stops the schedule, since it would never succeed.
    """

    thread_name = "agentdesk-prune"

    def __init__(self, store: Store, *, interval_s: float = PRUNE_EVERY_S,
                 first_after_s: float = FIRST_PRUNE_AFTER_S, keep_seconds: float = DEFAULT_KEEP_SECONDS,
                 keep_rows: int = DEFAULT_KEEP_ROWS) -> None:
        super().__init__(store, first_after_s=first_after_s)
        self.keep_seconds = keep_seconds
        self.keep_rows = keep_rows
        self.interval_s = interval_s
        self.runs = 0
        self.deleted = 0
        self._warned = False

    @staticmethod
    def allowed(store: Store) -> bool:
        return not store.read_only and (store.login is None or store.login.may("admin"))

    def tick(self) -> float | None:
        try:
            self.deleted += prune_change_log(self.store, keep_seconds=self.keep_seconds,
                                             keep_rows=self.keep_rows, actor="agentdesk scheduled prune")
            self.runs += 1
        except StoreError as exc:
            if "may not" in str(exc):
                log.info("scheduled change-log pruning stops: %s", exc)
                return None
            if not self._warned:
                log.warning("scheduled change-log pruning failed (%s); retrying every %.0f s",
                            exc, self.interval_s)
                self._warned = True
        return self.interval_s
