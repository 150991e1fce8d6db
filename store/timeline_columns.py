"""A run's spans as columns for the timeline: numpy arrays and coded strings, not row objects.

A million-span run read through the ORM costs seconds of row handling and
enough short-lived objects to make Python's collector stop every thread for
tenths of a second. Our own schema is therefore read with the raw DB-API
cursor: packed statements (`_packed`), numbers as integers. A run whose rows
are (mostly) contiguous in the table, as imports and a lone runtime write them,
is read by its rowid range, a slice at a time (`ROWID_SLICE`), and sorted by
start in numpy; runs interleaved with others go through the `spans_by_run`
index, already in start order. Measured at a million spans (warm cache): the
index path costs SQLite a table lookup per row (~0.8 s CPU of scan vs ~0.3 s
for the range); `mmap_size`/`cache_size` pragmas and the parent's rowid by a
self-join (+1.3 s) did not pay; a second connection reading every other slice
paid less than answering the next slice's SQL on a thread while this one
unpacks (`_prefetched`), and doubled the threads wanting the GIL. Kinds, names
and statuses repeat, so they are codes into their distinct strings (`Coded`);
the id → key dict the layout needs is built while reading (`SpanKeys`). Any
other source goes through its `span_table` (the `Source` seam), converted the
same way.

`first` asks for just the earliest spans: the timeline draws those at once and
lays out the rest after.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
import warnings
from collections.abc import Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any, TypeVar, overload

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


class _Table(dict[str, int]):
    """Distinct strings of one column and their codes; only grows, so every copy of a column may share it.

    A new string gets the next code under a lock: the runner (a re-layout) and the GUI thread (a span
    updated in place) may both add one to the table their layouts share.
    """

    def __init__(self) -> None:
        super().__init__()
        self.strings: list[str] = []
        self._lock = threading.Lock()

    def __missing__(self, value: str) -> int:
        with self._lock:
            code = self.get(value)
            if code is None:
                code = len(self.strings)
                self.strings.append(value)
                self[value] = code
            return code


class Gathered(Sequence[T]):
    """`values[index[i]]` for every i, read like a list: the one shape behind coded strings, a layout's
    ids and the rows shown. A million-entry column stays one numpy index array; `values` may grow
    (appended to in place) but never changes what an index already names."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[T], index: np.ndarray) -> None:
        self._values, self._index = values, index

    def __len__(self) -> int:
        return len(self._index)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        values = self._values
        if isinstance(i, slice):
            return [values[k] for k in self._index[i].tolist()]
        return values[int(self._index[i])]

    def __iter__(self) -> Iterator[T]:
        return map(self._values.__getitem__, self._index.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Coded(Gathered[str]):
    """A column of few distinct strings (kinds, statuses, names): a code per span and each string once.

    A million spans carry a few dozen names: as a list they are a million pointers that every
    reorder, copy and lookup walks in Python with the GIL held (the GUI thread waits meanwhile); as
    codes they are one int32 array that numpy reorders, inserts into and translates in C. Reads like
    a list of strings; `codes[i]` indexes `values`.
    """

    __slots__ = ("_table",)

    def __init__(self, codes: np.ndarray, table: _Table) -> None:
        super().__init__(table.strings, codes)
        self._table = table

    @property
    def codes(self) -> np.ndarray:
        return self._index

    @classmethod
    def of(cls, strings: Sequence[str], table: _Table | None = None) -> Coded:
        table = _Table() if table is None else table
        return cls(_encode(strings, table), table)

    @property
    def values(self) -> list[str]:
        """The distinct strings by code (a snapshot: the table may grow)."""
        return self._table.strings[:]

    def __setitem__(self, i: int, value: str) -> None:
        """In place, as `TimelineData.update` changes a span's name or status."""
        self.codes[i] = self._table[value]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Coded) and other._table is self._table:
            return bool(np.array_equal(self.codes, other.codes))
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __add__(self, other: Sequence[str]) -> Coded:
        """This column and then `other`, in this column's table."""
        if isinstance(other, Coded):
            translate = np.asarray([self._table[v] for v in other._table.strings[:]], dtype=np.int32)
            tail = translate[other.codes] if len(other) else other.codes
        else:
            tail = _encode(other, self._table)
        return Coded(np.concatenate((self.codes, tail)), self._table)

    def __repr__(self) -> str:
        return f"Coded({len(self)} of {len(self._table.strings)} distinct)"

    def taken(self, indices: np.ndarray) -> Coded:
        """The rows at these indices (numpy fancy indexing: no Python loop)."""
        return Coded(self.codes[indices], self._table)

    def inserted(self, at: int, value: str, room: int = 0) -> Coded:
        """A copy with `value` inserted before row `at` (this one unchanged; see `insert_at` for `room`)."""
        return Coded(insert_at(self.codes, at, self._table[value], room), self._table)

    def lookup(self, table: Mapping[str, int], default: int, dtype: type[np.integer[Any]]) -> np.ndarray:
        """`[table.get(s, default) for s in self]` as an array: one lookup per distinct string, then numpy."""
        values = self._table.strings[:]
        return np.asarray([table.get(v, default) for v in values], dtype=dtype)[self.codes] if len(self) else \
            np.zeros(0, dtype=dtype)


