"""agentdesk's own schema as a `Source`: the queries plus the operator commands.

It implements every protocol of `store.source`: the reader and lifecycle, and
both writers (`ApprovalWriter`, `ContextWriter`); the checks at the bottom make
mypy hold it to all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import func, select

from agentdesk.store import readmodel as rm
from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.asks import commands as ask_commands
from agentdesk.store.asks import reads as ask_reads
from agentdesk.store.audit import ChainReport, verify_store
from agentdesk.store.changes.maintenance import PruneSchedule
from agentdesk.store.changes.watcher import DEFAULT_POLL_INTERVAL_S, ChangeWatcher
from agentdesk.store.context import commands as context_commands
from agentdesk.store.control import commands as control_commands
from agentdesk.store.control.checkpoint import read_control
from agentdesk.store.control.state import RunControl
from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.ingest.staging import visible
from agentdesk.store.persistence import sqlite
from agentdesk.store.persistence.bus import Change, ChangeBus, Subscriber
from agentdesk.store.persistence.database import Store, open_store, to_url
from agentdesk.store.persistence.schema import RunRow, SpanRow
from agentdesk.store.queries import NativeQueries
from agentdesk.store.search.indexer import IndexSchedule
from agentdesk.store.source import (
    ApprovalWriter,
    Capability,
    ContextWriter,
    RunController,
    Source,
    SourceDescriptor,
)

NATIVE_CAPABILITIES = frozenset(Capability)


class NativeSource(NativeQueries):
    """Reads and commands on one agentdesk store; `watch()` adds other processes' changes to its bus."""

    OWNS_STORE: ClassVar[bool] = True
    """Lower layers take their fast path on `self.store` (`persistence.database.own_store`)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._watcher: ChangeWatcher | None = None
        self._prune: PruneSchedule | None = None
        self._index: IndexSchedule | None = None

    @classmethod
    def open(cls, location: str | None = None, **kwargs: object) -> NativeSource:
        return cls(open_store(location, **kwargs))  # type: ignore[arg-type]

    @property
    def bus(self) -> ChangeBus:
        return self.store.bus

    @property
    def descriptor(self) -> SourceDescriptor:
        return SourceDescriptor("agentdesk", self.store.display_name, self.store.read_only,
                                self.store.schema_version)

    @property
    def capabilities(self) -> frozenset[Capability]:
        if self.store.read_only or (self.store.login is not None and not self.store.login.may("operator")):
            return frozenset()  # a PostgreSQL viewer: the database would refuse the write anyway
        return NATIVE_CAPABILITIES

    def why_not(self, capability: Capability) -> str:
        """Why a command is unavailable, for a disabled button's tooltip ("" when it is available)."""
        if capability in self.capabilities:
            return ""
        login = self.store.login
        if not self.store.read_only and login is not None:
            held = f"is a member of agentdesk_{login.level}" if login.level else "is in no agentdesk role"
            return (f"Your PostgreSQL login {login.name} {held}: deciding and editing need agentdesk_operator "
                    "(ask an admin: agentdesk admin role grant LOGIN operator).")
        return "The store is open read-only."

    def info(self) -> rm.StoreInfo:
        return self.store.info()

    def watch(self, poll_interval_s: float | None = None) -> ChangeWatcher:
        if self._watcher is None:
            interval = DEFAULT_POLL_INTERVAL_S if poll_interval_s is None else poll_interval_s
            self._watcher = ChangeWatcher(self.store, poll_interval_s=interval).start()
            self._prune = PruneSchedule(self.store).start()  # a long-lived watcher also keeps the log short
            self._index = IndexSchedule(self.store).start()  # and indexes spans for search, off the write path
        return self._watcher

    @property
    def watcher(self) -> ChangeWatcher | None:
        return self._watcher

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._prune is not None:
            self._prune.stop()
            self._prune = None
        if self._index is not None:
            self._index.stop()
            self._index = None
        self.store.close()

    def showcase_run(self) -> str | None:
        """The run most worth showing first (most spans among the newest runs), for screenshots."""
        recent = (select(RunRow.id).where(visible(RunRow.id)).order_by(RunRow.started_at.desc()).limit(200)
                  .scalar_subquery())
        with self.store.reading() as session:
            return session.execute(
                select(SpanRow.run_id).where(SpanRow.run_id.in_(recent)).group_by(SpanRow.run_id)
                .order_by(func.count().desc()).limit(1)).scalar()

    def verify(self, anchor_file: Path | None = None) -> ChainReport:
        """Chain, signatures, anchor (the local one, or `anchor_file`) and state against the log."""
        with self.store.reading() as session:
            return verify_store(session, anchor_file=anchor_file)

    # -- commands --------------------------------------------------------------------------
    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None, *,
               expected_arguments_hash: str | None = None) -> rm.Approval:
        return approval_commands.decide(self.store, approval_id, approve, actor, reason, edited_arguments,
                               expected_arguments_hash=expected_arguments_hash)

    def pause_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl:
        return control_commands.pause(self.store, run_id, actor, reason)

    def resume_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl:
        return control_commands.resume(self.store, run_id, actor, reason)

    def stop_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl:
        return control_commands.stop(self.store, run_id, actor, reason)

    def run_control(self, run_id: str) -> RunControl:
        return read_control(self.store, run_id)

    def expire_overdue(self) -> list[str]:
        return approval_commands.expire_overdue(self.store)

    # -- questions (store/asks: AskReader, AskWriter) ---------------------------------------
    def asks(self, pending_only: bool = True, limit: int = 1000) -> list[ask_reads.Ask]:
        return ask_reads.list_asks(self.store, pending_only=pending_only, limit=limit)

    def ask(self, ask_id: str) -> ask_reads.Ask:
        return ask_reads.read_ask(self.store, ask_id)

    def answer_ask(self, ask_id: str, answer: str, actor: str, *,
                   expected_revision: int | None = None) -> ask_reads.Ask:
        return ask_commands.answer(self.store, ask_id, answer, actor, expected_revision=expected_revision)

    def set_group_visibility(self, group_id: str, visible: bool, expected_revision: int, actor: str) -> None:
        context_commands.set_group_visibility(self.store, group_id, visible, expected_revision, actor)

    def set_item_locked(self, item_id: str, locked: bool, expected_revision: int, actor: str) -> None:
        context_commands.set_item_locked(self.store, item_id, locked, expected_revision, actor)

    def edit_item(self, item_id: str, content: str, expected_revision: int, actor: str) -> None:
        context_commands.edit_item(self.store, item_id, content, expected_revision, actor)

    def compact(self, agent_id: str, item_ids: Sequence[str], summary: str, focus: str,
                expected_context_revision: int, actor: str) -> str:
        return context_commands.compact(self.store, agent_id, item_ids, summary, focus, expected_context_revision,
                                actor)

    def undo_compaction(self, compaction_id: str, actor: str) -> None:
        context_commands.undo_compaction(self.store, compaction_id, actor)


