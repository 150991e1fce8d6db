"""The receiver's single writer: a bounded queue in front of one thread that calls the ingest API.

Why one thread: the store takes one writer at a time anyway, and the ingest API
is written for one writer with batches in any order. Why bounded: when the
writer falls behind, `submit` refuses at once (`QueueFull`) and the HTTP side
answers 503 with Retry-After, which every OTLP exporter honours by retrying.
Nothing is ever accepted and then dropped: a request is answered only after its
spans were committed (or with the error that kept them out).

The bound is in time as well as in requests: the writer keeps a running
estimate of how many spans a second the store takes, and refuses a request when
the work already waiting would keep it more than `max_wait_s` in the queue.
An exporter gives up on a request after 10 s (the OTLP default timeout); a
request it has given up on would still be written, but the exporter would count
it as failed. A refusal, instead, it retries.

Requests already waiting when the writer comes round are merged into one ingest
call, so a burst costs a few transactions, not one per request. A merged call
is kept to about `MAX_TRANSACTION_S` of writing at the estimated rate (and
`MERGE_SPANS` at most): the store has one write lock, and an operator's
decision must not wait behind a long import transaction. If a merged call fails, each request is retried alone so the
error goes to the request that caused it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentdesk.store.errors import InvalidInput
from agentdesk.store.persistence.database import Store

log = logging.getLogger(__name__)

MERGE_SPANS = 5_000
MAX_TRANSACTION_S = 1.0
DEFAULT_MAX_WAIT_S = 4.0
"""Well inside the exporters' 10 s timeout, leaving room for the request's own write."""
RATE_SMOOTHING = 0.3
Ingest = Callable[[Store, Any], Any]
"""Writes one payload: an `ExportTraceServiceRequest`, or a list of prepared spans (`ingest_payload`)."""
Done = Callable[[Any, BaseException | None], None]


class QueueFull(Exception):
    """The writer is behind: the caller must refuse the request (never accept it and drop it)."""


@dataclass(slots=True)
class Job:
    request: Any
    """An `ExportTraceServiceRequest`, or the prepared spans of one (a list)."""
    spans: int
    done: Done


def merge(payloads: list[Any]) -> Any:
    """Several requests as one ingest call: prepared spans concatenated, or protobuf requests joined."""
    if all(isinstance(p, list) for p in payloads):
        return [span for p in payloads for span in p]
    merged = ExportTraceServiceRequest()
    for p in payloads:
        merged.resource_spans.extend(p.resource_spans)
    return merged


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


class IngestWriter:
    def __init__(self, store: Store, ingest: Ingest, *, max_queued: int = 16,
                 max_wait_s: float = DEFAULT_MAX_WAIT_S, clock: Callable[[], float] = time.perf_counter) -> None:
        """`clock` times each write (the rate estimate); a test gives its own instead of sleeping."""
        self.store = store
        self._ingest = ingest
        self._clock = clock
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=max_queued)
        self._max_wait_s = max_wait_s
        self._lock = threading.Lock()
        self._queued_spans = 0
        self._writing = False
        self.spans_per_s: float | None = None
        """Running estimate of what the store takes; None until the first write."""
        self._thread = threading.Thread(target=self._loop, name="agentdesk-otlp-writer", daemon=True)
        self._stopping = threading.Event()
        self.busy_s = 0.0
        """Seconds spent inside the ingest API: with `ingest_calls`, tells whether the store is the bottleneck."""
        self.ingest_calls = 0

    def start(self) -> IngestWriter:
        self._thread.start()
        return self

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    @property
    def idle(self) -> bool:
        with self._lock:
            return not self._writing and self._queued_spans == 0 and self._queue.empty()

    def submit(self, request: Any, spans: int, done: Done) -> None:
        """Queue a request; `done(report, error)` is called from the writer thread once it is settled."""
        if self._stopping.is_set():
            raise QueueFull("the receiver is stopping")
        with self._lock:
            rate, waiting = self.spans_per_s, self._queued_spans
            if waiting and rate and (waiting + spans) / rate > self._max_wait_s:
                raise QueueFull(f"about {waiting / rate:.1f} s of writing is already waiting for the store")
            try:
                self._queue.put_nowait(Job(request, spans, done))
            except queue.Full:
                raise QueueFull(f"{self._queue.maxsize} requests are already waiting for the store") from None
            self._queued_spans += spans

    def _taken(self, job: Job) -> None:
        with self._lock:
            self._queued_spans -= job.spans
            self._writing = True

    def stop(self, timeout_s: float = 30.0) -> None:
        """Finish what was queued (its senders are waiting for the answer), then end the thread."""
        self._stopping.set()
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            self._taken(job)
            jobs, stop = self._drain(job)
            try:
                self._write(jobs)
            finally:
                with self._lock:
                    self._writing = False
            if stop:
                return

    def merge_limit(self) -> int:
        """Spans one merged call may hold: about a second of writing, as far as the estimate knows."""
        with self._lock:
            rate = self.spans_per_s
        return MERGE_SPANS if rate is None else max(1, min(MERGE_SPANS, int(rate * MAX_TRANSACTION_S)))

    def _drain(self, first: Job) -> tuple[list[Job], bool]:
        jobs, spans, limit = [first], first.spans, self.merge_limit()
        while spans < limit and self._queue.qsize():
            if spans + self._peek_spans() > limit:
                break
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            self._taken(job)
            jobs.append(job)
            spans += job.spans
        return jobs, False

    def _peek_spans(self) -> int:
        """Spans of the next waiting request (the queue's own deque, read under its lock)."""
        with self._queue.mutex:
            head = self._queue.queue[0] if self._queue.queue else None
        return head.spans if head is not None else 0

    def _write(self, jobs: list[Job]) -> None:
        if len(jobs) == 1:
            self._one(jobs[0])
            return
        merged = merge([job.request for job in jobs])
        try:
            report = self._timed(merged, sum(job.spans for job in jobs))
        except InvalidInput:
            for job in jobs:  # find whose request it was: the others still get written
                self._one(job)
            return
        except Exception as exc:  # the store is locked or gone: every sender hears it, and may retry
            self._settle(jobs, None, exc)
            return
        self._settle(jobs, report, None)

    def _one(self, job: Job) -> None:
        try:
            report = self._timed(job.request, job.spans)
        except Exception as exc:
            self._settle([job], None, exc)
            return
        self._settle([job], report, None)

    def _timed(self, request: Any, spans: int) -> Any:
        started = self._clock()
        try:
            report = self._ingest(self.store, request)
        finally:
            elapsed = self._clock() - started
            self.busy_s += elapsed
            self.ingest_calls += 1
        self._note_rate(spans, elapsed)
        return report

    def _note_rate(self, spans: int, elapsed: float) -> None:
        if spans < 50 or elapsed <= 0:  # tiny writes are all overhead: they would make the estimate too low
            return
        rate = spans / elapsed
        with self._lock:
            old = self.spans_per_s
            self.spans_per_s = rate if old is None else old + RATE_SMOOTHING * (rate - old)

    @staticmethod
    def _settle(jobs: list[Job], report: Any, error: BaseException | None) -> None:
        for job in jobs:
            try:
                job.done(report, error)
            except Exception:  # a sender that went away must not stop the writer
                log.exception("OTLP receiver: reporting a write result failed")
