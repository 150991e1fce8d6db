"""Numpy arrays that grow at the end without being copied: one buffer with spare room after the values,
and views of it that every layout (or token series, or row view) appended from another shares.

A live run's new span almost always lands after the last lane. Copying a dozen million-long arrays for
it cost ~10 ms (~80 ms when the copies fault their pages in); writing it into spare room costs
microseconds. The room is claimed once per length (`Room.claim`): whoever appended at that length owns
the slot, so a second append to the same older view copies instead (it must not overwrite the first
one's values). Earlier views end before the room, so they keep showing what they showed.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

ROOM_SHARE, ROOM_MIN = 64, 1024
"""Room for this share of the values (at least `ROOM_MIN`) after them: ~1.6 % more memory reserved, and
the pages of room never written are never resident."""


def spare(length: int) -> int:
    """The room left after `length` values."""
    return max(ROOM_MIN, length // ROOM_SHARE)


class Room:
    """The room after one set of arrays that grow together, one length per kind of array (a layout's
    lanes and its id keys; a series' samples), claimed once per length under a lock: the runner (a
    re-layout) and the GUI thread may both append to views that share it."""

    __slots__ = ("capacity", "length", "lock")

    def __init__(self, *lengths: int) -> None:
        room = spare(lengths[0])
        self.length, self.capacity = lengths, tuple(n + room for n in lengths)
        self.lock = threading.Lock()

    def claim(self, *lengths: int, more: int = 1) -> bool:
        """Whether views of these lengths may write `more` values each into the room (then it is theirs)."""
        with self.lock:
            if lengths != self.length or any(n + more > c for n, c in zip(lengths, self.capacity, strict=True)):
                return False
            self.length = tuple(n + more for n in lengths)
            return True


def with_room(array: np.ndarray, capacity: int) -> np.ndarray:
    """`array` copied to the start of a buffer of `capacity` (a view of its own length)."""
    buffer = np.empty(max(capacity, len(array)), dtype=array.dtype)
    buffer[:len(array)] = array
    return buffer[:len(array)]


def put(view: np.ndarray, values: Any) -> np.ndarray:
    """The view longer by `values` (one value or an array), written into its buffer's room (claimed first)."""
    buffer, n = view.base, len(view)
    k = np.size(values)
    assert isinstance(buffer, np.ndarray) and len(buffer) >= n + k
    buffer[n:n + k] = values
    return buffer[:n + k]


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
