"""String columns of a million spans without a million Python strings.

Kinds, names and statuses repeat: codes into their distinct strings (`Coded`). Ids and parent ids
that are plain ASCII (hex, uuids: the usual case) stay one numpy bytes array each (`FixedIds`,
made by `fixed_width` from a packed column), decoded only when read. All of them read like lists
(`Gathered`), so every consumer (lanes, details, search, diff) indexes and iterates them as before.
Loops over a million values run `STEP` or `SLICE` at a time: each C call holds the GIL, and the GUI
thread waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, TypeVar, overload

import numpy as np

from agentdesk.store.timeline.room import insert_at

T = TypeVar("T")


SLICE = 65_536
"""Values per step of a Python loop over a million (see `take`)."""


STEP = 16_384
"""Values per C call in the read's Python part: each holds the GIL, and the GUI thread (painting a
live run's first spans meanwhile) waits for it. Measured at a million spans on 2 busy cores: calls
over a 65,536-row slice (25-70 ms each, a dict resize or the OS preempting the holder included) made
GUI stalls of 90-130 ms; these 16,384 make 55-65 ms. Smaller slices of rows would do the same but
fragment the heap (+30 MB resident)."""


class StringTable(dict[str, int]):
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

    def __init__(self, codes: np.ndarray, table: StringTable) -> None:
        super().__init__(table.strings, codes)
        self._table = table

    @property
    def codes(self) -> np.ndarray:
        return self._index

    @classmethod
    def of(cls, strings: Sequence[str], table: StringTable | None = None) -> Coded:
        table = StringTable() if table is None else table
        return cls(encode(strings, table), table)

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
            tail = encode(other, self._table)
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


def encode(strings: Sequence[str], table: StringTable) -> np.ndarray:
    """Codes of these strings in `table` (new ones added), `STEP` at a time."""
    n = len(strings)
    out = np.empty(n, dtype=np.int32)
    get = table.__getitem__
    for a in range(0, n, STEP):
        out[a:a + STEP] = np.fromiter(map(get, strings[a:a + STEP]), np.int32, min(STEP, n - a))
    return out


WORD = 8
"""Fixed-width ids are padded to a multiple of this many bytes, so they hash as rows of 64-bit words."""


def fixed_width(raw: Any, count: int) -> np.ndarray | None:
    """A packed TEXT column (values joined by `_SEP`) as one numpy `S{width}` array, no Python string
    per value: a million ids as str objects are ~75 MB and a second of allocation, decoding and dict
    inserts; as bytes in an array ~24 MB and milliseconds. `width` is the longest value rounded up to
    `WORD` (shorter ones padded with NULs, which numpy strips on reading). None, for the list path,
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
    width = max(WORD, -(-top // WORD) * WORD)
    if width * count > 2 * len(buf) + 2 * WORD * count:
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
    """Ids in one numpy `S{width}` array (see `fixed_width`), read like a list of str: each decodes on access.

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