def insert_at(array: np.ndarray, at: int, value: Any, room: int = 0) -> np.ndarray:
    """A copy of a 1-D array with `value` before index `at`: two memory copies (`np.insert` costs ~3x
    as much in its general machinery, and a live append does a dozen of these at a million spans).
    With `room`, the copy is a view at the start of a buffer that many values longer."""
    n = len(array)
    out = np.empty(n + 1 + room, dtype=array.dtype)
    out[:at] = array[:at]
    out[at] = value
    out[at + 1:n + 1] = array[at:]
    return out[:n + 1] if room else out


def _encode(strings: Sequence[str], table: _Table) -> np.ndarray:
    """Codes of these strings in `table` (new ones added), `STEP` at a time."""
    n = len(strings)
    out = np.empty(n, dtype=np.int32)
    get = table.__getitem__
    for a in range(0, n, STEP):
        out[a:a + STEP] = np.fromiter(map(get, strings[a:a + STEP]), np.int32, min(STEP, n - a))
    return out


class Keys(dict[str, int]):
    """Span id → key. Keys only grow (`add` hands out the next), so layouts appended from one another
    share one dict (see `LaneIndex`)."""

    def __init__(self, next_key: int = 0) -> None:
        super().__init__()
        self.next_key = next_key

    def add(self, span_id: str) -> int:
        key = self.get(span_id)
        if key is None:
            key = self[span_id] = self.next_key
            self.next_key += 1
        return key


@dataclass(frozen=True, slots=True)
class SpanKeys:
    """The layout's id index, built while reading (the read's Python work runs beside SQLite's there):
    `keys` maps every span id to a key, `of_row` is each row's key, `parent_of_row` its parent's key
    (-1 for a root, or a parent the run does not have)."""

    keys: Keys
    of_row: np.ndarray
    parent_of_row: np.ndarray


@dataclass(frozen=True, slots=True)
class SpanColumns:
    """Span columns in start order; times are seconds since the epoch, `end` NaN while open.

    `total` is how many spans the run has: more than `len(self)` when only the
    first spans were asked for.
    """

    ids: list[str]
    parent_ids: list[str | None]
    kinds: Coded
    names: Coded
    statuses: Coded
    start: np.ndarray
    end: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    cost: np.ndarray
    total: int
    keys: SpanKeys | None = None
    """Span id → key and the parents as keys, when the read built them (see `SpanKeys`)."""

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def complete(self) -> bool:
        return len(self.ids) >= self.total


