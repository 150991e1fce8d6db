"""`LatestTask` and `spawn`: the window's store work as coroutines on the qasync loop, the newest request winning."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agentdesk.model.runner import StoreRunner
from agentdesk.model.tasks import LatestTask, Tickets, spawn


@pytest.fixture
def runner(qtbot: Any) -> Iterator[StoreRunner]:
    made = StoreRunner(max_workers=4)
    yield made
    made.shutdown()


def answer_when(gate: threading.Event, value: object) -> object:
    assert gate.wait(5)
    return value


def test_a_newer_request_cancels_the_older_whose_answer_never_lands(runner: StoreRunner, qtbot: Any) -> None:
    latest, got = LatestTask(runner), []
    old_gate, new_gate = threading.Event(), threading.Event()

    async def load(gate: threading.Event, value: str) -> None:
        got.append(await runner.run(answer_when, gate, value))

    old = latest.start(load(old_gate, "old"))
    qtbot.waitUntil(lambda: runner.in_flight == 1)  # the old request is on the pool: it could answer
    latest.start(load(new_gate, "new"))
    qtbot.waitUntil(old.cancelled)
    old_gate.set()  # the superseded call finishes on the pool after all
    new_gate.set()
    qtbot.waitUntil(lambda: got == ["new"] and not latest.pending)
    assert got == ["new"]


def test_an_answer_already_back_is_dropped_when_cancelled_before_it_is_applied(runner: StoreRunner,
                                                                              qtbot: Any) -> None:
    latest, got = LatestTask(runner), []
    gate, done = threading.Event(), threading.Event()

    def call() -> str:
        assert gate.wait(5)
        done.set()
        return "stale"

    async def load() -> None:
        got.append(await runner.run(call))

    task = latest.start(load())
    qtbot.waitUntil(lambda: runner.in_flight == 1)
    gate.set()
    assert done.wait(5)  # the pool has the answer; the coroutine has not resumed (no Qt events processed since)
    latest.cancel()
    qtbot.waitUntil(task.done)
    assert task.cancelled() and got == []


def test_failures_of_the_current_request_go_to_the_one_handler(runner: StoreRunner, qtbot: Any) -> None:
    errors: list[str] = []
    latest = LatestTask(runner, on_error=lambda exc: errors.append(str(exc)))
    reported: list[str] = []
    runner.error.connect(reported.append)

    def broken() -> None:
        raise ValueError("store gone")

    async def load() -> None:
        await runner.run(broken)

    latest.start(load())
    qtbot.waitUntil(lambda: errors == ["store gone"])
    assert reported == []


def test_without_a_handler_a_failure_reaches_the_status_bar_signal(runner: StoreRunner, qtbot: Any) -> None:
    reported: list[str] = []
    runner.error.connect(reported.append)

    def broken() -> None:
        raise ValueError("disk full")

    async def save() -> None:
        await runner.run(broken)

    spawn(save(), error_signal=runner.error)
    qtbot.waitUntil(lambda: reported == ["disk full"])


def test_a_cancelled_request_s_failure_is_dropped(runner: StoreRunner, qtbot: Any) -> None:
    errors: list[str] = []
    latest = LatestTask(runner, on_error=lambda exc: errors.append(str(exc)))
    gate = threading.Event()

    def fail() -> None:
        assert gate.wait(5)
        raise RuntimeError("late failure")

    async def load() -> None:
        await runner.run(fail)

    task = latest.start(load())
    qtbot.waitUntil(lambda: runner.in_flight == 1)
    latest.cancel()
    gate.set()
    qtbot.waitUntil(task.done)
    assert task.cancelled() and errors == []


def test_tickets_rise_fresh_keeps_the_newest_per_key_and_a_reset_cancels_every_read(runner: StoreRunner,
                                                                                   qtbot: Any) -> None:
    tickets, got = Tickets(runner), []
    gates = [threading.Event() for _ in range(3)]

    async def read(n: int, ticket: int) -> None:
        got.append((await runner.run(answer_when, gates[n], n), ticket))

    issued = [tickets.add(lambda ticket, n=n: read(n, ticket)) for n in range(3)]  # type: ignore[misc]
    for gate in reversed(gates):  # the newest finishes first
        gate.set()
    qtbot.waitUntil(lambda: len(got) == 3)
    by_value = dict(got)
    assert by_value[0] < by_value[1] < by_value[2] and sorted(issued) == issued
    assert tickets.fresh("row", by_value[2])
    assert not tickets.fresh("row", by_value[1])  # the row shows a newer answer: an older one is refused
    assert tickets.fresh("other row", by_value[0])  # per key
    late, errors = threading.Event(), []
    got.clear()

    async def slow(ticket: int) -> None:
        got.append((await runner.run(answer_when, late, "late"), ticket))

    tickets.add(slow, on_error=errors.append)
    qtbot.waitUntil(lambda: runner.in_flight == 1)
    tickets.cancel()
    late.set()
    qtbot.waitUntil(lambda: runner.in_flight == 0)
    assert got == [] and errors == []
    assert tickets.fresh("row", by_value[1])  # a reset forgets what rows showed
