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

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.exc import OperationalError

from agentdesk.store import readmodel as rm
from agentdesk.store.audit import ChainReport
from agentdesk.store.errors import InvalidInput, ReadOnlyStore, StoreUnavailable, Unsupported
from agentdesk.store.persistence import sqlite
from agentdesk.store.persistence.bus import Change, ChangeBus
from agentdesk.store.persistence.database import describe_operational_error
from agentdesk.store.readmodel import Location, Page, SpanTable
from agentdesk.store.source import Capability, SourceDescriptor
from agentdesk.store.sources import readonly
from agentdesk.store.sources.follow import Follow, FollowWatcher, TableFollower
from agentdesk.store.sources.reads import Reads
from agentdesk.store.sources.sql import guard_statement
from agentdesk.store.sources.unreadable import UNREADABLE
from agentdesk.store.text.arguments import arguments_hash, check_expected_hash, guard_arguments
from agentdesk.store.validation import check_name

__all__ = ["ForeignSource", "Unsupported"]


CONTEXT_EDITS = (Capability.SET_VISIBILITY, Capability.LOCK, Capability.EDIT_ITEM, Capability.COMPACT,
                 Capability.UNDO_COMPACTION)


def no_context_edits(reason: str) -> dict[Capability, str]:
    """`unsupported_reasons` of a runtime that keeps no editable context: one reason for every edit."""
    return dict.fromkeys(CONTEXT_EDITS, reason)


@dataclass(frozen=True, slots=True)
class Auxiliary:
    """An optional table: the columns agentdesk reads from it, and what is not shown without it."""

    columns: tuple[str, ...]
    lost: str


