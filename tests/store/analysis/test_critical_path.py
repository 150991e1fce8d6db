"""The critical path: examples with known answers and hypothesis properties (chain, fan-out, pruning)."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentdesk.store.analysis.critical_path import critical_path, summarise

RESOLUTION = 1e-6
"""Seconds: the critical path compares times in whole microseconds."""


def arrays(spans: list[tuple[float, float, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([s[0] for s in spans], dtype=np.float64), np.array([s[1] for s in spans], dtype=np.float64),
            np.array([s[2] for s in spans], dtype=np.int64))


def test_parallel_children_only_the_last_finishing_one_is_on_the_path() -> None:
    # root [0,10]; A [0,4] and B [1,9] run in parallel; C [9,10] after both
    path = critical_path(*arrays([(0, 10, -1), (0, 4, 0), (1, 9, 0), (9, 10, 0)]))
    assert path.indices.tolist() == [0, 2, 3]
    assert path.self_time.tolist() == [1.0, 8.0, 1.0]
    assert path.total == 10.0 and path.duration == 10.0


def test_self_time_between_children_belongs_to_the_parent() -> None:
    path = critical_path(*arrays([(0, 10, -1), (2, 4, 0), (6, 7, 0)]))
    assert dict(zip(path.indices.tolist(), path.self_time.tolist(), strict=True)) == {0: 7.0, 1: 2.0, 2: 1.0}


def test_a_child_outliving_its_parent_is_clipped() -> None:
    path = critical_path(*arrays([(0, 5, -1), (1, 8, 0)]))
    assert dict(zip(path.indices.tolist(), path.self_time.tolist(), strict=True)) == {0: 1.0, 1: 4.0}


def test_a_deep_chain_needs_no_recursion() -> None:
    n = 10_000
    starts = np.arange(n, dtype=np.float64)
    path = critical_path(starts, 2.0 * n - starts, np.arange(n, dtype=np.int64) - 1)
    assert path.indices.tolist() == list(range(n))
    assert np.isclose(path.total, 2.0 * n)


def test_running_spans_and_bad_parents() -> None:
    path = critical_path(*arrays([(0, np.nan, -1), (1, 3, 0), (2, 2.5, 7), (3, 4, 3)]))
    assert 0 in path.indices.tolist()  # running: counted up to the latest instant the run has seen
    assert path.duration == 4.0
    empty = critical_path(np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))
    assert len(empty) == 0 and empty.total == 0.0


def test_summary_reads_like_the_run_header() -> None:
    path = critical_path(*arrays([(0, 10, -1), (0, 8, 0), (8, 10, 0)]))
    summary = summarise(path, ["agent", "model", "tool"])
    assert summary.describe() == "critical path: 3 spans, 80 % in model calls"


durations = st.lists(st.floats(min_value=0.001, max_value=100, allow_nan=False), min_size=1, max_size=30)


@given(durations)
def test_a_sequential_chain_is_its_own_path(lengths: list[float]) -> None:
    starts = np.concatenate([[0.0], np.cumsum(lengths)[:-1]])
    ends = starts + np.array(lengths)
    path = critical_path(starts, ends, np.full(len(lengths), -1, dtype=np.int64))
    assert path.indices.tolist() == list(range(len(lengths)))
    assert np.allclose(path.self_time, lengths, atol=RESOLUTION * 2)


@given(st.lists(st.lists(st.floats(min_value=0.01, max_value=50), min_size=1, max_size=5),
                min_size=1, max_size=8))
@example([[0.01, 0.01], [0.010000000000000002, 0.01]])  # a tie in float rounding only (found by hypothesis)
def test_a_fan_out_runs_through_its_longest_branch(branches: list[list[float]]) -> None:
    """A root fans out branches at t=0; each branch is a sequential chain of children under a branch span."""
    starts, ends, parents = [0.0], [0.0], [-1]
    branch_spans: list[list[int]] = []
    for chain in branches:
        head = len(starts)
        total = float(sum(chain))
        starts.append(0.0), ends.append(total), parents.append(0)
        members, t = [head], 0.0
        for length in chain:
            members.append(len(starts))
            starts.append(t), ends.append(t + length), parents.append(head)
            t += length
        branch_spans.append(members)
    totals = [ends[members[0]] for members in branch_spans]
    ends[0] = max(totals)
    path = critical_path(np.array(starts), np.array(ends), np.array(parents, dtype=np.int64))
    tolerance = RESOLUTION * len(starts)
    # branches whose totals differ only by float rounding (0.02 against 0.020000000000000004) are a tie:
    # the path runs through one of them, whole
    longest = [b for b in range(len(branches)) if totals[b] >= max(totals) - tolerance]
    on_path = set(path.indices.tolist()) - {0}
    assert any(set(branch_spans[b]) <= on_path for b in longest)
    assert np.isclose(path.total, max(totals), atol=tolerance)
    others = {i for b, members in enumerate(branch_spans) if b not in longest for i in members}
    assert not on_path & others


@st.composite
def random_runs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random well-nested trees: each child inside its parent's interval."""
    n = draw(st.integers(min_value=1, max_value=40))
    starts, ends, parents = [0.0], [100.0], [-1]
    for _ in range(n - 1):
        p = draw(st.integers(min_value=0, max_value=len(starts) - 1))
        a = draw(st.floats(min_value=0, max_value=1))
        b = draw(st.floats(min_value=0, max_value=1))
        lo, hi = starts[p], ends[p]
        s, e = sorted((lo + a * (hi - lo), lo + b * (hi - lo)))
        starts.append(s), ends.append(e), parents.append(p)
    return np.array(starts), np.array(ends), np.array(parents, dtype=np.int64)


