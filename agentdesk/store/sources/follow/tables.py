"""How a runtime declares the tables the follower watches, and what a row change means.

A foreign runtime keeps no change log, so each table is followed by the cheapest
mark that is still correct for how the runtime writes it:

- `AppendOnly`: rows are only ever added; the greatest rowid seen is the whole mark
  (new rows are read in batches, so a burst never loads at once).
- `UpdatedInPlace`: rows change where they are. New rows are found by rowid (when
  declared), changed rows by their change stamp (`stamp >= newest seen`), and the
  rows *at* the newest stamp, inside a rowid `window`, or still `keep`-ing (active,
  pending) are remembered with their row signature (the declared columns): a row
  whose signature differs from the remembered one changed, even within the same
  millisecond or with no stamp at all. Without a stamp and a rowid the table is
  small and compared whole.

Each declaration names a plain function (`changes`) that turns one changed row into
`Change` events; it gets the row, the operation and the row's remembered signature,
and a `Seen` memory for "the first time this tree node appears".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection

from agentdesk.store.persistence.bus import Change, ChangeOp
from agentdesk.store.sources.sql import Row


class Deletes(StrEnum):
    """What a deleted row means; runtimes rarely delete, so a purge usually reloads everything."""

    IGNORE = "ignore"
    RESET = "reset"
    """The table's row count fell (or a small table lost a key): one `reset` change, every view reloads."""
    DELETE = "delete"
    """A remembered (kept) row vanished: its `changes` function is called with `ChangeOp.DELETE`."""


class Seen:
    """What the follower has announced already: "is this the first time?" per kind and id.

    Filled while priming too, so nodes that existed before watching started are
    never announced as inserts.
    """

    def __init__(self) -> None:
        self._ids: dict[str, set[str]] = {}

    def first(self, kind: str, key: str) -> bool:
        """True exactly once per (kind, key); remembers it."""
        known = self._ids.setdefault(kind, set())
        if key in known:
            return False
        known.add(key)
        return True

    def has(self, kind: str, key: str) -> bool:
        return key in self._ids.get(kind, set())


@dataclass(frozen=True, slots=True)
class RowEvent:
    """One changed row as the `changes` function sees it."""

    op: ChangeOp
    before: Mapping[str, Any] | None
    """The row's signature columns as last remembered (None: a row not remembered, e.g. new)."""
    seen: Seen
    live: bool
    """False while priming: the function should only fill `seen` (its changes are dropped)."""
    lookups: Any = None
    """What the runtime's `Follow.lookups` read once for this poll (e.g. maka's tree topology)."""


RowChanges = Callable[[Row, RowEvent], Iterable[Change]]


@dataclass(frozen=True, slots=True)
class AppendOnly:
    """A table rows are only added to: followed by the greatest rowid seen."""

    table: str
    columns: str
    """The SELECT list (without SELECT), aliasing the table as `x`."""
    changes: RowChanges
    joins: str = ""
    """Joins after `FROM <table> x`, for the parents of each row."""
    deletes: Deletes = Deletes.IGNORE


@dataclass(frozen=True, slots=True)
class UpdatedInPlace:
    """A table whose rows change in place: followed by stamp, rowid and row signature."""

    table: str
    columns: str
    """The SELECT list (without SELECT), aliasing the table as `x`; holds every `signature` column."""
    changes: RowChanges
    key: str = "x.id"
    signature: tuple[str, ...] = ()
    stamp: str | None = None
    """SQL of the row's change time (e.g. `x.updated_at`), sortable as stored."""
    rowid: str | None = "x.rowid"
    """SQL of the row's rowid: rows above the mark are inserts. None when the table has none to trust."""
    keep: str | None = None
    """SQL condition of rows to re-read by key every poll (not finished yet: their change may set no stamp)."""
    window: int = 0
    """Re-read the newest `window` rowids every poll (rows changed shortly after they were written)."""
    due: str | None = None
    """SQL of the Unix time when a kept row changes meaning with no commit (a deadline): polled then."""
    joins: str = ""
    deletes: Deletes = Deletes.IGNORE
    source: str | None = None
    """A whole `FROM ...` clause instead of `FROM <table> x <joins>` (a small derived set, compared whole)."""
    prime_all: bool = False
    """Priming reads every row (so `changes` fills `Seen` with what exists), not just where the marks stand."""

    @property
    def whole(self) -> bool:
        """No stamp and no rowid: the table is small and compared row by row each poll."""
        return self.stamp is None and self.rowid is None


Table = AppendOnly | UpdatedInPlace


@dataclass(frozen=True, slots=True)
class Follow:
    """Everything a runtime declares for the follower."""

    origin: str
    """`Change.origin` of the events (the runtime's name)."""
    tables: tuple[Table, ...]
    revision: str | None = None
    """SQL of a database-wide revision; when it moves and no declared row changed, one reset."""
    revision_table: str | None = None
    """The table `revision` reads (the check is skipped on a database without it)."""
    lookups: Callable[[Connection], Any] | None = None
    """Read once per poll, before the tables, and handed to every `changes` call (`RowEvent.lookups`)."""
