"""PostgreSQL import: the next traces' indexes read ahead, and their probes asked in one statement.

Why: a trace's write starts with a question (`probe`: is its run stored, are its project, task and session
there?). Asked one trace at a time, on PostgreSQL the answer came back only after the server had inserted
the trace before it (the question rides behind those writes: `outbox`), so client and server took turns:
~0.9 ms a trace of the client waiting (cProfile, 5,000 traces of 20 spans). Asked for a batch of traces at
the start of a transaction, no trace waits for an answer: each trace's writes are posted as soon as they
are made, and the server inserts one trace while the client prepares the next. SQLite has no round trips:
there nothing is asked ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentdesk.store.ingest.probe import Ahead, Filing, ask_ahead
from agentdesk.store.ingest.spans import run_row_id
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.ingest.trace_write import filing
from agentdesk.store.uow import UnitOfWork

FIRST_BATCH = 16
MOST_BATCH = 512
"""Traces asked at once: twice what the last transaction wrote (a 20 ms slice holds ~15 small traces on
two cores), within these bounds; what a transaction does not reach is asked again in the next one."""


class Lookahead:
    """The traces an import will write next: their indexes (read once) and, per transaction, their probes."""

    def __init__(self, index_of: Callable[[str], TraceIndex], default_project: str | None, *,
                 most_spans: int, most_trace_spans: int) -> None:
        self._index_of = index_of
        self._default_project = default_project
        self._most_spans = most_spans
        """A batch stops where the transaction must (`SPANS_PER_TRANSACTION`)..."""
        self._most_trace_spans = most_trace_spans
        """... and before a trace written staged, alone (its index is read by the staged writer)."""
        self._indexes: dict[str, TraceIndex] = {}
        self._batch = FIRST_BATCH

    def begin(self, uow: UnitOfWork) -> Ahead | None:
        """A transaction starts: answers from the one before no longer hold. None on SQLite."""
        return Ahead() if uow.session.connection().dialect.name == "postgresql" else None

    def index(self, uow: UnitOfWork, ahead: Ahead | None, traces: Sequence[tuple[str, int]], at: int) -> TraceIndex:
        """`traces[at]`'s index; on PostgreSQL its probe asked first, with the batch of traces after it."""
        trace = traces[at][0]
        if ahead is not None and run_row_id(trace) not in ahead.answers:
            batch: list[Filing] = []
            spans = 0
            for name, size in traces[at:at + self._batch]:
                if batch and (size > self._most_trace_spans or spans + size > self._most_spans):
                    break
                if name not in self._indexes:
                    self._indexes[name] = self._index_of(name)
                batch.append(filing(self._indexes[name], self._default_project)[1])
                spans += size
            ask_ahead(uow.session.connection(), ahead, batch)
        index = self._indexes.pop(trace, None)
        return index if index is not None else self._index_of(trace)

    def end(self, written: int) -> None:
        """A transaction wrote `written` traces: the next batch is sized after it."""
        self._batch = max(FIRST_BATCH, min(MOST_BATCH, 2 * written))
