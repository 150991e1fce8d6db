"""Group commit: requests waiting to be made durable share one spool write and one fsync.

An fsync costs about the same for one request as for twenty, so the thread here
takes every request that arrived while the previous fsync ran and writes them
together. Each is then handed to the writer (in spool order, which the drained
checkpoint relies on) and its sender told it is durable. The event loop that
serves HTTP never waits on the disk: it only queues a request and awaits its answer.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentdesk.store.ingest.receiver_spool import Position, Record, Spool

log = logging.getLogger(__name__)

Durable = Callable[[BaseException | None], None]
"""Told once the request is fsynced (None) or could not be written (the error)."""
Written = Callable[["Pending", Position], None]
"""Hands a durable request to the writer, in spool order."""


@dataclass(slots=True)
class Pending:
    record: Record
    payload: Any
    """What the decoder made of the body: prepared spans (a list) or a `LogBatch`."""
    spans: int
    done: Durable


class GroupCommit:
    def __init__(self, spool: Spool, written: Written) -> None:
        self._spool = spool
        self._written = written
        self._queue: queue.Queue[Pending | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="agentdesk-otlp-spool", daemon=True)
        self.fsyncs = 0
        """How many fsyncs made how many requests durable (`requests`): the group commit's gain."""
        self.requests = 0

    def start(self) -> GroupCommit:
        self._thread.start()
        return self

    def submit(self, pending: Pending) -> None:
        self._queue.put(pending)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Write what is queued (its senders wait for the answer), then end the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            group, stop = [first], False
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                group.append(more)
            self._commit(group)
            if stop:
                return

    def _commit(self, group: list[Pending]) -> None:
        try:
            positions = self._spool.append([p.record for p in group])
        except OSError as exc:  # disk full, folder gone: nothing is acknowledged
            log.error("OTLP receiver: the spool could not be written: %s", exc)
            for p in group:
                self._spool.release(p.record.size)
                _tell(p, exc)
            return
        self.fsyncs += 1
        self.requests += len(group)
        for p, position in zip(group, positions, strict=True):
            self._written(p, position)
            _tell(p, None)


def _tell(pending: Pending, error: BaseException | None) -> None:
    try:
        pending.done(error)
    except Exception:  # a sender that went away must not stop the spool
        log.exception("OTLP receiver: reporting a spool write failed")
