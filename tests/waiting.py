"""Waiting for a state outside Qt (another thread or process, the store, the clock) without a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(ready: Callable[[], object], *, timeout_s: float = 20.0, what: str = "the condition",
               poll_s: float = 0.005) -> None:
    """Poll `ready` until it is truthy; the timeout only turns a hang into a failure, it is not a limit."""
    give_up = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(poll_s)


def watcher_polled(watcher: object, polls: int = 3) -> None:
    """A polling watcher ran `polls` more polls: what "it wrote nothing" is asserted after."""
    from agentdesk.store.changes.polling import PollLoop

    loop = getattr(watcher, "_loop", None)
    assert isinstance(loop, PollLoop), watcher
    polled = loop.polls
    wait_until(lambda: loop.polls >= polled + polls, what=f"{polls} watcher polls")
