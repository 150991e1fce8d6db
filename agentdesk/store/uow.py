"""Unit of work: one transaction, its audit records, its change-log rows, then the events.

Changes are collected while the transaction runs, written to the change log in
the same transaction (so other processes see exactly what committed), and
published on the in-process bus only after the commit succeeded. A rollback
drops them: no subscriber ever hears of a write that did not happen.

Taking the write lock waits instead of failing (store/persistence/retry.py): a locked store is
retried with jittered back-off for up to `WRITE_DEADLINE_S`. Runtime units
(`runtime=True`: spans, context, the runtime's approvals) queue behind each other
and step aside for operator units (everything else: decisions, edits, imports),
so a decision waits for at most the transaction that holds the lock right now.

A commit that reports an error may still have landed (an I/O error after the WAL
frame was written, a server connection lost during COMMIT). Before reporting the
failure the unit looks for its own first change-log row: found, the write
happened and the unit succeeds (publishing it once); absent, nothing was applied
and the caller may try again; every write is a compare-and-set on ids chosen
before the transaction, so trying again never applies twice.

A lost server (PostgreSQL stopped or restarting) is told apart from a refusal: a unit that lost its
connection before or during its body raises `ServerUnreachable` (nothing was applied: retrying is
safe, store/persistence/outage.py), and one that lost it during COMMIT waits for the server to come
back to look for its change-log row, so the caller hears "applied" or "not applied", or, if the server
never answered, `CommitUnknown`. A unit given a `ride_out` (an agent's) waits that long for the
server before it starts, instead of failing at once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager, ExitStack, nullcontext, suppress
from types import TracebackType
from typing import Any, cast

from sqlalchemy import CursorResult, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from agentdesk.store.audit import AuditAppender
from agentdesk.store.errors import (
    CommitUnknown,
    InvalidInput,
    PermissionRefused,
    ServerUnreachable,
    StoreError,
    StoreUnavailable,
)
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import Store, describe_operational_error
from agentdesk.store.persistence.outage import COMMIT_CHECK_S, NO_RIDE_OUT, Pauses, RideOut, is_connection_lost
from agentdesk.store.persistence.postgres.engine import RUNTIME_QUEUE, is_postgres_url
from agentdesk.store.persistence.postgres.engine import busy_timeout_of as pg_busy_timeout_of
from agentdesk.store.persistence.postgres.roles import refusal_from
from agentdesk.store.persistence.retry import (
    MAX_PAUSE_S,
    PRIORITY_MAX_PAUSE_S,
    WRITE_DEADLINE_S,
    Backoff,
    is_lock_error,
    report_lock_wait,
)
from agentdesk.store.persistence.schema import ChangeRow
from agentdesk.store.persistence.sqlite import BUSY_SLICE_MS, WriterGate, busy_timeout_of, is_sqlite_url, writer_gate

RUNTIME_BUSY_SLICE_MS = 0
OPERATOR_BUSY_SLICE_MS = 2
"""How long one `BEGIN IMMEDIATE` lets SQLite's own busy handler wait before our back-off takes over.

A runtime attempt fails at once when the lock is taken, so between attempts it can look whether an
operator is waiting; SQLite's handler would grab the lock without looking."""


def write_deadline(store: Store, runtime: bool) -> float:
    """How long a write waits for the lock: 30 s for a runtime, the store's busy timeout for an operator.

    An agent must not crash because someone holds the lock for a moment, so runtime writes wait
    `WRITE_DEADLINE_S` (or the busy timeout, if longer). A person's write goes ahead of runtime writes
    anyway; the busy timeout they opened the store with (5 s, `--busy-timeout`) says how long they
    are willing to wait behind anything else before hearing why.
    """
    busy = busy_timeout_of(store.engine) if is_sqlite_url(store.url) else pg_busy_timeout_of(store.engine)
    if busy is None:
        return WRITE_DEADLINE_S
    return max(WRITE_DEADLINE_S, busy) if runtime else busy


