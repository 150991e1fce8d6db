"""A run's spans as columns for the timeline: numpy arrays and shared strings, not row objects.

A million-span run read through the ORM costs seconds of row handling and
enough short-lived objects to make Python's collector stop every thread for
tenths of a second. Our own schema is therefore read with the raw DB-API
cursor: one packed statement per run (`_packed`), numbers as integers. A run
whose rows are (mostly) contiguous in the table, as imports and a lone runtime
write them, is read by its rowid range and sorted by start in numpy; runs
interleaved with others go through the `spans_by_run` index, already in start
order. Measured at a million spans (warm cache): the index path costs SQLite a
table lookup per row (~0.8 s CPU of scan vs ~0.3 s for the range);
`mmap_size`/`cache_size` pragmas, parallel connections (at a load of 2-5 on 2
cores) and the parent's rowid by a self-join (+1.3 s) did not pay. Names,
kinds and statuses repeat, so each distinct string is kept once. Any other
source goes through its `span_table` (the `Source` seam), converted the same way.

`first` asks for just the earliest spans: the timeline draws those at once and
lays out the rest after.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import zip_longest
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np

from agentdesk.store.native import NativeSource
from agentdesk.store.source import Source, SpanTable
from agentdesk.store.sqlite import lenient_text

CHUNK = 16_384
T = TypeVar("T")
_DTYPES = (np.float64, np.float64, np.int64, np.int64, np.float64)
"""start, end, input tokens, output tokens, cost."""
_COLUMNS = ("id, parent_span_id, kind, name, status, started_at, ended_at, input_tokens, output_tokens, "
            "cost_usd")


@dataclass(frozen=True, slots=True)
class SpanColumns:
    """Span columns in start order; times are seconds since the epoch, `end` NaN while open.

    `total` is how many spans the run has: more than `len(self)` when only the
    first spans were asked for.
    """

    ids: list[str]
    parent_ids: list[str | None]
    kinds: list[str]
    names: list[str]
    statuses: list[str]
    start: np.ndarray
    end: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    cost: np.ndarray
    total: int

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def complete(self) -> bool:
        return len(self.ids) >= self.total


class _Builder:
    """Appends row chunks to the columns: strings shared per distinct value, numbers as arrays."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.parent_ids: list[str | None] = []
        self.kinds: list[str] = []
        self.names: list[str] = []
        self.statuses: list[str] = []
        self.numbers: list[list[np.ndarray]] = [[], [], [], [], []]
        self._shared: dict[str, str] = {}

    def add(self, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.add_columns(list(zip(*rows, strict=True)))

    def add_columns(self, cols: Sequence[Sequence[Any]]) -> None:
        if not cols[0]:
            return
        share = self._shared.setdefault
        self.ids.extend(cols[0])
        self.parent_ids.extend(cols[1])
        self.kinds.extend([share(k, k) for k in cols[2]])
        self.names.extend([share(n, n) for n in cols[3]])
        self.statuses.extend([share(s, s) for s in cols[4]])
        for out, values, dtype in zip(self.numbers, cols[5:], _DTYPES, strict=True):
            array = np.array(values, dtype=np.float64)  # None becomes NaN: an open end, or a missing count
            out.append(array if dtype is np.float64 else np.nan_to_num(array, copy=False).astype(dtype))

    def columns(self, total: int | None = None) -> SpanColumns:
        start, end, input_tokens, output_tokens, cost = (
            np.concatenate(parts) if parts else np.zeros(0, dtype)
            for parts, dtype in zip(self.numbers, _DTYPES, strict=True))
        return SpanColumns(self.ids, self.parent_ids, self.kinds, self.names, self.statuses, start, end,
                           input_tokens, output_tokens, cost, total=len(self.ids) if total is None else total)


def span_columns(source: Source, run_id: str, first: int | None = None) -> SpanColumns:
    """A run's span columns (see the module docstring); `first`: only the earliest that many."""
    if isinstance(source, NativeSource):
        return _native(source, run_id, first)
    return from_table(source.span_table(run_id))


def from_table(table: SpanTable) -> SpanColumns:
    """A `SpanTable` (any source, or a live view's changed rows) as columns, in start order."""
    builder = _Builder()
    order = np.argsort(np.asarray(table.starts, dtype=np.float64), kind="stable").tolist()
    builder.add_columns([take(c, order) for c in (table.ids, table.parent_ids, table.kinds, table.names,
                                                  table.statuses, table.starts, table.ends, table.input_tokens,
                                                  table.output_tokens, table.costs)])
    return builder.columns()


def take(seq: Sequence[T], indices: list[int]) -> list[T]:
    """`[seq[i] for i in indices]`, `SLICE` at a time: one C call over a million values would hold the
    GIL (and freeze the GUI thread) for its whole duration, a slice only for milliseconds."""
    out: list[T] = []
    for a in range(0, len(indices), SLICE):
        part = indices[a:a + SLICE]
        out.extend([seq[part[0]]] if len(part) == 1 else itemgetter(*part)(seq))
    return out


class _Decoded(dict[bytes, str]):
    """Distinct TEXT values decoded once each (invalid UTF-8 with replacement marks, as the store reads it)."""

    def __missing__(self, raw: bytes) -> str:
        text = self[raw] = lenient_text(raw)
        return text


def _texts(values: Sequence[bytes | None]) -> list[str]:
    """Unique strings (ids): decoded in C, a chunk at a time; lenient only for a chunk that needs it."""
    try:
        return list(map(bytes.decode, values))  # type: ignore[arg-type]
    except (UnicodeDecodeError, TypeError):
        return [lenient_text(v) if v is not None else "" for v in values]


_SEP = "\x1f"
"""Between packed TEXT values (the ASCII unit separator): a value holding it makes the counts differ,
and the read falls back to rows."""
_NONE = -(2**63)
"""A NULL end (an open span) in the packed integers: no rebased time in nanoseconds is this small."""
_NS, _PICO = 1e9, 1e12
"""Times travel as integer nanoseconds since the run's first start, costs as integer picodollars."""
_SCALED_BELOW = 9e18
"""Packed integers stay below this (int64); a run with a wilder value reads by rows."""
_PACKED = ("SELECT count(*), max(abs(started_at - :t0)), max(abs(ended_at - :t0)), max(abs(cost_usd)), "
           "group_concat(id, char(31)), "
           "group_concat(ifnull(parent_span_id, ''), char(31)), group_concat(ifnull(kind, ''), char(31)), "
           "group_concat(ifnull(name, ''), char(31)), group_concat(ifnull(status, ''), char(31)), "
           "group_concat(CAST(round((started_at - :t0) * 1e9) AS INTEGER), ','), "
           "group_concat(ifnull(CAST(round((ended_at - :t0) * 1e9) AS INTEGER), :none), ','), "
           "group_concat(CAST(ifnull(input_tokens, 0) AS INTEGER), ','), "
           "group_concat(CAST(ifnull(output_tokens, 0) AS INTEGER), ','), "
           "group_concat(CAST(round(ifnull(cost_usd, 0) * 1e12) AS INTEGER), ',') "
           "FROM (SELECT id, parent_span_id, kind, name, status, started_at, "
           "ended_at, input_tokens, output_tokens, cost_usd FROM spans WHERE {where})")
_BY_INDEX = "run_id = :run ORDER BY started_at, rowid{limit}"
"""Through `spans_by_run` (run_id, started_at, rowid): in start order, but one table lookup per row."""
_BY_ROWID = "rowid BETWEEN :lo AND :hi AND +run_id = :run"
"""A scan of the run's rowid range (`+` keeps the planner off the index): the rows in insertion order,
sorted after. Where a run's rows are contiguous (imports write a trace at once; a lone runtime too) this
reads the table pages in order instead of looking each row up: 2-3x less SQLite time at a million spans."""
DENSE = 0.5
"""Scan the rowid range when at least this share of the rows in it are the run's (else the index)."""
ROWID_SLICE = 65_536
"""Rowids per packed statement on the rowid-range path (see `_packed`)."""
PARALLEL_OVER = 200_000
"""A run with at least this many spans is read on two connections at once (see `_helper`)."""
SLICE = 65_536
"""Values per step of a Python loop over a million (see `take`)."""


@dataclass(frozen=True, slots=True)
class _Extent:
    """The run's span count, first start and rowid range: one pass over its `spans_by_run` entries."""

    total: int
    t0: float
    lo: int
    hi: int

    def dense(self) -> bool:
        return self.total > 0 and self.total >= DENSE * (self.hi - self.lo + 1)


def _extent(cursor: Any, run_id: str, ranged: bool = True) -> _Extent:
    """`ranged=False` skips the rowid range (0, 0): reading the first spans goes through the index
    anyway, and the range costs SQLite ~4x the count (~0.2 s against ~0.05 s at a million spans)."""
    if not ranged:
        count, t0 = cursor.execute("SELECT count(*), min(started_at) FROM spans WHERE run_id = ?",
                                   (run_id,)).fetchone()
        lo = hi = 0
    else:
        count, t0, lo, hi = cursor.execute("SELECT count(*), min(started_at), min(rowid), max(rowid) FROM spans "
                                           "WHERE run_id = ?", (run_id,)).fetchone()
    return _Extent(int(count), float(t0) if isinstance(t0, (int, float)) else 0.0, int(lo or 0), int(hi or 0))


def _packed(cursor: Any, run_id: str, first: int | None, extent: _Extent, by_rowid: bool | None = None,
            helper: Helper | None = None) -> SpanColumns | None:
    """The run's columns from packed statements: SQLite joins each column into one string, which
    Python splits and numpy parses in C. Numbers travel as integers (times rebased to the run's first
    start, in nanoseconds; costs in picodollars): SQLite prints and numpy parses an integer ~10x faster
    than a float. A million spans make a few objects per column, not millions of row tuples.

    The whole run of contiguous rows is read by its rowid range (see `_BY_ROWID`), one statement per
    `ROWID_SLICE` rowids: SQLite works without the GIL, and each slice's Python part (splitting ~65k
    values per column) holds it for milliseconds, so the GUI thread keeps running through the read.
    One statement over a million rows made a split of a million values per column, a GIL hold of up
    to ~0.25 s each (the GUI froze that long, repeatedly). With a `helper` (see `_native`) every other
    slice is read on a second connection beside this one. None when a value does not fit the packing
    (the row path reads it then). `by_rowid` forces the access path (tests compare both).
    """
    if extent.total == 0:
        return None
    if by_rowid is None:
        by_rowid = first is None and extent.dense()
    if by_rowid:
        where = _BY_ROWID
        ranges = [(lo, min(lo + ROWID_SLICE - 1, extent.hi)) for lo in range(extent.lo, extent.hi + 1, ROWID_SLICE)]
    else:
        where = _BY_INDEX.format(limit="" if first is None else f" LIMIT {int(first)}")
        ranges = [(extent.lo, extent.hi)]
    job = _Job(_PACKED.format(where=where), run_id, extent.t0, {}.setdefault)
    if helper is not None and len(ranges) > 1:
        with ThreadPoolExecutor(1, thread_name_prefix="agentdesk-read") as pool:
            theirs_future = pool.submit(helper, job, ranges[1::2])
            mine = _read(cursor, job, ranges[0::2])
            theirs = theirs_future.result()
        if mine is None or theirs is None:
            return None
        pieces = [p for pair in zip_longest(mine, theirs) for p in pair if p is not None]
    else:
        read = _read(cursor, job, ranges)
        if read is None:
            return None
        pieces = read
    texts: list[list[Any]] = [[], [], [], [], []]
    for piece in pieces:
        for out, column in zip(texts, piece.texts, strict=True):
            out.extend(column)
    start_ns, end_ns, input_tokens, output_tokens, cost_pico = (
        np.concatenate([p.numbers[k] for p in pieces]) if pieces else np.zeros(0, np.int64) for k in range(5))
    del pieces
    count = len(start_ns)
    if count == 0:
        return None
    if by_rowid:  # insertion order: put it in start order (ties by rowid, as the index gives)
        order = np.argsort(start_ns, kind="stable")
        if (order != np.arange(count)).any():
            picks = order.tolist()
            texts = [take(column, picks) for column in texts]
            start_ns, end_ns, input_tokens, output_tokens, cost_pico = (
                a[order] for a in (start_ns, end_ns, input_tokens, output_tokens, cost_pico))
    ids, parents, kinds, names, statuses = texts
    start = start_ns / _NS
    start += extent.t0
    end = np.where(end_ns == _NONE, np.nan, end_ns / _NS)
    end += extent.t0
    return SpanColumns(ids, parents, kinds, names, statuses, start, end, input_tokens, output_tokens,
                       cost_pico / _PICO, total=max(extent.total, count))


@dataclass(frozen=True, slots=True)
class _Job:
    """One packed read: the statement, its fixed arguments and the strings shared across its slices."""

    statement: str
    run_id: str
    t0: float
    share: Callable[[str, str], str]
    """`dict.setdefault` of one dict: atomic under the GIL, so both reading threads may use it."""


@dataclass(frozen=True, slots=True)
class _Piece:
    """One slice's columns: ids, parent ids (None for a root), kinds, names, statuses; five integer arrays."""

    texts: list[list[Any]]
    numbers: list[np.ndarray]


Helper = Callable[[_Job, list[tuple[int, int]]], "list[_Piece] | None"]
"""Reads some slices of a job on a connection of its own (see `_native`)."""


def _read(cursor: Any, job: _Job, ranges: list[tuple[int, int]]) -> list[_Piece] | None:
    """The slices of these rowid ranges (one range on the index path), in order; None when one does not pack."""
    pieces = []
    for lo, hi in ranges:
        args = {"run": job.run_id, "t0": job.t0, "lo": lo, "hi": hi, "none": _NONE}
        try:
            row = cursor.execute(job.statement, args).fetchone()
        except sqlite3.Error:  # too big for one value (huge names): rows instead
            return None
        piece = _unpack(row, job.share)
        del row
        if piece is None:
            return None
        pieces.append(piece)
    return pieces


def _unpack(row: Sequence[Any], share: Callable[[str, str], str]) -> _Piece | None:
    """One packed statement's answer as columns; None when a value does not fit the packing (too far
    a time or cost, a separator inside a value)."""
    count = int(row[0])
    if count == 0:
        return _Piece([[], [], [], [], []], [np.zeros(0, np.int64)] * 5)
    if not all(isinstance(v, (int, float)) or v is None for v in row[1:4]):
        return None
    if max(row[1] or 0.0, row[2] or 0.0) * _NS >= _SCALED_BELOW or (row[3] or 0.0) * _PICO >= _SCALED_BELOW:
        return None
    texts: list[list[Any]] = []
    for raw in row[4:9]:
        text = raw.decode() if isinstance(raw, bytes) and raw.isascii() else lenient_text(raw or b"")
        parts = text.split(_SEP)
        if len(parts) != count:
            return None
        texts.append(parts)
    texts[1] = [p or None for p in texts[1]]
    texts[2:] = [list(map(share, column, column)) for column in texts[2:]]  # each distinct string kept once
    numbers = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for raw in row[9:]:
            try:
                values = np.fromstring(raw, dtype=np.int64, sep=",")  # text mode: not deprecated
            except (ValueError, DeprecationWarning, TypeError):
                return None
            if len(values) != count:
                return None
            numbers.append(values)
    return _Piece(texts, numbers)


def _bytes_cursor(session: Any) -> tuple[sqlite3.Connection, Any]:
    """The session's own DB-API connection with TEXT read as bytes (restore `text_factory` after):
    the connection's lenient decoder is a Python call per value (five million at a million spans, ~3 s);
    here each packed column or id decodes in C and repeated strings once each."""
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    factory = raw.text_factory
    raw.text_factory = bytes
    return raw, factory


def _native(source: NativeSource, run_id: str, first: int | None) -> SpanColumns:
    with source.store.reading() as session:
        raw, factory = _bytes_cursor(session)
        cursor = raw.cursor()
        try:
            extent = _extent(cursor, run_id, ranged=first is None)
            helper = _helper(source, extent) if first is None and extent.total >= PARALLEL_OVER else None
            packed = _packed(cursor, run_id, first, extent, helper=helper)
        finally:
            cursor.close()
            raw.text_factory = factory
        return packed if packed is not None else _rows(session, run_id, first)


def _helper(source: NativeSource, extent: _Extent) -> Helper:
    """Reads slices on a second connection: its own read transaction, so a snapshot of its own. ..."""

    def read(job: _Job, ranges: list[tuple[int, int]]) -> list[_Piece] | None:
        with source.store.reading() as session:
            raw, factory = _bytes_cursor(session)
            cursor = raw.cursor()
            try:
                return _read(cursor, job, ranges)
            finally:
                cursor.close()
                raw.text_factory = factory

    return read


def _rows(session: Any, run_id: str, first: int | None) -> SpanColumns:
    """The row by row read: for runs whose values do not pack (see `_packed`)."""
    limit = "" if first is None else f" LIMIT {int(first)}"
    raw, factory = _bytes_cursor(session)
    cursor = raw.cursor()
    try:
        total = int(cursor.execute("SELECT count(*) FROM spans WHERE run_id = ?", (run_id,)).fetchone()[0])
        # `spans_by_run` (run_id, started_at, and the rowid every index ends with) yields the rows
        # in this order: no sort step, and the same order for both passes of one transaction
        order = f" FROM spans WHERE run_id = ? ORDER BY started_at, rowid{limit}"
        # Ids first, on their own: they are the strings kept. Read beside the other columns, each
        # kept id sat among a row's worth of short-lived objects, and the freed space around a
        # million of them stayed in the process (about 200 MB at a million spans).
        ids: list[str] = []
        cursor.execute("SELECT id" + order, (run_id,))
        while chunk := cursor.fetchmany(CHUNK):
            ids.extend(_texts([row[0] for row in chunk]))
        builder = _Builder()
        decoded = _Decoded()
        cursor.execute(f"SELECT {_COLUMNS.replace('id, ', 'NULL, ', 1)}" + order, (run_id,))
        while chunk := cursor.fetchmany(CHUNK):
            cols: list[Sequence[Any]] = list(zip(*chunk, strict=True))
            parents = [None if p is None else decoded[p] for p in cols[1]]
            cols[1:5] = [parents, *(list(map(decoded.__getitem__, c)) for c in cols[2:5])]
            builder.add_columns(cols)
        if len(builder.ids) != len(ids):  # cannot happen in one read transaction; never mix two reads
            raise RuntimeError("the run's spans changed between the two passes of one read")
        builder.ids = ids
    finally:
        cursor.close()
        raw.text_factory = factory
    return builder.columns(total)
