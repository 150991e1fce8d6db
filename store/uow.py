"""Unit of work: one transaction, its audit records, its change-log rows, then the events.

Changes are collected while the transaction runs, written to the change log in
the same transaction (so other processes see exactly what committed), and
published on the in-process bus only after the commit succeeded. A rollback
drops them: no subscriber ever hears of a write that did not happen.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, cast

from sqlalchemy import CursorResult, insert
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from agentdesk.store.audit import AuditAppender
from agentdesk.store.bus import Change
from agentdesk.store.database import Store, describe_operational_error
from agentdesk.store.errors import InvalidInput, StoreError, StoreUnavailable
from agentdesk.store.schema import ChangeRow


class UnitOfWork:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.now = time.time()
        self._changes: list[Change] = []
        self._session: Session | None = None
        self._audit: AuditAppender | None = None

    @property
    def session(self) -> Session:
        assert self._session is not None, "use the unit of work as a context manager"
        return self._session

    def __enter__(self) -> UnitOfWork:
        self._session = self.store.writing_session()
        try:
            self._session.begin()
            self._session.connection()  # take the write lock now (BEGIN IMMEDIATE on SQLite)
        except OperationalError as exc:
            self._session.close()
            raise StoreUnavailable(describe_operational_error(exc, self.store.url)) from exc
        self._audit = AuditAppender(self._session)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        session = self.session
        try:
            if exc_type is not None:
                session.rollback()
                self._changes.clear()
                _translate(exc, self.store.url)
                return
            published = self._write_change_log()
            session.commit()
            if self._audit is not None:
                self._audit.anchor()  # after the commit, fsynced; a failure is logged, never raised
        except OperationalError as error:
            session.rollback()
            raise StoreUnavailable(describe_operational_error(error, self.store.url)) from error
        except IntegrityError as error:
            session.rollback()
            raise InvalidInput(f"The store refused the write: {error.orig}.") from error
        finally:
            session.close()
        self.store.bus.publish(published)

    def record(self, entity: str, op: str, entity_id: str, parents: Mapping[str, str] | None = None,
               revision: int | None = None) -> None:
        self._changes.append(Change(entity, op, entity_id, dict(parents or {}), revision,
                                    origin=self.store.origin, at=self.now))

    def audit(self, actor: str, action: str, entity: str, entity_id: str, payload: dict[str, Any]) -> None:
        assert self._audit is not None
        self._audit.append(actor, action, entity, entity_id, payload, at=self.now)

    def _write_change_log(self) -> list[Change]:
        if not self._changes:
            return []
        rows = [dict(at=c.at, origin=c.origin, entity=c.entity, op=c.op, entity_id=c.id,
                     parents=json.dumps(c.parents), revision=c.revision) for c in self._changes]
        seqs = self.session.execute(
            insert(ChangeRow).returning(ChangeRow.seq, sort_by_parameter_order=True), rows
        ).scalars().all()
        return [Change(c.entity, c.op, c.id, c.parents, c.revision, seq, c.origin, c.at)
                for c, seq in zip(self._changes, seqs, strict=True)]


def guard(condition: bool, error: StoreError) -> None:
    if not condition:
        raise error


def affected(result: object) -> int:
    """Rows matched by an UPDATE/DELETE: the answer to a compare-and-set."""
    return int(cast(CursorResult[Any], result).rowcount or 0)


def _translate(exc: BaseException | None, url: str) -> None:
    """Lock and constraint failures inside the body become the store's typed errors."""
    if isinstance(exc, OperationalError):
        raise StoreUnavailable(describe_operational_error(exc, url)) from exc
    if isinstance(exc, IntegrityError):
        raise InvalidInput(f"The store refused the write: {exc.orig}.") from exc
