"""Our schema's spans read as packed statements: SQLite joins each column into one string per slice.

A million-span run read row by row costs seconds of row handling and enough short-lived objects to
make Python's collector stop every thread for tenths of a second. Here SQLite prints each column of
a slice of rows into one string (`_PACKED`), which Python splits and numpy parses in C; numbers
travel as integers. A run whose rows are (mostly) contiguous in the table, as imports and a lone
runtime write them, is read by its rowid range, a slice at a time (`ROWID_SLICE`), and sorted by
start in numpy; runs interleaved with others go through the `spans_by_run` index, already in start
order. Measured at a million spans (warm cache): the index path costs SQLite a table lookup per row
(~0.8 s CPU of scan vs ~0.3 s for the range); `mmap_size`/`cache_size` pragmas and the parent's
rowid by a self-join (+1.3 s) did not pay; a second connection reading every other slice paid less
than answering the next slice's SQL on a thread while this one unpacks (`_prefetched`), and doubled
the threads wanting the GIL. Fixed-width ids (`fixed_width`) saved ~1 s CPU and ~100 MB resident at
a million spans against lists of str and a dict. A run whose values do not pack reads by rows
(`read`).
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
import warnings
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from agentdesk.store.persistence.sqlite import lenient_text
from agentdesk.store.text.times import READABLE_NS_BELOW
from agentdesk.store.timeline.columns import SpanColumns
from agentdesk.store.timeline.id_index import FixedKeys, Keys, SpanKeys
from agentdesk.store.timeline.strings import STEP, Coded, FixedIds, FixedParents, StringTable, encode, fixed_width, take

_SEP = "\x1f"
"""Between packed TEXT values (the ASCII unit separator): a value holding it makes the counts differ,
and the read falls back to rows."""


_SCALED_BELOW = 9 * 10**18
"""Packed times and costs stay below this in magnitude; a run with a wilder value reads by rows. SQLite's
CAST saturates a real beyond int64 at ±(2**63 - 1), so one too far is seen in the parsed integers
(checking maxima in SQL first cost it ~0.4 s CPU at a million spans, a fifth of its part)."""


_NONE = -_SCALED_BELOW - 1
"""A NULL end (an open span) in the packed integers: below every value that packs, and never a CAST
of a real (doubles this large are multiples of 1024)."""


_NS, _PICO = 1e9, 1e12
"""Times travel as integer nanoseconds since the run's first start (stored as integer nanoseconds since
the epoch, migration 0023: a subtraction, exact; a float or a word written into the column makes a real,
or overflows into one, and the run reads by rows), costs as integer picodollars."""


_PACKED = ("SELECT count(*), "
           "group_concat(id, '\x1f'), "
           "group_concat(ifnull(parent_span_id, ''), '\x1f'), group_concat(ifnull(kind, ''), '\x1f'), "
           "group_concat(ifnull(name, ''), '\x1f'), group_concat(ifnull(status, ''), '\x1f'), "
           "group_concat(started_at - :t0, ','), "
           "group_concat(ifnull(ended_at - :t0, :none), ','), "
           "group_concat(ifnull(input_tokens, 0), ','), "
           "group_concat(ifnull(output_tokens, 0), ','), "
           "group_concat(CAST(round(ifnull(cost_usd, 0) * 1e12) AS INTEGER), ',') "
           "FROM (SELECT id, parent_span_id, kind, name, status, started_at, "
           "ended_at, input_tokens, output_tokens, cost_usd FROM spans WHERE {where})")
"""The separator is the character itself in the statement, not `char(31)` or a parameter: SQLite
evaluates those for every row (~0.1 s of its CPU per column at a million spans). Token counts are
INTEGER columns, printed as they are; one that is not a whole number does not parse as int64 and
the run reads by rows (a CAST per row cost ~0.06 s a column)."""


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


PREFETCH = 2
"""Answers the SQL thread may have waiting."""


@dataclass(frozen=True, slots=True)
class _Extent:
    """The run's span count, first start and rowid range: one pass over its `spans_by_run` entries."""

    total: int
    t0: int
    """The first start, integer nanoseconds (0 when it is no integer: the rows then hold absolute times)."""
    lo: int
    hi: int

    def dense(self) -> bool:
        return self.total > 0 and self.total >= DENSE * (self.hi - self.lo + 1)


