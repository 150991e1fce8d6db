"""Waiting for a state outside Qt (another thread or process, the store, the clock) without a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T], *, timeout_s: float = 20.0, what: str = "the condition",
               poll_s: float = 0.005) -> T:
    """The probe's first truthy answer; the timeout only turns a hang into a failure, it is not a limit."""
    give_up = time.monotonic() + timeout_s
    while not (found := probe()):
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(poll_s)
    return found


def wait_until(ready: Callable[[], object], *, timeout_s: float = 20.0, what: str = "the condition",
               poll_s: float = 0.005) -> None:
    """Poll `ready` until it is truthy (`eventually`, without the answer)."""
    eventually(ready, timeout_s=timeout_s, what=what, poll_s=poll_s)


def watcher_polled(watcher: object, polls: int = 3) -> None:
    """A polling watcher ran `polls` more polls: what "it wrote nothing" is asserted after."""
    from agentdesk.store.changes.polling import PollLoop

    loop = getattr(watcher, "_loop", None)
    assert isinstance(loop, PollLoop), watcher
    polled = loop.polls
    wait_until(lambda: loop.polls >= polled + polls, what=f"{polls} watcher polls")
