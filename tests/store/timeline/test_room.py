"""Arrays that grow at the end (`store/timeline/room.py`): the room after them is claimed once per length,
so two views appended from one older view never write into each other's values."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from agentdesk.store.timeline.room import ROOM_MIN, Room, insert_at, put, with_room


def test_the_room_is_claimed_once_per_length_and_the_older_view_keeps_its_values() -> None:
    room = Room(3)
    base = with_room(np.array([1, 2, 3]), room.capacity[0])
    assert room.claim(3)
    first = put(base, 4)
    assert not room.claim(3)  # a second append to the same (older) view must copy
    assert room.claim(4, more=2)
    longer = put(first, np.array([5, 6]))
    assert base.tolist() == [1, 2, 3] and first.tolist() == [1, 2, 3, 4] and longer.tolist() == [1, 2, 3, 4, 5, 6]
    assert longer.base is base.base  # written in place, nothing copied


def test_lanes_and_keys_are_claimed_together_and_the_room_runs_out() -> None:
    room = Room(2, 5)
    assert room.capacity == (2 + ROOM_MIN, 5 + ROOM_MIN)
    assert not room.claim(2, 4)  # the keys moved on elsewhere: this layout copies
    assert room.claim(2, 5)
    assert room.length == (3, 6)
    full = Room(0)
    assert not full.claim(0, more=ROOM_MIN + 1)


@given(st.lists(st.integers(-1000, 1000), max_size=50), st.data())
def test_insert_at_is_numpy_insert(values: list[int], data: st.DataObject) -> None:
    array = np.asarray(values, dtype=np.int64)
    at = data.draw(st.integers(0, len(values)))
    room = data.draw(st.integers(0, 5))
    out = insert_at(array, at, 7, room)
    assert out.tolist() == np.insert(array, at, 7).tolist()
    if room:
        assert out.base is not None and len(out.base) == len(values) + 1 + room