if TYPE_CHECKING:  # mypy checks the class against each protocol it claims
    _as_source: type[Source] = NativeSource
    _as_approval_writer: type[ApprovalWriter] = NativeSource
    _as_context_writer: type[ContextWriter] = NativeSource
    _as_run_controller: type[RunController] = NativeSource


# -- what only agentdesk's own schema can do, for callers that hold just a `Source` ----------------
def native_store(source: Source, purpose: str) -> Store:
    """The agentdesk store behind `source`, for `purpose` (a sentence fragment: "simulate agents");
    `StoreUnavailable` naming the runtime when the source is another runtime's database."""
    if isinstance(source, NativeSource):
        return source.store
    kind = source.descriptor.kind
    raise StoreUnavailable(f"{source.descriptor.location} is a {kind} database, not an agentdesk store; "
                           f"only an agentdesk store can {purpose}.")


class VerbatimBus(ChangeBus):
    """Every change-log row, as written: a log wants every event, where a view wants the latest state."""

    def publish(self, changes: Sequence[Change]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback(list(changes))


def follow_every_change(source: Source, show: Subscriber, since: int | None = None) -> Callable[[], None]:
    """Call `show` with each committed change (for `agentdesk watch`); returns the function that stops.

    An agentdesk store is followed through its change log with a watcher of its own that includes
    this process's writes, does not coalesce, and replays from `since` (a change-log seq). Another
    runtime's database has no change log: its source's own watcher feeds the source's bus, and
    `close()` stops it.
    """
    if isinstance(source, NativeSource):
        bus = VerbatimBus()
        bus.subscribe(show)
        watcher = ChangeWatcher(source.store, include_own=True, bus=bus, poll_interval_s=0.05,
                                reload_after_outage=False)
        watcher.start(from_seq=since)
        if since is not None and not source.store.is_postgres:
            watcher.poll_once()  # replay now: an idle store would not move data_version to trigger a poll
            # (on a server, starting from `since` has read already, on the listener's connection; a second read
            # on a pooled one only gave a server stopping in that moment a way to end the command)
        return watcher.stop
    source.bus.subscribe(show)
    source.watch()
    return lambda: None


def size_on_disk(location: str) -> int | None:
    """Bytes of the database file at `location` (any source's), or None for a server or a missing file."""
    path = sqlite.path_of(to_url(location))
    return path.stat().st_size if path is not None and path.is_file() else None