class ForeignSource:
    """Base of the seed-runtime sources: lifecycle, and every read through the runtime's `reads`.

    A subclass sets `kind`, `reads`, `follow` and the capability texts, and defines the
    write methods (`decide`, the context edits) its runtime really supports.
    """

    kind = "foreign"
    version: str | None = None
    writable_capabilities: frozenset[Capability] = frozenset()
    """What this runtime's schema lets us do when writes are allowed."""
    unsupported_reasons: dict[Capability, str] = {}
    """Why each other capability is absent, in the runtime's terms."""
    notes = ""
    follow: Follow | None = None
    """The runtime's table declarations for the follower (None: changes are not followed)."""
    reads: Reads
    """The runtime's read functions (set by the subclass, as a class attribute or when it opens)."""
    auxiliary: dict[str, Auxiliary] = {}
    """Tables `recognise` does not require (a newer or older runtime version may lack one). A missing
    one reads as an empty table on our connections, so only what needs it goes blank, and what is
    lost is said in `info` and the status bar (`descriptor.notes`)."""

    def __init__(self, path: Path, *, version: str | None = None, allow_writes: bool = False,
                 busy_timeout_s: float = 5.0) -> None:
        self.path = path
        self.version = version
        self.allow_writes = allow_writes
        self.bus = ChangeBus()
        self.busy_timeout_s = busy_timeout_s
        self.missing_tables: dict[str, Auxiliary] = {}
        self.immutable = not allow_writes and readonly.needs_immutable(path)
        self.engine = self._engine()
        self.writer = sqlite.writer_engine(self.engine)
        self.missing_tables = self._missing_auxiliary()
        if self.missing_tables:
            self.engine.dispose()  # connections opened before now have no stand-ins
        self._watcher: FollowWatcher | None = None
        self._follower: TableFollower | None = None

    # -- identity and capabilities ---------------------------------------------------------
    @property
    def descriptor(self) -> SourceDescriptor:
        return SourceDescriptor(self.kind, str(self.path), not self.allow_writes, self.version, self.all_notes)

    @property
    def all_notes(self) -> str:
        """The runtime's notes, plus what this file cannot show (missing tables) and whether it is followed."""
        parts = [self.notes] if self.notes else []
        parts += [f"This database has no {table} table, so {aux.lost}." for table, aux in self.missing_tables.items()]
        if self.immutable:
            parts.append(f"It was {readonly.LIVE_NOTE}")
        return " ".join(parts)

    def _missing_auxiliary(self) -> dict[str, Auxiliary]:
        if not self.auxiliary:
            return {}
        with self.reading() as conn:
            present = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))}
        return {table: aux for table, aux in self.auxiliary.items() if table not in present}

    def _stand_in_tables(self, dbapi_connection: sqlite3.Connection, record: object) -> None:
        """An empty TEMP view per missing auxiliary table (temp objects live in the connection, not the file)."""
        if not self.missing_tables:
            return
        query_only = dbapi_connection.execute("PRAGMA query_only").fetchone()[0]
        dbapi_connection.execute("PRAGMA query_only=OFF")
        try:
            for table, aux in self.missing_tables.items():
                columns = ", ".join(f'NULL AS "{c}"' for c in aux.columns)
                dbapi_connection.execute(f'CREATE TEMP VIEW IF NOT EXISTS "{table}" AS SELECT {columns} WHERE 0')
        finally:
            dbapi_connection.execute(f"PRAGMA query_only={int(query_only)}")

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.writable_capabilities if self.allow_writes else frozenset()

    def why_not(self, capability: Capability) -> str:
        if capability in self.capabilities:
            return ""
        if capability in self.writable_capabilities:
            return (f"This {self.kind} database is open read-only; reopen it with --allow-writes "
                    "to change it.")
        if capability is Capability.CONTROL_RUN and capability not in self.unsupported_reasons:
            return (f"{self.kind} keeps no pause or stop state its agents read, so agentdesk cannot pause, "
                    "resume or stop its runs.")
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

    def guard_shown(self, approval_id: str, expected_arguments_hash: str | None) -> None:
        """Inside a decision's write: refuse it as stale when the arguments are not the ones shown.
        Read through the source's own mapping, so the hash is of what the window displayed."""
        expected = check_expected_hash(expected_arguments_hash)
        shown = self.approval(approval_id)  # type: ignore[attr-defined]  # every foreign source reads approvals
        if shown.status == UNREADABLE:
            raise InvalidInput(f"Approval {approval_id} could not be read ({shown.reason}); agentdesk will not "
                               f"decide what it cannot show. Decide it in {self.kind} itself.")
        if expected is not None:
            guard_arguments(approval_id, arguments_hash(shown.arguments), expected)

    def _require(self, capability: Capability) -> None:
        if capability in self.capabilities:
            return
        if capability in self.writable_capabilities:
            raise ReadOnlyStore(self.why_not(capability))
        raise Unsupported(self.why_not(capability))

    # -- connections -----------------------------------------------------------------------
    def _engine(self) -> Engine:
        engine = sqlite.create_sqlite_engine(self.path, read_only=not self.allow_writes,
                                             busy_timeout_s=self.busy_timeout_s, manage_journal=False,
                                             immutable=self.immutable)
        event.listen(engine, "connect", self._stand_in_tables)
        event.listen(engine, "before_cursor_execute", guard_statement, retval=True)
        return engine

    def _follow_when_shared(self) -> None:
        """Once the runtime runs (its -shm appears), stop reading immutable: `mode=ro` then creates
        nothing and sees every commit, so live updates begin."""
        if self.immutable and not readonly.needs_immutable(self.path):
            self.immutable = False
            stale, self.engine = self.engine, self._engine()
            self.writer = sqlite.writer_engine(self.engine)
            stale.dispose()

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """One read transaction: every read of one call sees one snapshot."""
        self._follow_when_shared()
        with self._transaction(self.engine) as conn:
            yield conn

    @contextmanager
    def writing(self, capability: Capability) -> Iterator[Connection]:
        """One write transaction (`BEGIN IMMEDIATE`), only when the capability is allowed."""
        self._require(capability)
        with self._transaction(self.writer) as conn:
            yield conn

    @contextmanager
    def _transaction(self, engine: Engine) -> Iterator[Connection]:
        try:
            with engine.connect() as conn, conn.begin():
                yield conn
        except OperationalError as exc:
            missing = str(exc.orig).removeprefix("no such table: ") if "no such table" in str(exc.orig) else None
            if missing is not None:
                lost = "this view cannot be shown"
                raise StoreUnavailable(f"This {self.kind} database has no {missing} table (another version of "
                                       f"{self.kind}?), so {lost}.") from exc
            raise StoreUnavailable(describe_operational_error(exc, f"sqlite:///{self.path}")) from exc

    def record_decision(self, write: Callable[[Connection, str, bool, str, str | None], None],
                        change: Callable[[rm.Approval], Change], approval_id: str, approve: bool, actor: str,
                        reason: str | None, edited_arguments: str | None,
                        expected_arguments_hash: str | None = None) -> rm.Approval:
        """A decision whose runtime write needs nothing but the cleaned inputs: checked, written, then announced."""
        capability, actor, reason = self.check_decision(approve, actor, reason, edited_arguments)
        with self.writing(capability) as conn:
            self.guard_shown(approval_id, expected_arguments_hash)
            write(conn, approval_id, approve, actor, reason)
        decided = self.approval(approval_id)
        self.bus.publish([change(decided)])
        return decided

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
            # An immutable open sees no commits; its watcher must not open a `mode=ro` probe (that creates -shm).
            self._watcher = FollowWatcher(None if self.immutable else self.path, self.follower, self.reading, self.bus,
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
    # -- reads: one transaction each, answered by the runtime's functions --------------------
    def projects(self) -> list[rm.Project]:
        with self.reading() as conn:
            return self.reads.projects(conn)

    def tasks(self, project_id: str) -> list[rm.Task]:
        with self.reading() as conn:
            return self.reads.tasks(conn, project_id)

    def sessions(self, task_id: str) -> list[rm.Session]:
        with self.reading() as conn:
            return self.reads.sessions(conn, task_id)

    def agents(self, session_id: str) -> list[rm.Agent]:
        with self.reading() as conn:
            return self.reads.agents(conn, session_id)

    def runs(self, agent_id: str, offset: int = 0, limit: int = 200) -> Page[rm.Run]:
        with self.reading() as conn:
            return self.reads.runs(conn, agent_id, offset, limit)

    def run(self, run_id: str) -> rm.Run:
        with self.reading() as conn:
            return self.reads.run(conn, run_id)

    def agent(self, agent_id: str) -> rm.Agent:
        with self.reading() as conn:
            return self.reads.agent(conn, agent_id)

    def locate(self, entity: str, entity_id: str) -> Location:
        with self.reading() as conn:
            return self.reads.locate(conn, entity, entity_id)

    def span_table(self, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
        with self.reading() as conn:
            return self.reads.span_table(conn, run_id, span_ids)

    def span(self, span_id: str) -> rm.Span:
        with self.reading() as conn:
            return self.reads.span(conn, span_id)

    def sent_context(self, span_id: str) -> list[rm.SentItem]:
        with self.reading() as conn:
            return self.reads.sent_context(conn, span_id)

    def context(self, agent_id: str) -> rm.AgentContext:
        with self.reading() as conn:
            return self.reads.context(conn, agent_id)

    def approvals(self, status: str | None = "pending", limit: int = 1000) -> list[rm.Approval]:
        with self.reading() as conn:
            return self.reads.approvals(conn, status, limit)

    def approval(self, approval_id: str) -> rm.Approval:
        with self.reading() as conn:
            return self.reads.approval(conn, approval_id)

    # -- figures and maintenance -------------------------------------------------------------
    def info(self) -> rm.StoreInfo:
        return rm.StoreInfo(self.kind, str(self.path), self.version, not self.allow_writes, self.counts())

    def counts(self) -> dict[str, int]:
        with self.reading() as conn:
            return self.reads.counts(conn)

    def showcase_run(self) -> str | None:
        with self.reading() as conn:
            return self.reads.showcase_run(conn)

    def verify(self) -> ChainReport:
        return ChainReport(0, None, None)

    def expire_overdue(self) -> list[str]:
        return []