def _extent(cursor: Any, run_id: str, first: int | None = None) -> _Extent:
    """With `first` (only the earliest spans wanted) the count stops at `first + 1` (`total` is then a
    lower bound: more than `first` means there are more) and the rowid range is skipped (0, 0): the
    first spans are read through the index anyway. Counting all of a million-span run's index entries
    costs ~0.05 s warm but ~1.1 s from a cold page cache, 30x the first 10,000 spans themselves, and
    the range ~4x the count."""
    if first is not None:
        count, t0 = cursor.execute("SELECT count(*), min(started_at) FROM (SELECT started_at FROM spans "
                                   "WHERE run_id = ? ORDER BY started_at LIMIT ?)", (run_id, first + 1)).fetchone()
        lo = hi = 0
    else:
        count, t0, lo, hi = cursor.execute("SELECT count(*), min(started_at), min(rowid), max(rowid) FROM spans "
                                           "WHERE run_id = ?", (run_id,)).fetchone()
    return _Extent(int(count), t0 if type(t0) is int else 0, int(lo or 0), int(hi or 0))


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
    job = _Job(_PACKED.format(where=where), run_id, extent.t0, (StringTable(), StringTable(), StringTable()), Keys())
    read = _read(cursor, job, ranges, prefetch and len(ranges) > 1)
    if read is None:
        return None
    return assemble(job, read, extent.total, sort=by_rowid)


def assemble(job: _Job, pieces: list[_Piece], total: int, *, sort: bool) -> SpanColumns | None:
    """The read's pieces as one `SpanColumns` with its id index; `sort` puts rows read in insertion order
    into start order (ties kept in read order). None for no rows. Shared by both backends' packed reads."""
    key_of = np.concatenate([np.arange(p.base, p.base + len(p.ids)) for p in pieces] or [np.zeros(0, np.int64)])
    parent_key = np.concatenate([p.parent_keys for p in pieces] or [np.zeros(0, np.int64)])
    ids: Sequence[str]
    parents: Sequence[str | None]
    keys: Keys | None = None
    if pieces and all(isinstance(p.ids, np.ndarray) for p in pieces):
        raw_ids = np.concatenate([p.ids for p in pieces])
        raw_parents = np.concatenate([p.parents for p in pieces])
        keys = FixedKeys.of(raw_ids, key_of)
        ids, parents = FixedIds(raw_ids), FixedParents(raw_parents)
        if keys is not None:
            parent_key = keys.lookup(raw_parents)
        else:  # a repeated id (or a hash collision): the dict, as the list path builds it
            ids, parents = list(ids), list(parents)
            job.keys.update(zip(ids, key_of.tolist(), strict=True))
    else:
        ids, parents = _listed(pieces, job.keys)
    if keys is None:
        keys = job.keys
        keys.next_key = int(key_of.max(initial=-1)) + 1
        missed = [i for i in np.flatnonzero(parent_key < 0).tolist() if parents[i] is not None]
        if missed:  # a parent read after its child (a later slice, or the other connection's)
            parent_key[missed] = [keys.get(parents[i], -1) for i in missed]  # type: ignore[arg-type]
    start_ns, end_ns, input_tokens, output_tokens, cost_pico = (
        np.concatenate([p.numbers[k] for p in pieces]) if pieces else np.zeros(0, np.int64) for k in range(5))
    kinds, names, statuses = (Coded(np.concatenate([p.codes[k] for p in pieces]) if pieces else np.zeros(0, np.int32),
                                    table) for k, table in enumerate(job.tables))
    del pieces
    count = len(start_ns)
    if count == 0:
        return None
    if sort:  # insertion order: put it in start order (ties by rowid, as the index gives)
        order = np.argsort(start_ns, kind="stable")
        if (order != np.arange(count)).any():
            if isinstance(ids, FixedIds) and isinstance(parents, FixedParents):  # numpy; the keys follow `key_of`
                ids, parents = ids.taken(order), parents.taken(order)
            else:
                picks = order.tolist()
                ids, parents = take(ids, picks), take(parents, picks)
            key_of, parent_key = key_of[order], parent_key[order]
            kinds, names, statuses = (c.taken(order) for c in (kinds, names, statuses))
            start_ns, end_ns, input_tokens, output_tokens, cost_pico = (
                a[order] for a in (start_ns, end_ns, input_tokens, output_tokens, cost_pico))
    t0 = job.t0 / _NS
    start = start_ns / _NS
    start += t0
    end = np.where(end_ns == _NONE, np.nan, end_ns / _NS)
    end += t0
    return SpanColumns(ids, parents, kinds, names, statuses, start, end, input_tokens, output_tokens,
                       cost_pico / _PICO, total=max(total, count), keys=SpanKeys(keys, key_of, parent_key))