class _Builder:
    """Appends row chunks to the columns: ids as strings, kinds, names and statuses coded, numbers as arrays."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.parent_ids: list[str | None] = []
        self.kinds, self.names, self.statuses = (Coded(np.zeros(0, np.int32), _Table()) for _ in range(3))
        self.numbers: list[list[np.ndarray]] = [[], [], [], [], []]

    def add(self, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.add_columns(list(zip(*rows, strict=True)))

    def add_columns(self, cols: Sequence[Sequence[Any]]) -> None:
        if not cols[0]:
            return
        self.ids.extend(cols[0])
        self.parent_ids.extend(cols[1])
        self.kinds, self.names, self.statuses = (
            coded + values for coded, values in zip((self.kinds, self.names, self.statuses), cols[2:5], strict=True))
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
PREFETCH_OVER = 200_000
"""A run with at least this many spans has its slices' SQL answered ahead on a thread (`_prefetched`)."""
PREFETCH = 2
"""Answers the SQL thread may have waiting."""
SLICE = 65_536
"""Values per step of a Python loop over a million (see `take`)."""
STEP = 16_384
"""Values per C call in the read's Python part: each holds the GIL, and the GUI thread (painting a
live run's first spans meanwhile) waits for it. Measured at a million spans on 2 busy cores: calls
over a 65,536-row slice (25-70 ms each, a dict resize or the OS preempting the holder included) made
GUI stalls of 90-130 ms; these 16,384 make 55-65 ms. Smaller slices of rows would do the same but
fragment the heap (+30 MB resident)."""


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
            prefetch: bool = False) -> SpanColumns | None:
    """The run's columns from packed statements: SQLite joins each column into one string, which
    Python splits and numpy parses in C. Numbers travel as integers (times rebased to the run's first
    start, in nanoseconds; costs in picodollars): SQLite prints and numpy parses an integer ~10x faster
    than a float. A million spans make a few objects per column, not millions of row tuples.

    The whole run of contiguous rows is read by its rowid range (see `_BY_ROWID`), one statement per
    `ROWID_SLICE` rowids: SQLite works without the GIL, and each slice's Python part (splitting ~65k
    values per column) holds it for milliseconds, so the GUI thread keeps running through the read.
    One statement over a million rows made a split of a million values per column, a GIL hold of up
    to ~0.25 s each (the GUI froze that long, repeatedly). With `prefetch` SQLite answers the next
    slice's statement on a thread of its own while this one unpacks the last (see `_prefetched`).
    None when a value does not fit the packing (the row path reads it then). `by_rowid` forces the
    access path (tests compare both).
    """
    if extent.total == 0:
        return None
    if by_rowid is None:
        by_rowid = first is None and extent.dense()
    if by_rowid:
        where = _BY_ROWID
        ranges = [(k, lo, min(lo + ROWID_SLICE - 1, extent.hi))
                  for k, lo in enumerate(range(extent.lo, extent.hi + 1, ROWID_SLICE))]
    else:
        where = _BY_INDEX.format(limit="" if first is None else f" LIMIT {int(first)}")
        ranges = [(0, extent.lo, extent.hi)]
    job = _Job(_PACKED.format(where=where), run_id, extent.t0, (_Table(), _Table(), _Table()), Keys())
    read = _read(cursor, job, ranges, prefetch and len(ranges) > 1)
    if read is None:
        return None
    pieces = read
    ids: list[str] = []
    parents: list[str | None] = []
    for piece in pieces:
        ids.extend(piece.ids)
        parents.extend(piece.parents)
    key_of = np.concatenate([np.arange(p.base, p.base + len(p.ids)) for p in pieces] or [np.zeros(0, np.int64)])
    parent_key = np.concatenate([p.parent_keys for p in pieces] or [np.zeros(0, np.int64)])
    job.keys.next_key = int(key_of.max(initial=-1)) + 1
    missed = [i for i in np.flatnonzero(parent_key < 0).tolist() if parents[i] is not None]
    if missed:  # a parent read after its child (a later slice, or the other connection's)
        parent_key[missed] = [job.keys.get(parents[i], -1) for i in missed]  # type: ignore[arg-type]
    start_ns, end_ns, input_tokens, output_tokens, cost_pico = (
        np.concatenate([p.numbers[k] for p in pieces]) if pieces else np.zeros(0, np.int64) for k in range(5))
    kinds, names, statuses = (Coded(np.concatenate([p.codes[k] for p in pieces]) if pieces else np.zeros(0, np.int32),
                                    table) for k, table in enumerate(job.tables))
    del pieces
    count = len(start_ns)
    if count == 0:
        return None
    if by_rowid:  # insertion order: put it in start order (ties by rowid, as the index gives)
        order = np.argsort(start_ns, kind="stable")
        if (order != np.arange(count)).any():
            picks = order.tolist()
            ids, parents = take(ids, picks), take(parents, picks)
            key_of, parent_key = key_of[order], parent_key[order]
            kinds, names, statuses = (c.taken(order) for c in (kinds, names, statuses))
            start_ns, end_ns, input_tokens, output_tokens, cost_pico = (
                a[order] for a in (start_ns, end_ns, input_tokens, output_tokens, cost_pico))
    start = start_ns / _NS
    start += extent.t0
    end = np.where(end_ns == _NONE, np.nan, end_ns / _NS)
    end += extent.t0
    return SpanColumns(ids, parents, kinds, names, statuses, start, end, input_tokens, output_tokens,
                       cost_pico / _PICO, total=max(extent.total, count), keys=SpanKeys(job.keys, key_of, parent_key))


@dataclass(frozen=True, slots=True)
class _Job:
    """One packed read: the statement, its fixed arguments and the tables its slices code strings in."""

    statement: str
    run_id: str
    t0: float
    tables: tuple[_Table, _Table, _Table]
    """Kinds, names, statuses (thread-safe: both reading threads add to them)."""
    keys: Keys


@dataclass(frozen=True, slots=True)
class _Piece:
    """One slice's columns: ids, parent ids (None for a root), the codes of kinds, names and statuses,
    and five integer arrays."""

    base: int
    """The key of its first span (`Keys`): its index among the slices times `ROWID_SLICE`."""
    ids: list[str]
    parents: list[str | None]
    parent_keys: np.ndarray
    """The parent's key, -1 for a root or a parent not read yet."""
    codes: list[np.ndarray]
    numbers: list[np.ndarray]


