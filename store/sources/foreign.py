"""The lifecycle every source over another runtime's SQLite database shares.

A foreign database belongs to its runtime: we open it read-only (`mode=ro` plus
`PRAGMA query_only`) unless the operator asked for writes, never change its
journal mode, never migrate it. Live changes come from the generic table
follower (`store.sources.follow`) driven by the runtime's table declarations.

This base holds only identity, capabilities, connections and watching. Reads
are each runtime's plain functions; writes exist only on a runtime whose schema
can express them (`ApprovalWriter`, `ContextWriter` in `store.source`), and a
missing capability is explained by `why_not`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from agentdesk.store import readmodel as rm
from agentdesk.store import sqlite
from agentdesk.store.audit import ChainReport
from agentdesk.store.bus import Change, ChangeBus
from agentdesk.store.database import describe_operational_error
from agentdesk.store.errors import ReadOnlyStore, StoreUnavailable, Unsupported
from agentdesk.store.source import Capability, SourceDescriptor
from agentdesk.store.sources.follow import Follow, FollowWatcher, TableFollower
from agentdesk.store.validation import check_name

__all__ = ["ForeignSource", "Unsupported"]


class ForeignSource:
    """Base of the seed-runtime sources. Subclasses set `kind` and implement the queries."""

    kind = "foreign"
    version: str | None = None
    writable_capabilities: frozenset[Capability] = frozenset()
    """What this runtime's schema lets us do when writes are allowed."""
    unsupported_reasons: dict[Capability, str] = {}
    """Why each other capability is absent, in the runtime's terms."""
    notes = ""
    follow: Follow | None = None
    """The runtime's table declarations for the follower (None: changes are not followed)."""

    def __init__(self, path: Path, *, version: str | None = None, allow_writes: bool = False,
                 busy_timeout_s: float = 5.0) -> None:
        self.path = path
        self.version = version
        self.allow_writes = allow_writes
        self.bus = ChangeBus()
        self.engine = sqlite.create_sqlite_engine(path, read_only=not allow_writes, busy_timeout_s=busy_timeout_s,
                                                  manage_journal=False)
        self.writer = sqlite.writer_engine(self.engine)
        self._watcher: FollowWatcher | None = None
        self._follower: TableFollower | None = None

    # -- identity and capabilities ---------------------------------------------------------
    @property
    def descriptor(self) -> SourceDescriptor:
        return SourceDescriptor(self.kind, str(self.path), not self.allow_writes, self.version, self.notes)

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.writable_capabilities if self.allow_writes else frozenset()

    def why_not(self, capability: Capability) -> str:
        if capability in self.capabilities:
            return ""
        if capability in self.writable_capabilities:
            return (f"This {self.kind} database is open read-only; reopen it with --allow-writes "
                    "to change it.")
        return self.unsupported_reasons.get(capability, f"{self.kind} has no such operation.")

    def check_decision(self, approve: bool, actor: str, reason: str | None,
                       edited_arguments: str | None) -> tuple[Capability, str, str | None]:
        """What every foreign decision checks first: allowed, no argument edits, an actor, a reason to deny.

        Returns the capability, the cleaned actor and the cleaned reason (None when empty).
        """
        capability = Capability.APPROVE if approve else Capability.DENY
        self._require(capability)
        if edited_arguments is not None:
            raise Unsupported(self.why_not(Capability.EDIT_ARGUMENTS))
        return capability, check_name("actor name", actor), check_name("reason", reason, required=not approve) or None

    def _require(self, capability: Capability) -> None:
        if capability in self.capabilities:
            return
        if capability in self.writable_capabilities:
            raise ReadOnlyStore(self.why_not(capability))
        raise Unsupported(self.why_not(capability))

    # -- connections -----------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn, conn.begin():
                yield conn
        except OperationalError as exc:
            raise StoreUnavailable(describe_operational_error(exc, f"sqlite:///{self.path}")) from exc

    @contextmanager
    def writing(self, capability: Capability) -> Iterator[Connection]:
        """One write transaction (`BEGIN IMMEDIATE`), only when the capability is allowed."""
        self._require(capability)
        try:
            with self.writer.connect() as conn, conn.begin():
                yield conn
        except OperationalError as exc:
            raise StoreUnavailable(describe_operational_error(exc, f"sqlite:///{self.path}")) from exc

    def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return [dict(r._mapping) for r in conn.execute(text(sql), params)]

    def has_table(self, name: str) -> bool:
        return bool(self.rows("SELECT 1 AS x FROM sqlite_master WHERE type='table' AND name=:n", n=name))

    def columns(self, table: str) -> set[str]:
        """Read columns by name: lensagent 0.1.2 columns may be missing or physically last."""
        return {r["name"] for r in self.rows(f"SELECT name FROM pragma_table_info('{table}')")}

    # -- change detection ------------------------------------------------------------------
    @property
    def follower(self) -> TableFollower:
        """The table follower over this database's declared tables (those it has)."""
        if self._follower is None:
            if self.follow is None:
                raise Unsupported(f"agentdesk cannot follow live changes of a {self.kind} database.")
            with self.reading() as conn:
                present = frozenset(r[0] for r in conn.execute(text("SELECT name FROM sqlite_master "
                                                                     "WHERE type = 'table'")))
            self._follower = TableFollower(self.follow, present)
        return self._follower

    def watch(self, poll_interval_s: float | None = None) -> FollowWatcher:
        if self._watcher is None:
            self._watcher = FollowWatcher(self.path, self.follower, self.reading, self.bus,
                                          poll_interval_s=poll_interval_s)
        return self._watcher

    @property
    def watcher(self) -> FollowWatcher | None:
        return self._watcher

    def prime_high_water(self) -> None:
        """Remember where each followed table stands now (the watcher does this when it starts)."""
        with self.reading() as conn:
            self.follower.prime(conn)

    def poll_changes(self) -> list[Change]:
        """What changed since the last call, as `Change` events (what one watcher poll publishes)."""
        with self.reading() as conn:
            return self.follower.poll(conn)

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self.engine.dispose()

    # -- defaults for what most seed runtimes lack -----------------------------------------
    def info(self) -> rm.StoreInfo:
        return rm.StoreInfo(self.kind, str(self.path), self.version, not self.allow_writes, self.counts())

    def counts(self) -> dict[str, int]:
        return {}

    def showcase_run(self) -> str | None:
        return None

    def verify(self) -> ChainReport:
        return ChainReport(0, None, None)

    def expire_overdue(self) -> list[str]:
        return []