class UnitOfWork:
    """One write transaction; `runtime=True` for an agent's writes, which yield to operators'."""

    def __init__(self, store: Store, *, runtime: bool = False, deadline_s: float | None = None,
                 ride_out: RideOut = NO_RIDE_OUT) -> None:
        self.store = store
        self.runtime = runtime
        self.ride_out = ride_out
        self.deadline_s = write_deadline(store, runtime) if deadline_s is None else deadline_s
        self.now = time.time()
        self.lock_wait_s = 0.0
        self._changes: list[Change] = []
        self._adopted: list[Change] = []
        self.loaded: list[Any] = []
        """Rows a batch's writes looked up, held so the next write finds them in the session's identity map
        (it holds only weak references) instead of reading them again, flushing first, under the lock."""
        self._session: Session | None = None
        self._audit: AuditAppender | None = None
        path = store.path
        self._gate: WriterGate | None = writer_gate(path) if is_sqlite_url(store.url) and path else None
        self._held = ExitStack()

    @property
    def session(self) -> Session:
        assert self._session is not None, "use the unit of work as a context manager"
        return self._session

    def __enter__(self) -> UnitOfWork:
        backoff = Backoff(self.deadline_s, max_s=MAX_PAUSE_S if self.runtime else PRIORITY_MAX_PAUSE_S)
        if self.store.read_only:
            self.store.writing_session()  # raises ReadOnlyStore before anything waits
        gate = self._gate
        held = ExitStack()
        try:
            if gate is not None and self.runtime:
                try:
                    held.enter_context(gate.runtime_turn(backoff))
                except TimeoutError:
                    raise StoreUnavailable(self._still_locked(backoff)) from None
            announce: AbstractContextManager[None] = (
                gate.operator() if gate is not None and not self.runtime else nullcontext())
            with announce:
                self._session = self._begin(backoff)
        except BaseException:
            held.close()
            raise
        self._held = held
        self.lock_wait_s = backoff.waited_s
        self.now = time.time()  # taken holding the lock: timestamps follow commit (and change-log) order
        report_lock_wait(self.lock_wait_s, not self.runtime)
        self._audit = AuditAppender(self._session)
        return self

    def _begin(self, backoff: Backoff) -> Session:
        """Take the write lock now (BEGIN IMMEDIATE on SQLite), retrying a locked store until the deadline, and a
        lost server until the `ride_out` gives up (nothing has been written yet either way)."""
        slice_ms = RUNTIME_BUSY_SLICE_MS if self.runtime else OPERATOR_BUSY_SLICE_MS
        server_back_by = time.monotonic() + self.ride_out.deadline_s
        pauses = Pauses()
        while True:
            if self.runtime and self._gate is not None:
                self._gate.step_aside()  # before every attempt: an operator may have started waiting meanwhile
            session = self.store.writing_session()
            try:
                session.begin()
                session.connection(execution_options={BUSY_SLICE_MS: slice_ms, RUNTIME_QUEUE: self.runtime})
                return session
            except DBAPIError as exc:
                if not isinstance(exc, OperationalError):
                    session.close()
                    _refused(exc, self.store)  # a login that may not write at all (a viewer): one sentence
                    raise
                session.close()
                if self.store.is_postgres and is_connection_lost(exc):
                    pause = pauses.next()
                    if time.monotonic() + pause > server_back_by:
                        raise ServerUnreachable(describe_operational_error(exc, self.store.url)) from exc
                    self.store.outage.lost()
                    if self.ride_out.pause(pause):
                        raise ServerUnreachable(describe_operational_error(exc, self.store.url)) from exc
                    continue
                if not is_lock_error(exc):
                    raise StoreUnavailable(describe_operational_error(exc, self.store.url)) from exc
                if not backoff.pause():
                    raise StoreUnavailable(self._still_locked(backoff)) from exc

    def _still_locked(self, backoff: Backoff) -> str:
        waited = backoff.waited_s
        shown = f"{waited:.1f}" if waited < 10 else f"{waited:.0f}"
        return (f"The store {self.store.display_name} stayed locked by another writer for {shown} s; "
                "nothing was written.")

    @property
    def signals_operators(self) -> bool:
        """Whether `operator_waiting` can ever say True here (SQLite's writer gate); on a server it cannot."""
        return self._gate is not None

    def operator_waiting(self) -> bool:
        """Whether an operator's write is waiting for this unit's lock (SQLite: any process; else False).

        Bulk writers (the OTLP import) look between whole pieces of work and end their transaction early."""
        return self._gate is not None and self._gate.operator_waiting()

    def _release_queue(self) -> None:
        self._held.close()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        session = self.session
        try:
            if exc_type is not None:
                with suppress(DBAPIError):  # a lost connection cannot roll back; the server did when it dropped it
                    session.rollback()
                self._changes.clear()
                self._adopted.clear()
                if isinstance(exc, DBAPIError):
                    _refused(exc, self.store)
                if isinstance(exc, StaleDataError):
                    _not_its_row(exc, self.store)
                _translate(exc, self.store.url)
                return
            published = self._adopted + self._write_change_log()
            try:
                session.commit()
            except DBAPIError as error:
                with suppress(DBAPIError):  # a connection that is gone cannot roll back; the server already did
                    session.rollback()
                if self.store.is_postgres and is_connection_lost(error):
                    self._settle_lost_commit(published, error)
                elif not self._landed(published):
                    raise
            self.store.outage.back()
            _this_thread.commits = commits_on_this_thread() + 1
            if self._audit is not None:
                self._audit.anchor()  # after the commit, fsynced; a failure is logged, never raised
        except OperationalError as error:  # before the commit was sent (the change log), or refused at commit
            with suppress(DBAPIError):
                session.rollback()
            raise self.store.unavailable(error) from error
        except DBAPIError as error:  # refused at commit (a deferred check: a rule changed without its audit record)
            session.rollback()
            _refused(error, self.store)
            raise
        except IntegrityError as error:
            session.rollback()
            raise InvalidInput(f"The store refused the write: {error.orig}.") from error
        except StaleDataError as error:
            session.rollback()
            _not_its_row(error, self.store)
            raise
        finally:
            session.close()
            self._release_queue()
        self.store.bus.publish(published)

    def _settle_lost_commit(self, published: list[Change], error: DBAPIError) -> None:
        """The connection broke during COMMIT: wait for the server to say whether it landed (returns if so)."""
        if not published:
            raise CommitUnknown(self._unknown_commit()) from error
        give_up = time.monotonic() + max(self.ride_out.deadline_s, COMMIT_CHECK_S)
        pauses = Pauses()
        while True:
            try:
                found = self._found(published[0])
            except ServerUnreachable:
                self.store.outage.lost()
                pause = pauses.next()
                if time.monotonic() + pause > give_up:
                    raise CommitUnknown(self._unknown_commit()) from error
                time.sleep(pause)
                continue
            if found:
                return
            raise ServerUnreachable(describe_operational_error(error, self.store.url)) from error  # not applied

    def _unknown_commit(self) -> str:
        return (f"The connection to {self.store.display_name} was lost during a commit and the server did not come "
                "back to say whether it was kept; look before trying again.")

    def _found(self, first: Change) -> bool:
        with self.store.reading() as reader:
            return reader.execute(select(ChangeRow.seq).where(
                ChangeRow.seq == first.seq, ChangeRow.origin == first.origin, ChangeRow.at == first.at,
                ChangeRow.entity_id == first.id, ChangeRow.op == first.op)).first() is not None

    def _landed(self, published: list[Change]) -> bool:
        """After a commit reported an error: is our first change-log row there (so the commit happened)?"""
        if not published:
            return False
        first = published[0]
        try:
            with self.store.reading() as reader:
                found = reader.execute(select(ChangeRow.seq).where(
                    ChangeRow.seq == first.seq, ChangeRow.origin == first.origin, ChangeRow.at == first.at,
                    ChangeRow.entity_id == first.id, ChangeRow.op == first.op)).first()
        except StoreError:
            return False  # cannot tell: report the failure; a retry is a compare-and-set and cannot double-apply
        return found is not None

    def record(self, entity: str, op: str, entity_id: str, parents: Mapping[str, str] | None = None,
               revision: int | None = None) -> None:
        self._changes.append(Change(entity, op, entity_id, dict(parents or {}), revision,
                                    origin=self.store.origin, at=self.now))

    def adopt(self, changes: list[Change]) -> None:
        """Change-log rows and audit records a server function wrote in this transaction (PostgreSQL,
        migration 0008): published after the commit like recorded ones, and the audit head anchored."""
        assert self._audit is not None
        self._adopted.extend(changes)
        self._audit.adopt_server_head()

    def audit(self, actor: str, action: str, entity: str, entity_id: str, payload: dict[str, Any]) -> None:
        assert self._audit is not None
        self._audit.append(actor, action, entity, entity_id, payload, at=self.now)

    @property
    def audit_head(self) -> tuple[int, str] | None:
        """(seq, hash) of the last audit record this unit appended (None: none, or a server function did)."""
        return None if self._audit is None else self._audit.head

    def _write_change_log(self) -> list[Change]:
        if not self._changes:
            return []
        rows = [dict(at=c.at, origin=c.origin, entity=c.entity, op=c.op, entity_id=c.id,
                     parents=json.dumps(c.parents), revision=c.revision) for c in self._changes]
        if self.store.is_postgres:
            # Only the server writes the change log (migration 0012): it draws the seqs and logs the origin it
            # knows (this login's, then ours), so no login can forge a seq or another window's origin.
            logged = self.session.execute(LOG_CHANGES, {"origin": self.store.origin, "changes": json.dumps(
                [{k: v for k, v in row.items() if k != "origin"} for row in rows])}).all()
            return [Change(c.entity, c.op, c.id, c.parents, c.revision, seq, origin, c.at)
                    for c, (seq, origin) in zip(self._changes, logged, strict=True)]
        seqs = self.session.execute(
            insert(ChangeRow).returning(ChangeRow.seq, sort_by_parameter_order=True), rows
        ).scalars().all()
        return [Change(c.entity, c.op, c.id, c.parents, c.revision, seq, c.origin, c.at)
                for c, seq in zip(self._changes, seqs, strict=True)]


