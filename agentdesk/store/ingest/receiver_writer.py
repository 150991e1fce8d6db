"""The receiver's single writer: drains the spool into the store in large batches.

Requests reach it already durable (`receiver_spool`, `receiver_commit`) and
already answered 200, so nothing here keeps an exporter waiting: the writer takes
everything that queued up while it wrote and writes it as one ingest call (one
transaction), kept to about `MAX_TRANSACTION_S` of writing at the estimated rate
and `MERGE_SPANS` at most, since the store has one write lock and an operator's
decision must not wait behind a long one. After each commit every entry's `done`
runs, in spool order (it moves the spool's drained checkpoint).

Why one thread: the store takes one writer at a time anyway, and the ingest API
is written for one writer with batches in any order.

When the store is locked or gone (`StoreUnavailable`) the batch is tried again
after a pause, and the spool fills until the receiver answers 429. When the store
refuses a batch as invalid, each entry is tried alone, so only the one at fault is
set aside (`rejected`: kept in the spool's `rejected.otlp`, counted and logged);
the decoder validated it before it was acknowledged, so that means a bug, not an
agent's mistake.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.ingest.receiver_spool import Record
from agentdesk.store.persistence.database import Store

log = logging.getLogger(__name__)

MERGE_SPANS = 20_000
MAX_TRANSACTION_S = 1.0
RATE_SMOOTHING = 0.3
RETRY_S = 1.0
"""Pause before trying a batch again when the store was unavailable."""
Ingest = Callable[[Store, Any], Any]
"""Writes one payload: an `ExportTraceServiceRequest`, a list of prepared spans, or a `LogBatch` (`ingest_payload`)."""


@dataclass(slots=True)
class Entry:
    payload: Any
    """What to write; None for a marker that only runs `done` in its turn (an adopted spool finished)."""
    spans: int
    record: Record | None
    """The spooled record, to set aside if the store refuses it."""
    done: Callable[[], None]
    """Runs after the commit that wrote it, in spool order."""


Rejected = Callable[[Entry, BaseException], None]


def merge(payloads: list[Any]) -> Any:
    """Several payloads of one kind as one ingest call: prepared spans concatenated, protobuf requests joined."""
    if len(payloads) == 1:
        return payloads[0]
    if all(isinstance(p, list) for p in payloads):
        return [span for p in payloads for span in p]
    if all(isinstance(p, ExportTraceServiceRequest) for p in payloads):
        merged = ExportTraceServiceRequest()
        for p in payloads:
            merged.resource_spans.extend(p.resource_spans)
        return merged
    raise TypeError("only prepared spans or trace requests merge")


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def _sort(entry: Entry) -> type | None:
    """Entries of one sort merge: lists with lists, requests with requests; logs and markers stay alone."""
    payload = entry.payload
    return type(payload) if isinstance(payload, list | ExportTraceServiceRequest) else None


class IngestWriter:
    def __init__(self, store: Store, ingest: Ingest, *, rejected: Rejected | None = None,
                 clock: Callable[[], float] = time.perf_counter, retry_s: float = RETRY_S) -> None:
        """`clock` times each write (the rate estimate); a test gives its own instead of sleeping."""
        self.store = store
        self._ingest = ingest
        self._rejected = rejected or _log_rejected
        self._clock = clock
        self._retry_s = retry_s
        self._queue: queue.Queue[Entry | None] = queue.Queue()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._replaying = True
        self._outstanding = 0
        """Entries submitted and not yet written (or set aside)."""
        self._replay: Iterable[Entry] = ()
        self.spans_per_s: float | None = None
        """Running estimate of what the store takes; None until the first write."""
        self._thread = threading.Thread(target=self._loop, name="agentdesk-otlp-writer", daemon=True)
        self._stopping = threading.Event()
        self.abandoned = False
        """Stopped with entries unwritten (the store was unavailable): they stay in the spool for the next start."""
        self.busy_s = 0.0
        """Seconds spent inside the ingest API: with `ingest_calls`, tells whether the store is the bottleneck."""
        self.ingest_calls = 0
        self.rejected = 0

    def start(self, replay: Iterable[Entry] = ()) -> IngestWriter:
        """`replay`: entries from adopted spools, written before anything that arrives now."""
        self._replay = replay
        self._thread.start()
        return self

    def submit(self, entry: Entry) -> None:
        with self._lock:
            self._outstanding += 1
        self._queue.put(entry)

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing being written: every acknowledged span is in the store."""
        with self._lock:
            return not self._replaying and not self._outstanding

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until every entry submitted so far is written (or set aside); False on timeout."""
        with self._settled:
            return self._settled.wait_for(lambda: not self._replaying and not self._outstanding, timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Write what is queued, then end the thread; an unavailable store ends it at once (`abandoned`)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout_s)
        if self._thread.is_alive() or not self._queue.empty():
            self.abandoned = True

    def _loop(self) -> None:
        try:
            self._write_all(self._replay)
        except Exception:  # an unreadable adopted spool must not keep the receiver from writing
            log.exception("OTLP receiver: replaying the spool failed")
        self._replay = ()
        with self._settled:
            self._replaying = False
            self._settled.notify_all()
        while True:
            entry = self._queue.get()
            if entry is None:
                return
            batch = self._drain(entry)
            if not self._write(batch):
                self.abandoned = True
                return

    def _write_all(self, entries: Iterable[Entry]) -> None:
        """The replay: entries read and decoded as they are needed, merged as the live ones are."""
        batch: list[Entry] = []
        spans, limit = 0, self.merge_limit()
        for entry in entries:
            with self._lock:
                self._outstanding += 1
            if batch and (_sort(entry) is None or _sort(entry) != _sort(batch[0]) or spans + entry.spans > limit):
                if not self._write(batch):
                    return
                batch, spans, limit = [], 0, self.merge_limit()
            batch.append(entry)
            spans += entry.spans
        if batch:
            self._write(batch)

    def merge_limit(self) -> int:
        """Spans one merged call may hold: about a second of writing, as far as the estimate knows."""
        with self._lock:
            rate = self.spans_per_s
        return MERGE_SPANS if rate is None else max(1, min(MERGE_SPANS, int(rate * MAX_TRANSACTION_S)))

    def _drain(self, first: Entry) -> list[Entry]:
        """The first entry and those queued behind it that merge with it."""
        batch, spans, limit = [first], first.spans, self.merge_limit()
        sort = _sort(first)
        while sort is not None and spans < limit:
            head = self._peek()
            if head is None or _sort(head) != sort or spans + head.spans > limit:
                break
            entry = self._queue.get_nowait()
            assert entry is head
            batch.append(entry)
            spans += entry.spans
        return batch

    def _peek(self) -> Entry | None:
        with self._queue.mutex:
            return self._queue.queue[0] if self._queue.queue else None

    def _write(self, batch: list[Entry]) -> bool:
        """Write a batch and run its entries' `done`; False when stopping with the store unavailable."""
        payloads = [e.payload for e in batch if e.payload is not None]
        while payloads:
            try:
                self._timed(merge(payloads), sum(e.spans for e in batch))
                break
            except StoreUnavailable as exc:
                log.warning("OTLP receiver: the store is unavailable (%s); the spool keeps the spans", exc)
                if self._stopping.wait(self._retry_s):
                    return False
            except Exception as exc:
                if len(batch) > 1:  # find whose it was: the others still get written
                    return all(self._write([e]) for e in batch)
                self.rejected += 1
                self._rejected(batch[0], exc)
                break
        for entry in batch:
            entry.done()
        with self._settled:
            self._outstanding -= len(batch)
            self._settled.notify_all()
        return True

    def _timed(self, payload: Any, spans: int) -> Any:
        started = self._clock()
        try:
            return self._ingest(self.store, payload)
        finally:
            elapsed = self._clock() - started
            self.busy_s += elapsed
            self.ingest_calls += 1
            self._note_rate(spans, elapsed)

    def _note_rate(self, spans: int, elapsed: float) -> None:
        if spans < 50 or elapsed <= 0:  # tiny writes are all overhead: they would make the estimate too low
            return
        rate = spans / elapsed
        with self._lock:
            old = self.spans_per_s
            self.spans_per_s = rate if old is None else old + RATE_SMOOTHING * (rate - old)


def _log_rejected(entry: Entry, error: BaseException) -> None:
    log.error("OTLP receiver: the store refused %d acknowledged spans: %s", entry.spans, error)
