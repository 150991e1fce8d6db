"""The notification decision: only when the count grows while unfocused, at most one per interval, coalesced."""

from __future__ import annotations

from itertools import pairwise

from agentdesk.gui.window.notify import NotifyGate, message_for


def test_only_growth_while_unfocused_notifies() -> None:
    gate = NotifyGate(10)
    assert gate.pending_changed(1, focused=True, now=0).show is None
    assert gate.pending_changed(2, focused=False, now=1).show == message_for(2)
    assert gate.pending_changed(1, focused=False, now=30).show is None  # one was decided: no news
    assert gate.pending_changed(0, focused=False, now=40).show is None


def test_arrivals_inside_the_interval_coalesce_into_one_later_message() -> None:
    gate = NotifyGate(10)
    assert gate.pending_changed(1, focused=False, now=100).show == "1 approval waiting for you"
    later = gate.pending_changed(2, focused=False, now=103)
    assert later.show is None and later.later_s == 7
    assert gate.pending_changed(3, focused=False, now=104).later_s is None  # already owed
    assert gate.pending_changed(4, focused=False, now=105).show is None
    assert gate.due(focused=False, now=108).later_s == 2  # a timer that fired early waits on
    assert gate.due(focused=False, now=110).show == "4 approvals waiting for you"
    assert gate.due(focused=False, now=111).show is None  # nothing more owed


def test_a_coalesced_message_is_dropped_when_the_operator_came_back_or_the_queue_emptied() -> None:
    gate = NotifyGate(10)
    gate.pending_changed(1, focused=False, now=0)
    gate.pending_changed(2, focused=False, now=2)
    assert gate.due(focused=True, now=10).show is None
    gate.pending_changed(3, focused=False, now=30)
    gate.pending_changed(4, focused=False, now=31)
    gate.pending_changed(0, focused=False, now=32)
    assert gate.due(focused=False, now=40).show is None


def test_never_more_than_one_message_per_interval() -> None:
    gate = NotifyGate(10)
    shown: list[float] = []
    count = 0
    for tick in range(0, 600):
        now = tick / 10
        if tick % 3 == 0:
            count += 1
            if gate.pending_changed(count, focused=False, now=now).show:
                shown.append(now)
        if gate.due(focused=False, now=now).show:
            shown.append(now)
    assert len(shown) >= 5
    assert all(b - a >= 10 for a, b in pairwise(shown))
