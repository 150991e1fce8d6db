"""Span id → key, the index a layout finds parents with: a dict, or sorted hashes over fixed-width ids.

A million ids as dict entries are ~100 MB and a second of inserts; over `FixedIds` the index is the
ids' 64-bit hashes sorted once in numpy (`FixedKeys`). Either way keys only grow, so layouts
appended from one another (a live run's new spans) share one index.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentdesk.store.timeline.strings import WORD, FixedIds


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
    h = (int.from_bytes(padded[:WORD], "little") * _PRIME) & _MASK
    for a in range(WORD, width, WORD):
        h ^= int.from_bytes(padded[a:a + WORD], "little")
        h = (h * _MIX) & _MASK
        h ^= h >> 31
    return h


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
