"""What the receiver has taken and refused, for the CLI's counters and the window's status bar.

Written from the receiver's loop, read from anywhere (the GUI thread polls a
snapshot once a second), so every access holds one lock and readers get a
frozen copy.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class ReceiverCounters:
    listening_on: str | None = None
    requests: int = 0
    """Requests answered 200: their spans are durable in the spool (and in the store once the writer drains it)."""
    spans: int = 0
    log_records: int = 0
    """Log records (GenAI events, other logs) accepted on /v1/logs: joined to their span, or kept for it."""
    refused_requests: int = 0
    """Answered 429 (the spool over its bound: the writer is behind) or 503 (the spool cannot be written), with
    Retry-After: the exporter sends them again."""
    refused_spans: int = 0
    """Spans of refused requests that were decoded first (one refused while the spool was full is not)."""
    rejected_requests: int = 0
    """Answered 4xx: unreadable, too large, wrong type, no token. Retrying will not help."""
    failed_requests: int = 0
    """Answered 500 (a bug), or acknowledged and then refused by the store (kept in the spool's
    `rejected.otlp`); logged."""
    last_problem: str = ""
    last_request_at: float | None = None

    def summary(self) -> str:
        refused = f"{self.refused_requests:,} refused (429/503)"
        rejected = f", {self.rejected_requests:,} rejected" if self.rejected_requests else ""
        failed = f", {self.failed_requests:,} failed" if self.failed_requests else ""
        logs = f" and {self.log_records:,} log records" if self.log_records else ""
        return f"{self.spans:,} spans{logs} in {self.requests:,} requests accepted, {refused}{rejected}{failed}"


class ReceiverStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters = ReceiverCounters()

    def snapshot(self) -> ReceiverCounters:
        with self._lock:
            return self._counters

    def _change(self, **deltas: int) -> None:
        """Add to counters in one step under the lock (readers never see half an update)."""
        with self._lock:
            c = self._counters
            values = {name: getattr(c, name) + delta for name, delta in deltas.items()}
            self._counters = replace(c, last_request_at=time.time(), **values)

    def _problem(self, problem: str) -> None:
        with self._lock:
            self._counters = replace(self._counters, last_problem=problem)

    def listening(self, address: str | None) -> None:
        with self._lock:
            self._counters = replace(self._counters, listening_on=address)

    def accepted(self, spans: int, *, logs: bool = False) -> None:
        """`spans`: the request's spans, or its log records when `logs`."""
        if logs:
            self._change(requests=1, log_records=spans)
        else:
            self._change(requests=1, spans=spans)

    def refused(self, spans: int, problem: str = "the writer was behind") -> None:
        self._change(refused_requests=1, refused_spans=spans)
        self._problem(problem)

    def rejected(self, problem: str) -> None:
        self._change(rejected_requests=1)
        self._problem(problem)

    def failed(self, problem: str) -> None:
        self._change(failed_requests=1)
        self._problem(problem)
