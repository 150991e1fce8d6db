"""Shared machinery for sources that read another runtime's SQLite database in place.

A foreign database belongs to its runtime: we open it read-only (`mode=ro` plus
`PRAGMA query_only`) unless the operator asked for writes, never change its
journal mode, never migrate it. Change detection polls `PRAGMA data_version` on
a dedicated connection and asks the subclass to turn per-table high-water marks
into the same `Change` events the native store produces.

Subclasses implement the read queries of `store.source.Source` and override
the commands their runtime's schema can express; every other command raises
`Unsupported` with the reason the UI shows on the disabled control.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
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
from agentdesk.store.errors import ReadOnlyStore, StoreError, StoreUnavailable
from agentdesk.store.source import Capability, SourceDescriptor
from agentdesk.store.text.arguments import arguments_hash, check_expected_hash, guard_arguments
from agentdesk.store.validation import check_name

log = logging.getLogger(__name__)


class Unsupported(StoreError):
    """The source's schema cannot express this command."""

    exit_code = 2


class ForeignWatcher:
    """Polls `data_version`; when another connection committed, asks the source what changed."""

    def __init__(self, source: ForeignSource, poll_interval_s: float = 0.025) -> None:
        self.source = source
        self.poll_interval_s = poll_interval_s
        self.healthy = False
        self.last_change_at: float | None = None
        self._stop = threading.Event()
        self._probe = sqlite.open_probe(source.path, 5.0)
        self._version = sqlite.data_version(self._probe)
        source.prime_high_water()
        self._thread = threading.Thread(target=self._run, name=f"agentdesk-{source.kind}-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_interval_s):
            try:
                version = sqlite.data_version(self._probe)
                if version != self._version:
                    self._version = version
                    self.poll_once()
                self.healthy = True
            except Exception:  # a busy moment must not end live updates
                self.healthy = False
                log.exception("%s watcher poll failed", self.source.kind)

    def poll_once(self) -> int:
        changes = self.source.poll_changes()
        if changes:
            self.last_change_at = time.time()
            self.source.bus.publish(changes)
        return len(changes)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._probe.close()


class ForeignSource:
    """Base of the seed-runtime sources. Subclasses set `kind` and implement the queries."""

    kind = "foreign"
    version: str | None = None
    writable_capabilities: frozenset[Capability] = frozenset()
    """What this runtime's schema lets us do when writes are allowed."""
    unsupported_reasons: dict[Capability, str] = {}
    """Why each other capability is absent, in the runtime's terms."""
    notes = ""

    def __init__(self, path: Path, *, version: str | None = None, allow_writes: bool = False,
                 busy_timeout_s: float = 5.0) -> None:
        self.path = path
        self.version = version
        self.allow_writes = allow_writes
        self.bus = ChangeBus()
        self.engine = sqlite.create_sqlite_engine(path, read_only=not allow_writes, busy_timeout_s=busy_timeout_s,
                                                  manage_journal=False)
        self.writer = sqlite.writer_engine(self.engine)
        self._watcher: ForeignWatcher | None = None

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

    def guard_shown(self, approval_id: str, expected_arguments_hash: str | None) -> None:
        """Inside a decision's write: refuse it as stale when the arguments are not the ones shown.
        Read through the source's own mapping, so the hash is of what the window displayed."""
        expected = check_expected_hash(expected_arguments_hash)
        if expected is not None:
            shown = self.approval(approval_id)  # type: ignore[attr-defined]  # every foreign source reads approvals
            guard_arguments(approval_id, arguments_hash(shown.arguments), expected)

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
    def watch(self, poll_interval_s: float | None = None) -> ForeignWatcher:
        if self._watcher is None:
            self._watcher = ForeignWatcher(self, poll_interval_s or 0.025)
        return self._watcher

    @property
    def watcher(self) -> ForeignWatcher | None:
        return self._watcher

    def prime_high_water(self) -> None:
        """Remember where each watched table stands now (subclasses)."""

    def poll_changes(self) -> list[Change]:
        """What changed since the last call, as `Change` events (subclasses)."""
        return []

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

    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None, *,
               expected_arguments_hash: str | None = None) -> rm.Approval:
        self._require(Capability.APPROVE if approve else Capability.DENY)
        raise Unsupported(f"{self.kind} decisions are not implemented.")

    def set_group_visibility(self, group_id: str, visible: bool, expected_revision: int, actor: str) -> None:
        self._require(Capability.SET_VISIBILITY)

    def set_item_locked(self, item_id: str, locked: bool, expected_revision: int, actor: str) -> None:
        self._require(Capability.LOCK)

    def edit_item(self, item_id: str, content: str, expected_revision: int, actor: str) -> None:
        self._require(Capability.EDIT_ITEM)

    def compact(self, agent_id: str, item_ids: Sequence[str], summary: str, focus: str,
                expected_context_revision: int, actor: str) -> str:
        self._require(Capability.COMPACT)
        raise Unsupported(f"{self.kind} compaction is not implemented.")

    def undo_compaction(self, compaction_id: str, actor: str) -> None:
        self._require(Capability.UNDO_COMPACTION)


def sqlite_error_text(exc: sqlite3.Error) -> str:
    return str(exc)
