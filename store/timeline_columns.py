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
and statuses repeat, so they are codes into their distinct strings (`Coded`).
Ids and parent ids that are plain ASCII (hex, uuids: the usual case) stay one
numpy bytes array each (`FixedIds`), keyed by sorted hashes (`FixedKeys`), not a
million str objects and a dict (measured at a million spans: ~1 s less CPU, ~100
MB less resident); other ids are lists and a dict built while reading. Either
way the layout gets its id index from the read (`SpanKeys`). Any
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


_PRIME, _MIX = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9
_MASK = (1 << 64) - 1
_WORD = 8
"""Fixed-width ids are padded to a multiple of this many bytes, so they hash as rows of 64-bit words."""


def _words(strings: np.ndarray) -> np.ndarray:
    """`S{8k}` strings as rows of k little-endian 64-bit words (a view)."""
    return strings.view("<u8").reshape(len(strings), -1)


def _hashes(strings: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each `S{8k}` string, in numpy: multiply-xor over its words (`_hash` is the same
    for one string in Python). A collision is detected, not trusted (see `FixedKeys.of`)."""
    words = _words(strings)
    with np.errstate(over="ignore"):
        h = words[:, 0] * np.uint64(_PRIME)
        for j in range(1, words.shape[1]):
            h ^= words[:, j]
            h *= np.uint64(_MIX)
            h ^= h >> np.uint64(31)
    return h


def _hash(raw: bytes, width: int) -> int:
    """`_hashes` of one string padded to `width`, in Python integers."""
    padded = raw.ljust(width, b"\0")
    h = (int.from_bytes(padded[:_WORD], "little") * _PRIME) & _MASK
    for a in range(_WORD, width, _WORD):
        h ^= int.from_bytes(padded[a:a + _WORD], "little")
        h = (h * _MIX) & _MASK
        h ^= h >> 31
    return h


def _fixed(raw: Any, count: int) -> np.ndarray | None:
    """A packed TEXT column (values joined by `_SEP`) as one numpy `S{width}` array, no Python string
    per value: a million ids as str objects are ~75 MB and a second of allocation, decoding and dict
    inserts; as bytes in an array ~24 MB and milliseconds. `width` is the longest value rounded up to
    `_WORD` (shorter ones padded with NULs, which numpy strips on reading). None, for the list path,
    when a value is not plain ASCII or holds a NUL (either would not round-trip), when the separators
    do not make `count` values, or when a few long values would pad the rest to far more memory."""
    if not isinstance(raw, bytes):
        return None
    buf = np.frombuffer(raw, np.uint8)
    if len(buf) and (int(buf.max()) >= 0x80 or int(buf.min()) == 0):
        return None
    seps = np.flatnonzero(buf == 0x1F)
    if len(seps) != count - 1:
        return None
    lengths = np.diff(seps, prepend=-1, append=len(buf)) - 1
    top = int(lengths.max())
    width = max(_WORD, -(-top // _WORD) * _WORD)
    if width * count > 2 * len(buf) + 2 * _WORD * count:
        return None
    out = np.zeros(count, f"S{width}")
    if top and (lengths == top).all():  # one width (hex or uuid ids): the bytes, one separator apart
        out[:] = np.ndarray((count,), f"S{top}", raw, 0, (top + 1,))
    elif top:
        matrix = out.view(np.uint8).reshape(count, width)
        rows = np.repeat(np.arange(count), lengths)
        matrix[rows, np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = buf[buf != 0x1F]
    return out


class FixedIds(Sequence[str]):
    """Ids in one numpy `S{width}` array (see `_fixed`), read like a list of str: each decodes on access.

    Every consumer (lanes, details, search, diff) keeps indexing and iterating as before; the million
    str objects exist only while something walks them all."""

    __slots__ = ("raw",)

    def __init__(self, raw: np.ndarray) -> None:
        self.raw = raw

    def __len__(self) -> int:
        return len(self.raw)

    def _decoded(self, raw: bytes) -> str:
        return raw.decode()

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return self.gathered(self.raw[i])
        return self._decoded(bytes(self.raw[i]))

    def gathered(self, raw: np.ndarray) -> list[Any]:
        """These strings of `raw` (a selection of this array) decoded, `STEP` at a time (short GIL holds)."""
        out: list[Any] = []
        for a in range(0, len(raw), STEP):
            out.extend(map(self._decoded, raw[a:a + STEP].tolist()))
        return out

    def __iter__(self) -> Iterator[str]:
        for a in range(0, len(self.raw), SLICE):
            yield from self.gathered(self.raw[a:a + SLICE])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} of {self.raw.dtype})"

    def taken(self, indices: np.ndarray) -> FixedIds:
        return type(self)(self.raw[indices])


class FixedParents(FixedIds, Sequence[str | None]):  # type: ignore[misc]
    """Parent ids as `FixedIds`; an empty one (a root) reads as None."""

    __slots__ = ()

    def _decoded(self, raw: bytes) -> str | None:  # type: ignore[override]
        return raw.decode() or None


class FixedKeys(Keys):
    """`Keys` over `FixedIds` without a dict entry per id: the ids' 64-bit hashes sorted once in numpy
    (`_hashes`), looked up by binary search and confirmed against the id itself. Ids added later (a live
    run's new spans) go to the dict this class still is, checked first."""

    def __init__(self, raw: np.ndarray, key_of: np.ndarray, order: np.ndarray, hashes: np.ndarray,
                 next_key: int) -> None:
        super().__init__(next_key)
        self._raw, self._key_of, self._order, self._sorted = raw, key_of, order, hashes

    @classmethod
    def of(cls, raw: np.ndarray, key_of: np.ndarray) -> FixedKeys | None:
        """The keys of ids `raw[i]` → `key_of[i]`; None when two ids share a hash (a repeated id, or a
        collision: the dict path then decides, as it always has)."""
        hashes = _hashes(raw)
        order = np.argsort(hashes)
        hashes = hashes[order]
        if len(hashes) > 1 and (hashes[1:] == hashes[:-1]).any():
            return None
        return cls(raw, key_of, order, hashes, int(key_of.max(initial=-1)) + 1)

    def _fixed_key(self, span_id: object) -> int | None:
        if not isinstance(span_id, str) or not span_id.isascii() or "\0" in span_id:
            return None
        raw = span_id.encode()
        width = self._raw.dtype.itemsize
        if len(raw) > width or not len(self._sorted):
            return None
        h = _hash(raw, width)
        pos = int(np.searchsorted(self._sorted, np.uint64(h)))
        if pos >= len(self._sorted) or int(self._sorted[pos]) != h:
            return None
        row = int(self._order[pos])
        return int(self._key_of[row]) if bytes(self._raw[row]) == raw else None

    def get(self, span_id: str, default: Any = None) -> Any:  # type: ignore[override]
        key = super().get(span_id)
        if key is None:
            key = self._fixed_key(span_id)
        return default if key is None else key

    def __getitem__(self, span_id: str) -> int:
        key = self.get(span_id)
        if key is None:
            raise KeyError(span_id)
        return int(key)

    def __contains__(self, span_id: object) -> bool:
        return super().__contains__(span_id) or self._fixed_key(span_id) is not None

    def __len__(self) -> int:
        return super().__len__() + len(self._raw)

    def __iter__(self) -> Iterator[str]:
        yield from FixedIds(self._raw)
        yield from super().__iter__()

    def items(self) -> Iterator[tuple[str, int]]:  # type: ignore[override]
        """Every (id, key): a walk over all ids (tests and diagnostics; the layout never needs it)."""
        yield from zip(FixedIds(self._raw), self._key_of.tolist(), strict=True)
        yield from super().items()

    def lookup(self, strings: np.ndarray) -> np.ndarray:
        """The key of each of these `S` strings (parent ids), -1 for an empty one or one not here:
        the queries sorted too, so the binary searches walk the table in order."""
        out = np.full(len(strings), -1, dtype=np.int64)
        if not len(strings) or not len(self._sorted):
            return out
        width = self._raw.dtype.itemsize
        if strings.dtype.itemsize != width:
            if strings.dtype.itemsize > width:
                return self._lookup_wide(strings)
            strings = strings.astype(f"S{width}")  # NUL padded, as the ids are
        # Searched in hash order (the binary searches then walk the table in order), the answers put
        # back in the strings' order: a parent is mostly near its child, so the ids compared with
        # them are too (comparing in hash order gathered both at random: twice the time)
        words = _words(strings)
        query = _hashes(strings)
        by_hash = np.argsort(query)
        pos = np.empty(len(query), dtype=np.int64)
        pos[by_hash] = np.searchsorted(self._sorted, query[by_hash])
        np.minimum(pos, len(self._sorted) - 1, out=pos)
        rows = self._order[pos]
        same = self._sorted[pos] == query
        same &= words[:, 0] != 0  # not empty (a root): no NUL in a value, so its first byte is not 0
        same &= (_words(self._raw)[rows] == words).all(axis=1)  # word by word: numpy's S compare is slow
        out[same] = self._key_of[rows[same]]
        return out

    def _lookup_wide(self, strings: np.ndarray) -> np.ndarray:
        """`lookup` of strings wider than the ids: only those that fit can be here."""
        fits = np.char.str_len(strings) <= self._raw.dtype.itemsize
        out = np.full(len(strings), -1, dtype=np.int64)
        out[fits] = self.lookup(strings[fits].astype(self._raw.dtype))
        return out


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

    ids: Sequence[str]
    """A list, or `FixedIds` when the read packed them (`_fixed`)."""
    parent_ids: Sequence[str | None]
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
    if isinstance(seq, FixedIds):
        return seq.gathered(seq.raw[np.asarray(indices, dtype=np.int64)])
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
_SCALED_BELOW = 9 * 10**18
"""Packed times and costs stay below this in magnitude; a run with a wilder value reads by rows. SQLite's
CAST saturates a real beyond int64 at ±(2**63 - 1), so one too far is seen in the parsed integers
(checking maxima in SQL first cost it ~0.4 s CPU at a million spans, a fifth of its part)."""
_NONE = -_SCALED_BELOW - 1
"""A NULL end (an open span) in the packed integers: below every value that packs, and never a CAST
of a real (doubles this large are multiples of 1024)."""
_NS, _PICO = 1e9, 1e12
"""Times travel as integer nanoseconds since the run's first start, costs as integer picodollars."""
_PACKED = ("SELECT count(*), "
           "group_concat(id, '\x1f'), "
           "group_concat(ifnull(parent_span_id, ''), '\x1f'), group_concat(ifnull(kind, ''), '\x1f'), "
           "group_concat(ifnull(name, ''), '\x1f'), group_concat(ifnull(status, ''), '\x1f'), "
           "group_concat(CAST(round((started_at - :t0) * 1e9) AS INTEGER), ','), "
           "group_concat(ifnull(CAST(round((ended_at - :t0) * 1e9) AS INTEGER), :none), ','), "
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
    if by_rowid:  # insertion order: put it in start order (ties by rowid, as the index gives)
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
    start = start_ns / _NS
    start += extent.t0
    end = np.where(end_ns == _NONE, np.nan, end_ns / _NS)
    end += extent.t0
    return SpanColumns(ids, parents, kinds, names, statuses, start, end, input_tokens, output_tokens,
                       cost_pico / _PICO, total=max(extent.total, count), keys=SpanKeys(keys, key_of, parent_key))


def _listed(pieces: list[_Piece], keys: Keys) -> tuple[list[str], list[str | None]]:
    """The pieces' ids and parents as lists, when not all are fixed (`_fixed`): those that were are
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
    ids: list[str] | np.ndarray
    """Strings, or one `S` array (`_fixed`: then `parents` is one too and the keys come after the read)."""
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
    for k in (0, 1, 4):  # start, end, cost: too far for int64 (see `_SCALED_BELOW`)
        values = numbers[k]
        if ((values >= _SCALED_BELOW) | ((values <= -_SCALED_BELOW) & (values != _NONE))).any():
            return None
    fixed = _fixed(row[1], count), _fixed(row[2], count)
    texts: list[list[Any]] = []  # ids and parents too unless both are fixed; kinds, names, statuses
    for raw in row[1:6] if fixed[0] is None or fixed[1] is None else row[3:6]:
        text = raw.decode() if isinstance(raw, bytes) and raw.isascii() else lenient_text(raw or b"")
        parts = text.split(_SEP)
        if len(parts) != count:
            return None
        texts.append(parts)
    codes = [_encode(column, table) for table, column in zip(job.tables, texts[-3:], strict=True)]
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