def _read(cursor: Any, job: _Job, ranges: list[tuple[int, int, int]], prefetch: bool = False) -> list[_Piece] | None:
    """The slices of these (index, first rowid, last rowid) ranges (one range on the index path), in
    order; None when one does not pack (or SQLite cannot answer: a value too big, say)."""
    pieces = []
    answers = _prefetched(cursor, job, ranges) if prefetch else map(lambda r: _answer(cursor, job, r), ranges)
    try:
        for (index, _lo, _hi), row in zip(ranges, answers, strict=True):
            piece = _unpack(row, job, index * ROWID_SLICE) if row is not None else None
            del row
            if piece is None:
                return None
            pieces.append(piece)
    finally:
        if isinstance(answers, Generator):
            answers.close()  # stops the SQL thread before the cursor is used again
    return pieces


def _answer(cursor: Any, job: _Job, rowids: tuple[int, int, int]) -> Sequence[Any] | None:
    """One slice's packed statement answered; None when SQLite cannot (too big for one value: huge names)."""
    _index, lo, hi = rowids
    try:
        row: Sequence[Any] = cursor.execute(job.statement, {"run": job.run_id, "t0": job.t0, "lo": lo, "hi": hi,
                                                            "none": _NONE}).fetchone()
    except sqlite3.Error:
        return None
    return row


def _prefetched(cursor: Any, job: _Job,
                ranges: list[tuple[int, int, int]]) -> Generator[Sequence[Any] | None, None, None]:
    """The slices' answers, SQLite working on the next while the caller unpacks this one.

    SQLite runs without the GIL, so a thread that only steps the statements overlaps the caller's
    Python part (~1.3 s CPU at a million spans besides ~1.5 s of SQLite): on a free core the read
    takes the longer of the two instead of their sum. The same connection, so one read transaction
    and one snapshot; one statement at a time on it, never two. Two connections, one slice each in
    turn, paid no more on 2 busy cores and doubled the threads wanting the GIL (GUI stalls 100-180 ms
    instead of 70-100). At most `PREFETCH` answers wait (each ~12 MB at 65,536 rows).
    """
    answers: queue.Queue[tuple[Sequence[Any] | None]] = queue.Queue(PREFETCH)
    stop = threading.Event()

    def work() -> None:
        for rowids in ranges:
            if stop.is_set():
                return
            answers.put((_answer(cursor, job, rowids),))

    with ThreadPoolExecutor(1, thread_name_prefix="agentdesk-read-sql") as pool:
        done = pool.submit(work)
        try:
            for _ in ranges:
                (row,) = answers.get()
                yield row
        finally:
            stop.set()
            while not done.done():  # let a blocked put finish; the thread then sees `stop`
                with contextlib.suppress(queue.Empty):
                    answers.get(timeout=0.05)
            done.result()


def _unpack(row: Sequence[Any], job: _Job, base: int) -> _Piece | None:
    """One packed statement's answer as columns, its ids keyed from `base` on in `job.keys`; None when
    a value does not fit the packing (too far a time or cost, a separator inside a value)."""
    count = int(row[0])
    if count == 0:
        return _Piece(base, [], [], np.zeros(0, np.int64), [np.zeros(0, np.int32)] * 3, [np.zeros(0, np.int64)] * 5)
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
    codes = [_encode(column, table) for table, column in zip(job.tables, texts[2:], strict=True)]
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
    ids, parents = texts[0], [p or None for p in texts[1]]
    # The layout's id index, built here: this thread's Python work runs while the other connection's
    # SQLite works, instead of after the read (~0.5 s at a million spans)
    lookup: dict[str | None, int] = job.keys  # type: ignore[assignment]  # None (a root) is never a key
    parent_keys = np.empty(count, dtype=np.int64)
    for a in range(0, count, STEP):  # short GIL holds (see `STEP`)
        b = min(a + STEP, count)
        job.keys.update(zip(ids[a:b], range(base + a, base + b), strict=True))
        parent_keys[a:b] = np.fromiter(map(lookup.get, parents[a:b], repeat(-1)), np.int64, b - a)
    return _Piece(base, ids, parents, parent_keys, codes, numbers)


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
            prefetch = first is None and extent.total >= PREFETCH_OVER
            packed = _packed(cursor, run_id, first, extent, prefetch=prefetch)
        finally:
            cursor.close()
            raw.text_factory = factory
        return packed if packed is not None else _rows(session, run_id, first)


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