_this_thread = threading.local()


def commits_on_this_thread() -> int:
    """Units of work this thread committed so far: a request that made several can tell whether a failure
    came after one of them landed (then "nothing was applied" is no longer true: store/server/agent_api.py)."""
    return int(getattr(_this_thread, "commits", 0))


LOG_CHANGES = text("SELECT seq, origin FROM agentdesk_log_changes(:origin, CAST(:changes AS json))")


def _refused(exc: DBAPIError, store: Store) -> None:
    """A write the server refused for want of privilege (SQLSTATE 42501) becomes one sentence, exit 2."""
    if getattr(exc.orig, "sqlstate", None) == "42501":
        raise PermissionRefused(refusal_from(str(exc.orig), store.login)) from exc


def _not_its_row(exc: StaleDataError, store: Store) -> None:
    """An agent login's UPDATE matched none of the rows it named (PostgreSQL, migration 0013): row-level security
    hides the rows another login wrote from an agent's writes. One sentence instead of the ORM's error."""
    login = store.login
    if not store.is_postgres or login is None or login.level != "agent" or login.owner:
        return
    found = re.search(r"on table '([a-z_]+)'", str(exc))
    what = (found.group(1) if found else "row").rstrip("s").replace("_", " ")
    raise PermissionRefused(f"{login.name} is an agent that did not write this {what}; "
                            "changing it needs its own agent login or operator.") from exc