def subtree(parents: np.ndarray, root: int) -> set[int]:
    out, frontier = {root}, [root]
    while frontier:
        node = frontier.pop()
        kids = np.flatnonzero(parents == node).tolist()
        out.update(kids), frontier.extend(kids)
    return out


@settings(max_examples=150)
@given(random_runs(), st.data())
def test_removing_a_span_off_the_path_does_not_change_it(run: tuple[np.ndarray, np.ndarray, np.ndarray],
                                                         data: st.DataObject) -> None:
    starts, ends, parents = run
    path = critical_path(starts, ends, parents)
    off = sorted(set(range(starts.size)) - set(path.indices.tolist()))
    if not off:
        return
    victim = data.draw(st.sampled_from(off))
    keep = np.array(sorted(set(range(starts.size)) - subtree(parents, victim)))
    remap = np.full(starts.size, -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    new_parents = np.where(parents[keep] < 0, -1, remap[np.maximum(parents[keep], 0)])
    again = critical_path(starts[keep], ends[keep], new_parents)
    assert keep[again.indices].tolist() == path.indices.tolist()
    assert np.allclose(again.self_time, path.self_time, atol=RESOLUTION * 2)


@given(random_runs())
def test_self_times_add_up_to_the_run_when_one_root_covers_it(run: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    starts, ends, parents = run
    path = critical_path(starts, ends, parents)
    assert np.isclose(path.total, 100.0, atol=RESOLUTION * starts.size) and (path.self_time >= 0).all()
    assert path.indices[0] == 0


def reference_walk(starts: np.ndarray, ends: np.ndarray, parents: np.ndarray) -> dict[int, float]:
    """The rule written the plain way (recursive, small inputs only): the cursor walk of the docs."""
    n = starts.size
    kids: dict[int, list[int]] = {i: [] for i in range(-1, n)}
    for i in range(n):
        kids[int(parents[i])].append(i)
    out: dict[int, float] = {}

    def visit(node: int, cursor: float, floor: float) -> None:
        own = 0.0
        chosen = False
        for child in sorted(kids[node], key=lambda c: (-ends[c], c)):
            if starts[child] < cursor and (ends[child] <= cursor or not chosen):
                end = min(ends[child], cursor)
                own += cursor - end
                out[child] = 0.0
                visit(child, end, starts[child])
                cursor, chosen = max(starts[child], floor), True
        own += max(0.0, cursor - floor)
        if node >= 0:
            out[node] = own

    visit(-1, float(ends.max()), float(starts.min()))
    return out


@settings(max_examples=200)
@given(random_runs())
def test_the_vectorised_path_is_the_plain_walk(run: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    starts, ends = np.round(run[0], 3), np.round(run[1], 3)  # whole milliseconds: exact in microsecond ticks
    parents = run[2]
    ends = np.maximum(ends, starts)
    expected = reference_walk(starts, ends, parents)
    path = critical_path(starts, ends, parents)
    assert set(path.indices.tolist()) == set(expected)
    got = dict(zip(path.indices.tolist(), path.self_time.tolist(), strict=True))
    assert all(abs(got[i] - expected[i]) <= 1e-5 for i in expected)


def test_a_run_of_many_days_still_packs_its_keys() -> None:
    n = 1000
    starts = np.arange(n, dtype=np.float64) * 86_400.0  # a thousand days, one span a day
    path = critical_path(starts, starts + 3600.0, np.full(n, -1, dtype=np.int64))
    assert len(path) == n and np.isclose(path.total, n * 3600.0, rtol=1e-6)
