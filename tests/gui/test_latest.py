"""`Latest`: answers that a newer request or a reset superseded never reach the model."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agentdesk.model.latest import Latest
from agentdesk.model.runner import StoreRunner


@pytest.fixture
def runner(qtbot: Any) -> Iterator[StoreRunner]:
    made = StoreRunner(max_workers=4)
    yield made
    made.shutdown()


def answer_when(gate: threading.Event, value: object) -> object:
    assert gate.wait(5)
    return value


def test_submit_keeps_only_the_newest_answer_even_when_an_older_one_lands_last(runner: StoreRunner,
                                                                               qtbot: Any) -> None:
    latest, got = Latest(runner), []
    old_gate, new_gate = threading.Event(), threading.Event()
    latest.submit(answer_when, old_gate, "old", on_done=got.append)
    latest.submit(answer_when, new_gate, "new", on_done=got.append)
    new_gate.set()
    qtbot.waitUntil(lambda: got == ["new"], timeout=3000)
    old_gate.set()
    # in_flight falls in the same GUI-thread slot that calls on_done: at 0, the old answer has landed
    qtbot.waitUntil(lambda: runner.in_flight == 0, timeout=3000)
    assert got == ["new"]


def test_added_requests_all_answer_with_rising_tickets_and_fresh_keeps_the_newest_per_key(
        runner: StoreRunner, qtbot: Any) -> None:
    latest = Latest(runner)
    got: list[tuple[object, int]] = []
    gates = [threading.Event() for _ in range(3)]
    for n, gate in enumerate(gates):
        latest.add(answer_when, gate, n, on_done=lambda value, ticket: got.append((value, ticket)))
    for gate in reversed(gates):  # the newest finishes first
        gate.set()
    qtbot.waitUntil(lambda: len(got) == 3, timeout=3000)
    tickets = dict(got)
    assert tickets[0] < tickets[1] < tickets[2]
    assert latest.fresh("row", tickets[2])
    assert not latest.fresh("row", tickets[1])  # the row shows a newer answer: an older one is refused
    assert latest.fresh("other row", tickets[0])  # per key
    latest.cancel()
    assert latest.fresh("row", tickets[1])  # a reset forgets what rows showed


def test_cancel_drops_every_answer_in_flight_and_its_errors(runner: StoreRunner, qtbot: Any) -> None:
    latest, got, errors = Latest(runner), [], []
    gate = threading.Event()

    def fail(gate: threading.Event) -> None:
        assert gate.wait(5)
        raise RuntimeError("late failure")

    latest.add(answer_when, gate, "late", on_done=lambda value, _ticket: got.append(value))
    latest.submit(fail, gate, on_done=got.append, on_error=errors.append)
    latest.cancel()
    reported: list[str] = []
    runner.error.connect(reported.append)
    gate.set()
    qtbot.waitUntil(lambda: runner.in_flight == 0, timeout=3000)
    assert got == [] and errors == [] and reported == []