def guard(condition: bool, error: StoreError) -> None:
    if not condition:
        raise error


def affected(result: object) -> int:
    """Rows matched by an UPDATE/DELETE: the answer to a compare-and-set."""
    return int(cast(CursorResult[Any], result).rowcount or 0)


def _translate(exc: BaseException | None, url: str) -> None:
    """Lock and constraint failures inside the body become the store's typed errors."""
    if isinstance(exc, DBAPIError) and is_postgres_url(url) and is_connection_lost(exc):
        raise ServerUnreachable(describe_operational_error(exc, url)) from exc  # rolled back: nothing applied
    if isinstance(exc, OperationalError) or (isinstance(exc, DBAPIError) and is_postgres_url(url)
                                             and not isinstance(exc, IntegrityError)):
        # PostgreSQL refuses a login's missing privilege as ProgrammingError: one sentence, like a lock
        raise StoreUnavailable(describe_operational_error(exc, url)) from exc
    if isinstance(exc, IntegrityError):
        raise InvalidInput(f"The store refused the write: {exc.orig}.") from exc


# Writes the server does itself: on PostgreSQL the store's SECURITY DEFINER functions make the change;
# approvals and context edits share the switch and the adoption of the change-log rows those functions wrote.

def on_server(uow: UnitOfWork) -> bool:
    """True when the store's own functions do the write (PostgreSQL)."""
    return uow.store.is_postgres


def adopt_server_changes(uow: UnitOfWork, changes: Any) -> None:
    """The change-log rows a server function wrote (a JSON array), published by the unit of work."""
    uow.adopt([Change(c["entity"], c["op"], c["id"], dict(c["parents"] or {}), c["revision"], c["seq"],
                      c["origin"], c["at"]) for c in (changes or [])])
