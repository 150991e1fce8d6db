"""The generic table follower: a runtime's declarations in, the native store's `Change` events out.

`prime` records where every declared table stands; each `poll` reads only what is
past the marks (see `tables.py` for the two kinds of mark), asks the table's
`changes` function what each changed row means, and returns one batch with
parents before their children. A deletion the runtime's schema cannot name, or
a database revision that moved under no declared row, becomes one `reset`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection

from agentdesk.store.persistence.bus import Change, ChangeOp, EntityKind
from agentdesk.store.sources.follow.tables import AppendOnly, Deletes, Follow, RowEvent, Seen, Table, UpdatedInPlace
from agentdesk.store.sources.sql import Row, marks, one, rows

READ_BATCH = 5_000
"""New rows of an append-only table are read this many at a time, so a burst never loads at once."""

LEVELS = {kind: n for n, kind in enumerate((
    EntityKind.PROJECT, EntityKind.TASK, EntityKind.SESSION, EntityKind.AGENT, EntityKind.RUN, EntityKind.SPAN,
    EntityKind.APPROVAL, EntityKind.TOOL_CALL, EntityKind.CONTEXT_GROUP, EntityKind.CONTEXT_ITEM,
    EntityKind.CONTEXT, EntityKind.COMPACTION))}
"""Batch order: a subscriber meets a parent before any of its children, whatever the table order."""


@dataclass
class _Mark:
    rid: int = 0
    stamp: Any = None
    count: int | None = None
    remembered: dict[Any, tuple[Any, ...]] = field(default_factory=dict)
    """key → signature of the rows the next poll compares against."""
    kept: dict[Any, Row] = field(default_factory=dict)
    """key → last row read, for rows re-read by key (kept, or every row of a whole table)."""
    due: float | None = None


class TableFollower:
    """Follows the declared tables of one database; thread-safe (one poll at a time)."""

    def __init__(self, follow: Follow, present: frozenset[str]) -> None:
        self.origin = follow.origin
        self.tables: tuple[Table, ...] = tuple(t for t in follow.tables if t.table in present)
        self._revision_sql = follow.revision if follow.revision_table in present else None
        self._lock = threading.Lock()
        self._marks: list[_Mark] | None = None
        self._revision: Any = None
        self._lookups_of = follow.lookups
        self._lookups: Any = None
        self.seen = Seen()

    # -- the two entry points ----------------------------------------------------------------
    def prime(self, conn: Connection) -> None:
        """Remember where every table stands now; what exists already is never announced."""
        with self._lock:
            self.seen = Seen()
            self._marks = [_Mark() for _ in self.tables]
            self._lookups = None if self._lookups_of is None else self._lookups_of(conn)
            for table, mark in zip(self.tables, self._marks, strict=True):
                self._read(conn, table, mark, live=False)
            self._revision = self._read_revision(conn)

    def poll(self, conn: Connection) -> list[Change]:
        """What changed since the last poll (or priming), parents first; [] on the first, priming call."""
        if self._marks is None:
            self.prime(conn)
            return []
        with self._lock:
            assert self._marks is not None
            changes: list[Change] = []
            reset = False
            self._lookups = None if self._lookups_of is None else self._lookups_of(conn)
            for table, mark in zip(self.tables, self._marks, strict=True):
                found, lost = self._read(conn, table, mark, live=True)
                changes += found
                reset = reset or lost
            revision = self._read_revision(conn)
            moved = revision is not None and revision != self._revision
            self._revision = revision
            if reset or (moved and not changes):
                return [Change(EntityKind.ALL, ChangeOp.RESET, "*", origin=self.origin, at=time.time())]
            ordered = sorted(changes, key=lambda c: LEVELS.get(c.entity, len(LEVELS)))
            return [c if c.origin else replace(c, origin=self.origin) for c in ordered]

    def due(self) -> bool:
        """A kept row's deadline passed: poll although nothing was committed."""
        now = time.time()
        with self._lock:
            return self._marks is not None and any(m.due is not None and m.due <= now for m in self._marks)

    # -- one table ---------------------------------------------------------------------------
    def _read(self, conn: Connection, table: Table, mark: _Mark, *, live: bool) -> tuple[list[Change], bool]:
        if isinstance(table, AppendOnly):
            return self._appended(conn, table, mark, live)
        return self._updated(conn, table, mark, live)

    def _appended(self, conn: Connection, table: AppendOnly, mark: _Mark, live: bool) -> tuple[list[Change], bool]:
        found = one(conn, f"SELECT ifnull(max(rowid), 0) AS top, count(*) AS n FROM {table.table}")
        top, count = (found or {}).get("top", 0), (found or {}).get("n", 0)
        before, hw = mark.count, mark.rid
        mark.rid, mark.count = top, count
        if not live:
            return [], False
        lost = table.deletes is Deletes.RESET and before is not None and (count < before or top < hw)
        out: list[Change] = []
        event = RowEvent(ChangeOp.INSERT, None, self.seen, True, self._lookups)
        while hw < top:
            batch = rows(conn, f"SELECT x.rowid AS rid, {table.columns} FROM {table.table} x {table.joins} "
                               f"WHERE x.rowid > :hw AND x.rowid <= :top ORDER BY x.rowid LIMIT {READ_BATCH}",
                         hw=hw, top=top)
            if not batch:
                break
            for row in batch:
                out.extend(table.changes(row, event))
            hw = batch[-1]["rid"] if len(batch) == READ_BATCH else top
        return out, lost

    def _updated(self, conn: Connection, table: UpdatedInPlace, mark: _Mark,
                 live: bool) -> tuple[list[Change], bool]:
        source = table.source or f"FROM {table.table} x {table.joins}"
        where, params = self._where(conn, table, mark, source, live)
        found = rows(conn, f"SELECT {self._select(table)} {source}{where}", **params)
        now = time.time()
        lost = False
        if table.deletes is Deletes.RESET and not table.whole:
            count = one(conn, f"SELECT count(*) AS n FROM {table.table}")
            before, mark.count = mark.count, (count or {}).get("n", 0)
            lost = live and before is not None and (mark.count or 0) < before
        out: list[Change] = []
        seen_keys = set()
        for row in found:
            key = row["key"]
            seen_keys.add(key)
            sig = self._signature(table, row, now)
            before_sig = mark.remembered.get(key)
            if before_sig == sig:
                continue
            inserted = (table.rowid is not None and row["rid"] > mark.rid) or (table.whole and before_sig is None)
            if live or table.prime_all or table.whole:
                was = None if before_sig is None else dict(zip(table.signature, before_sig, strict=False))
                event = RowEvent(ChangeOp.INSERT if inserted else ChangeOp.UPDATE, was, self.seen, live,
                                 self._lookups)
                changes = list(table.changes(row, event))
                if live:
                    out += changes
        gone = [k for k in (mark.remembered if table.whole else mark.kept) if k not in seen_keys]
        if live and gone and table.deletes is Deletes.RESET and table.whole:
            lost = True
        if live and table.deletes is Deletes.DELETE:
            for key in gone:
                if key in mark.kept:
                    out.extend(table.changes(mark.kept[key], RowEvent(ChangeOp.DELETE, None, self.seen, True,
                                                                          self._lookups)))
        self._remember(table, mark, found, now)
        return out, lost

    @staticmethod
    def _select(table: UpdatedInPlace) -> str:
        columns = [f"{table.key} AS key"]
        if table.stamp is not None:
            columns.append(f"{table.stamp} AS stamp")
        if table.rowid is not None:
            columns.append(f"{table.rowid} AS rid")
        if table.keep is not None:
            columns.append(f"CASE WHEN {table.keep} THEN 1 ELSE 0 END AS kept")
        if table.due is not None:
            columns.append(f"{table.due} AS due")
        return ", ".join([*columns, table.columns])

    @staticmethod
    def _where(conn: Connection, table: UpdatedInPlace, mark: _Mark, source: str,
               live: bool) -> tuple[str, dict[str, Any]]:
        """Which rows this read needs: past the marks, or (priming) at them; none for a whole table."""
        if table.whole or (not live and table.prime_all):
            return "", {}
        conditions: list[str] = []
        params: dict[str, Any] = {}
        if not live:  # priming: the marks first, then only the rows at them
            tops = one(conn, f"SELECT {'max(' + table.rowid + ')' if table.rowid else 'NULL'} AS rid, "
                             f"{'max(' + table.stamp + ')' if table.stamp else 'NULL'} AS stamp {source}") or {}
            mark.rid, mark.stamp = int(tops.get("rid") or 0), tops.get("stamp")
        if table.rowid is not None:
            conditions.append(f"{table.rowid} > :rid")
            params["rid"] = mark.rid - table.window
        if table.stamp is not None and mark.stamp is not None:
            conditions.append(f"{table.stamp} {'>=' if live else '='} :stamp")
            params["stamp"] = mark.stamp
        elif table.stamp is not None and live:
            conditions.append(f"{table.stamp} IS NOT NULL")
        if table.keep is not None:
            if live:
                placeholders, bound = marks("k", list(mark.kept))
                conditions.append(f"{table.key} IN ({placeholders})")
                params.update(bound)
            else:
                conditions.append(f"({table.keep})")
        return (" WHERE " + " OR ".join(conditions)) if conditions else " WHERE 0", params

    @staticmethod
    def _signature(table: UpdatedInPlace, row: Row, now: float) -> tuple[Any, ...]:
        sig = tuple(row[c] for c in table.signature)
        if table.stamp is not None:
            sig += (row["stamp"],)
        if table.due is not None:
            sig += (row["due"] is not None and row["due"] <= now,)
        return sig

    def _remember(self, table: UpdatedInPlace, mark: _Mark, found: list[Row], now: float) -> None:
        """The next poll's baseline: rows at the newest stamp, in the window, kept, or all of a whole table."""
        if table.rowid is not None:
            mark.rid = max([mark.rid, *(r["rid"] for r in found if r["rid"] is not None)])
        if table.stamp is not None:
            stamps = [r["stamp"] for r in found if r["stamp"] is not None]
            if stamps:
                mark.stamp = max([s for s in (mark.stamp, *stamps) if s is not None])
        remembered: dict[Any, tuple[Any, ...]] = {}
        kept: dict[Any, Row] = {}
        for row in found:
            at_stamp = table.stamp is not None and row["stamp"] == mark.stamp
            in_window = table.rowid is not None and table.window > 0 and row["rid"] > mark.rid - table.window
            if table.whole or at_stamp or in_window or row.get("kept"):
                remembered[row["key"]] = self._signature(table, row, now)
            if table.whole or row.get("kept"):
                kept[row["key"]] = row
        mark.remembered, mark.kept = remembered, kept
        dues = [r["due"] for r in kept.values() if r.get("due") is not None and r["due"] > now]
        mark.due = min(dues) if dues else None

    def _read_revision(self, conn: Connection) -> Any:
        if self._revision_sql is None:
            return None
        found = one(conn, self._revision_sql)
        return None if found is None else next(iter(found.values()))
