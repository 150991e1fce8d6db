"""The maka source: its reads, its one write (settling a permission) and what it cannot do.

The class only assembles the mixins and states, in maka's terms, why each command
agentdesk has elsewhere is absent here. Schema version: `open_source` detects maka by
its tables and refuses any `PRAGMA user_version` other than 11 (the version this
mapping was written against, and the only one maka's own read-only open accepts at
that commit); the constructor checks again, for callers that build the source directly.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.source import Capability
from agentdesk.store.sources.maka.approvals import ApprovalQueries
from agentdesk.store.sources.maka.context import ContextQueries
from agentdesk.store.sources.maka.spans import SpanQueries
from agentdesk.store.sources.maka.tree import TreeQueries
from agentdesk.store.sources.maka.watch import WatchMixin

SUPPORTED_USER_VERSIONS = frozenset({11})

IMMUTABLE = ("maka's context is its runtime event ledger, whose events are immutable once committed "
             "(re-inserting an event with other content is refused by the runtime)")


class MakaSource(WatchMixin, TreeQueries, SpanQueries, ApprovalQueries, ContextQueries):
    """A maka `runtime.sqlite`, opened in place; read-only unless writes were allowed."""

    kind = "maka"
    writable_capabilities = frozenset({Capability.APPROVE, Capability.DENY})
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "A maka permission answer carries only allow or deny; the tool call's "
                                   "arguments cannot be changed.",
        Capability.EXPIRE: "maka has no approval deadlines; only its host closes a request (closure "
                           "'timed_out'), and agentdesk does not write closures for it.",
        Capability.SET_VISIBILITY: f"{IMMUTABLE}; model visibility is a field of each event, fixed when "
                                   "it was written.",
        Capability.LOCK: "maka has no notion of locking context items.",
        Capability.EDIT_ITEM: f"{IMMUTABLE}.",
        Capability.COMPACT: "maka compacts history only inside a running turn (history_compact "
                            "checkpoints); there is no stored command to request one.",
        Capability.UNDO_COMPACTION: "maka compaction checkpoints are immutable and record no covered items, "
                                    "so there is nothing to undo.",
    }
    notes = ("maka's context is read-only and its approvals have no deadlines. An allow or deny written "
             "here is the outcome row maka's interaction store reads, but a hosted maka runtime holds the "
             "pending request in memory and may not notice an outcome written by another process: settle "
             "through the maka host when one is running. The operator's name and reason are not stored "
             "(maka records only reviewer 'user').")

    def __init__(self, path: Path, *, version: str | None = None, allow_writes: bool = False,
                 busy_timeout_s: float = 5.0) -> None:
        super().__init__(path, version=version, allow_writes=allow_writes, busy_timeout_s=busy_timeout_s)
        try:
            with self.reading() as conn:
                found = int(conn.execute(text("PRAGMA user_version")).scalar_one())
        except Exception:
            self.engine.dispose()
            raise
        if found not in SUPPORTED_USER_VERSIONS:
            self.engine.dispose()
            raise StoreUnavailable(f"{path} is a maka runtime store of schema version {found}; agentdesk "
                                   f"reads maka schema version(s) {sorted(SUPPORTED_USER_VERSIONS)} only.")
        self.version = str(found)
