"""Latest answer wins: the one guard every model puts around its store reads.

Reads run on the runner's pool and complete in any order, so an answer can
arrive after a newer one, or after the model moved on (another run shown, the
tree reset by a feed gap). Every request gets a ticket from one rising counter.
Two ways to ask:

- `submit` supersedes: every earlier request's answer is dropped (a context
  reload, a timeline load: only the newest snapshot matters);
- `add` runs beside the others and hands its ticket to `on_done`, so a model that
  applies answers per row can keep the newest per key with `fresh(key, ticket)`
  (tree rows, approval rows).

`cancel` drops every answer still in flight, and forgets the per-key record.
Failures follow the same rule: a superseded request's error is dropped too,
and a current one without `on_error` goes to the runner's status-bar signal.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any

from agentdesk.model.runner import OnDone, OnError, StoreRunner

OnTicketed = Callable[[Any, int], None]
"""`on_done` of `add`: the result and the ticket the request was issued with."""


class Latest:
    def __init__(self, runner: StoreRunner) -> None:
        self._runner = runner
        self._tickets = itertools.count(1)
        self._floor = 0
        """Answers to tickets at or below this are dropped."""
        self._last = 0
        self._newest: dict[Hashable, int] = {}

    def submit(self, fn: Callable[..., Any], *args: Any, on_done: OnDone,
               on_error: OnError | None = None) -> int:
        """Run `fn(*args)` on the pool; only its answer counts, every earlier one is dropped."""
        self.cancel()
        return self._send(fn, args, lambda result, _ticket: on_done(result), on_error)

    def add(self, fn: Callable[..., Any], *args: Any, on_done: OnTicketed,
            on_error: OnError | None = None) -> int:
        """Run `fn(*args)` beside the requests in flight; `on_done(result, ticket)` unless cancelled."""
        return self._send(fn, args, on_done, on_error)

    def cancel(self) -> None:
        """Drop the answers of every request issued so far."""
        self._floor = self._last
        self._newest.clear()

    def ticket(self) -> int:
        """A ticket without a request: for what a model learns on its own, ordered with its reads."""
        self._last = next(self._tickets)
        return self._last

    def current(self, ticket: int) -> bool:
        """The ticket's answer would still be delivered (issued after the last `cancel`)."""
        return ticket > self._floor

    def fresh(self, key: Hashable, ticket: int) -> bool:
        """True, and remembered, unless `key` already shows an answer newer than `ticket`."""
        if ticket < self._newest.get(key, 0):
            return False
        self._newest[key] = ticket
        return True

    def _send(self, fn: Callable[..., Any], args: tuple[Any, ...], on_done: OnTicketed,
              on_error: OnError | None) -> int:
        ticket = self.ticket()

        def done(result: Any) -> None:
            if self.current(ticket):
                on_done(result, ticket)

        def failed(exc: BaseException) -> None:
            if not self.current(ticket):
                return
            if on_error is not None:
                on_error(exc)
            else:
                self._runner.error.emit(str(exc))

        self._runner.submit(fn, *args, on_done=done, on_error=failed)
        return ticket
