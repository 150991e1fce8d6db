"""Incremental layout work equals doing it all at once: appended spans, the sliced and parallel read, codes.

A live run's new spans are inserted into the layout (`TimelineData.relaid_out` → `appended`),
written into spare room after the arrays when they land after the last lane; the read goes a
rowid slice at a time, every other slice on a second connection. Each must give what a full
layout of all the spans (or the row by row read) gives.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.timeline.strings import Coded

KINDS = ("agent", "model", "tool", "odd_kind")
STATUSES = ("ok", "error", "running")


def _table(spans: list[tuple[str, str | None, float, float | None, int]]) -> SpanTable:
    """(id, parent id, start, end, variant) rows; the variant picks kind, status, name and tokens."""
    return SpanTable([s[0] for s in spans], [s[1] for s in spans], [KINDS[s[4] % 4] for s in spans],
                     [f"n{s[4] % 5}" for s in spans], [STATUSES[s[4] % 3] for s in spans],
                     [s[2] for s in spans], [s[3] for s in spans], [s[4] for s in spans],
                     [2 * s[4] for s in spans], [0.001 * s[4] for s in spans])


def _same_layout(got: TimelineData, want: TimelineData, atol: float = 0.0) -> None:
    """Equal layouts; `atol` for times and costs that went through the packed read's integers."""
    assert list(got.ids) == list(want.ids)
    assert [got.parent_id(lane) for lane in range(len(got))] == [want.parent_id(lane) for lane in range(len(want))]
    assert got.parent.tolist() == want.parent.tolist() and got.depth.tolist() == want.depth.tolist()
    for name in ("start", "end", "input_tokens", "output_tokens", "cost", "kind", "status"):
        assert np.allclose(getattr(got, name), getattr(want, name), rtol=0, atol=atol, equal_nan=True), name
    assert list(got.names) == list(want.names) and list(got.kind_names) == list(want.kind_names)
    assert list(got.status_names) == list(want.status_names)
    assert all(got.lane_of[span_id] == lane for lane, span_id in enumerate(want.ids))
    assert len(got.lane_of) == len(want) and got.unknown_parent == want.unknown_parent


@st.composite
def live_runs(draw: st.DrawFn) -> tuple[list[tuple[str, str | None, float, float | None, int]], int]:
    """A run in start order (each span's parent started before it, as a live run writes them), and
    how many of its spans were laid out before the rest arrived one at a time."""
    n = draw(st.integers(2, 40))
    spans: list[tuple[str, str | None, float, float | None, int]] = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.5, 1.0]))  # ties in start, too
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        end = draw(st.one_of(st.none(), st.floats(0.0, 5.0)))
        spans.append((f"s{i}", None if parent is None else f"s{parent}", t, None if end is None else t + end,
                      draw(st.integers(0, 60))))
    return spans, draw(st.integers(1, n - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_runs())
def test_spans_appended_one_by_one_give_the_full_layout(run: tuple[list, int]) -> None:  # type: ignore[type-arg]
    spans, first = run
    data = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    for span in spans[first:]:
        data = data.relaid_out(_table([span]))
    _same_layout(data, TimelineData.from_table(_table(spans), t0=0.0))
    assert data.total == len(spans)


@settings(max_examples=60, deadline=None)
@given(live_runs())
def test_an_earlier_layout_is_unchanged_by_appends_from_it(run: tuple[list, int]) -> None:  # type: ignore[type-arg]
    """Appending twice to one layout (the room after it can hold only one of them): both copies are
    right and the layout they came from still ends where it did."""
    spans, first = run
    base = TimelineData.from_table(_table(spans[:first]), t0=0.0)
    shown = list(base.ids), base.start.copy(), base.parent.copy(), list(base.names)
    late = spans[-1][2] + 1.0
    a = base.relaid_out(_table([("late_a", None, late, None, 1)]))
    b = base.relaid_out(_table([("late_b", None, late, late + 1.0, 2)]))
    assert (list(base.ids), list(base.names)) == (shown[0], shown[3])
    assert np.array_equal(base.start, shown[1]) and np.array_equal(base.parent, shown[2])
    _same_layout(a, TimelineData.from_table(_table([*spans[:first], ("late_a", None, late, None, 1)]), t0=0.0))
    _same_layout(b, TimelineData.from_table(_table([*spans[:first], ("late_b", None, late, late + 1.0, 2)]),
                                            t0=0.0))
    assert "late_b" not in a.lane_of and "late_a" not in b.lane_of


def test_a_run_appended_past_its_room_keeps_growing() -> None:
    """More appends than the room after the arrays holds: the layout moves to a bigger buffer."""
    from agentdesk.store.timeline.room import ROOM_MIN

    spans = [("root", None, 0.0, None, 0)] + [(f"c{i}", "root", float(i + 1), None, i) for i in range(3000)]
    data = TimelineData.from_table(_table(spans[:2]), t0=0.0)
    assert ROOM_MIN < 3000
    for span in spans[2:]:
        data = data.relaid_out(_table([span]))
    _same_layout(data, TimelineData.from_table(_table(spans), t0=0.0))


def test_coded_columns_read_like_lists() -> None:
    names = ["b", "a", "b", "c", "a"]
    coded = Coded.of(names)
    assert coded == names and list(coded) == names and coded[1:4] == names[1:4] and coded.index("c") == 3
    assert len(coded.values) == 3 and coded.codes.dtype == np.int32
    coded[0] = "new"
    assert coded[0] == "new" and coded == ["new", *names[1:]]
    joined = coded + Coded.of(["z", "a"])
    assert list(joined) == ["new", *names[1:], "z", "a"]
    assert list(coded.taken(np.array([4, 0]))) == ["a", "new"] and list(coded.inserted(1, "q"))[:3] == ["new", "q", "a"]
    assert coded.lookup({"a": 1, "b": 2, "new": 4}, 9, np.int8).tolist() == [4, 1, 2, 9, 1]


@pytest.mark.parametrize("runs", [1, 2])
def test_the_sliced_prefetched_read_matches_the_row_read(tmp_path, monkeypatch, runs: int) -> None:  # type: ignore[no-untyped-def]
    """Slices of 3 rowids (some empty, some with another run's rows), answered ahead on the
    SQL thread: the same columns as the row read, and the keys it builds give the right parents."""
    from agentdesk.store.timeline import packed as packed_read
    from agentdesk.store.timeline import read as span_read
    from tests.store.analysis.test_timeline_data import _same, _two_runs

    monkeypatch.setattr(packed_read, "ROWID_SLICE", 3)
    monkeypatch.setattr(span_read, "PREFETCH_OVER", 1)
    source, ids = _two_runs(tmp_path, runs, spans=20)
    try:
        for run in ids:
            with source.store.reading() as session:
                slow = span_read._rows(session, run, None)
            fast = span_read.span_columns(source, run)
            _same(fast, slow)
            assert fast.keys is not None
            key_id = {key: span_id for span_id, key in fast.keys.keys.items()}
            assert [key_id[k] for k in fast.keys.of_row.tolist()] == fast.ids
            assert [key_id.get(k) for k in fast.keys.parent_of_row.tolist()] == fast.parent_ids
            _same_layout(TimelineData.from_columns(fast), TimelineData.from_columns(slow), atol=1e-6)
    finally:
        source.close()