def _listed(pieces: list[_Piece], keys: Keys) -> tuple[list[str], list[str | None]]:
    """The pieces' ids and parents as lists, when not all are fixed (`fixed_width`): those that were are
    decoded and keyed here, their parents left for the caller's look-up of parents missed."""
    ids: list[str] = []
    parents: list[str | None] = []
    for piece in pieces:
        if isinstance(piece.ids, np.ndarray) and isinstance(piece.parents, np.ndarray):
            more, up = FixedIds(piece.ids).gathered(piece.ids), FixedParents(piece.parents).gathered(piece.parents)
            keys.update(zip(more, range(piece.base, piece.base + len(more)), strict=True))
        else:
            more, up = piece.ids, piece.parents  # type: ignore[assignment]
        ids.extend(more)
        parents.extend(up)
    return ids, parents


@dataclass(frozen=True, slots=True)
class _Job:
    """One packed read: the statement, its fixed arguments and the tables its slices code strings in."""

    statement: str
    run_id: str
    t0: int
    """Integer nanoseconds: the times are read relative to it."""
    tables: tuple[StringTable, StringTable, StringTable]
    """Kinds, names, statuses (thread-safe: both reading threads add to them)."""
    keys: Keys


@dataclass(frozen=True, slots=True)
class _Piece:
    """One slice's columns: ids, parent ids (None for a root), the codes of kinds, names and statuses,
    and five integer arrays."""

    base: int
    """The key of its first span (`Keys`): its index among the slices times `ROWID_SLICE`."""
    ids: list[str] | np.ndarray
    """Strings, or one `S` array (`fixed_width`: then `parents` is one too and the keys come after the read)."""
    parents: list[str | None] | np.ndarray
    parent_keys: np.ndarray
    """The parent's key, -1 for a root or a parent not read yet (or not looked up: fixed ids)."""
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
    numbers = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for raw in row[6:]:
            try:
                values = np.fromstring(raw, dtype=np.int64, sep=",")  # text mode: not deprecated
            except (ValueError, DeprecationWarning, TypeError):
                return None
            if len(values) != count:
                return None
            numbers.append(values)
    values = numbers[4]  # cost: too far for int64 (see `_SCALED_BELOW`)
    if ((values >= _SCALED_BELOW) | (values <= -_SCALED_BELOW)).any():
        return None
    low, high = -job.t0, READABLE_NS_BELOW - job.t0  # the readable times, [0, 2255), less the first start
    for k in (0, 1):  # an unreadable time (negative, past 2255) is the row read's to mend
        values = numbers[k]
        if ((values < low) & (values != _NONE) | (values >= high)).any():
            return None
    fixed = fixed_width(row[1], count), fixed_width(row[2], count)
    texts: list[list[Any]] = []  # ids and parents too unless both are fixed; kinds, names, statuses
    for raw in row[1:6] if fixed[0] is None or fixed[1] is None else row[3:6]:
        text = raw.decode() if isinstance(raw, bytes) and raw.isascii() else lenient_text(raw or b"")
        parts = text.split(_SEP)
        if len(parts) != count:
            return None
        texts.append(parts)
    codes = [encode(column, table) for table, column in zip(job.tables, texts[-3:], strict=True)]
    if fixed[0] is not None and fixed[1] is not None:  # keyed after the read, in numpy (`FixedKeys`)
        return _Piece(base, fixed[0], fixed[1], np.full(count, -1, dtype=np.int64), codes, numbers)
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
