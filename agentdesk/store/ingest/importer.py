"""Importing OTLP files: stream every record into a spill file, then publish whole traces.

Why two phases: a trace can be spread over many lines of a JSON Lines file (and a
line can hold many traces), yet a trace must become visible atomically and memory
must stay bounded. Records are decoded and staged, as they stream, into a private
temporary SQLite file (never the store); then each trace is written into the
store in one transaction (small traces batched several to a transaction), or, for
a large one, staged over many short transactions and made visible by a last short
one (`store.otel.staging`), so no reader ever sees half a trace. The
transactions are short for the operator's sake: the import is a bulk writer that
steps aside for an operator's write, and a transaction takes no further trace once
it has held the lock `IMPORT_SLICE_S` or an operator's write is waiting.

A bad record stops reading with a `BadRecord` naming it; the traces staged from
the records before it are still published (the import keeps every trace it read
whole), and the error is raised after. Cancelling (the `cancel` event) stops at
the next record or between transactions: only whole traces are left. The audit
log gets one `otel.import` record for the whole import, whatever happened.
"""

from __future__ import annotations

import gc
import marshal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentdesk.store.errors import InvalidInput, StoreError
from agentdesk.store.ids import new_id
from agentdesk.store.ingest import search_marks, staging
from agentdesk.store.ingest.decode import Skipped
from agentdesk.store.ingest.formats import ImportLimits, TraceFile
from agentdesk.store.ingest.ingest import ingest_logs
from agentdesk.store.ingest.logs import LogBatch
from agentdesk.store.ingest.lookahead import Lookahead
from agentdesk.store.ingest.marks_otel import Restored, may_carry_marks
from agentdesk.store.ingest.marks_otel import restore as restore_marks
from agentdesk.store.ingest.outbox import post
from agentdesk.store.ingest.prepare import Prepared, Preparer, fewer_collections
from agentdesk.store.ingest.report import IngestReport
from agentdesk.store.ingest.spans import BadRecord, run_row_id
from agentdesk.store.ingest.staged_writer import StagedTraceWriter
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.ingest.writer import write_trace
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.turn_waiters import TurnWaiters
from agentdesk.store.uow import UnitOfWork

IMPORT_ACTOR = "import"
SPANS_PER_TRANSACTION = 20_000
"""Small traces are published several to a transaction up to this many spans (a big one alone)."""
IMPORT_SLICE_S = 0.02
"""A transaction takes no further trace once it has held the write lock this long (or an operator waits)."""
OPERATOR_COURTESY_S = 0.05
"""After ending a transaction for a waiting operator, the import pauses this long before its next trace."""
CHUNK = 2_000
STAGED_SPANS = CHUNK
"""A trace of more spans than this is written staged: many short transactions, then a flip
(`store.otel.staging`); a smaller one is written in one transaction (it takes a few ms)."""
STAGED_STEP = 200
"""Spans per write call of a staged trace (~10-20 ms): the granularity at which it can step aside."""
STAGED_SLICE_S = 1.0
"""A staged trace's transaction takes no further piece after holding the lock this long; it ends at
once, after the piece in flight (~10-20 ms), when an operator's write waits. Long enough that a
100,000-span trace costs a few dozen commits, not hundreds (50 ms slices made that import ~50 %
slower: WAL rewrites and checkpoints); short enough that runtimes queued behind it wait ~1 s."""
UNSIGNALLED_SLICE_S = 0.05
"""The slice where no operator's wait can be seen (a SQLite store without its writer gate), so a decision
waits at most this long behind the import. PostgreSQL's lock table shows a waiting operator
(`postgres.turn_waiters`): there the slice is `STAGED_SLICE_S` too (it was this one: ~130 transactions for
100,000 spans, each starting with the server idle; 10.3 -> ~9.4 s of writing)."""
MEMORY_SPANS = 20_000
"""Decoded spans held in memory before staging moves to the spill file (~2.5 KB each: ~50 MB)."""


@dataclass
class ImportProgress:
    phase: str
    """"reading" (decoding and staging) or "writing" (publishing traces into the store)."""
    bytes_read: int
    bytes_total: int
    spans_read: int
    spans_done: int
    spans_total: int
    traces_done: int
    traces_total: int


@dataclass
class ImportResult:
    report: IngestReport
    files: list[str]
    spans_read: int
    seconds: float
    cancelled: bool = False
    error: BadRecord | None = None
    formats: list[str] = field(default_factory=list)
    strings_cut: int = 0
    """Strings longer than the limit (`ImportLimits.max_string_chars`), kept cut with a marker."""
    skipped: Skipped = field(default_factory=Skipped)
    """Spans that could not be mapped, by reason (the summary names them); the rest was imported."""
    limits: ImportLimits = field(default_factory=ImportLimits)
    logs: LogBatch = field(default_factory=LogBatch)
    """Log records read (OTLP `resourceLogs`): joined to their spans once the spans are written."""
    marks: Restored = field(default_factory=Restored)
    """Operators' notes and labels the spans carried (`agentdesk.note` events), written back as notes and labels."""


class ImportCancelled(StoreError):
    exit_code = 1


ProgressFn = Callable[[ImportProgress], None]


class _Spill:
    """The private staging file: each chunk's spans of one trace appended as two marshal blobs (the
    facts that place them, and the whole records), found again through an in-memory list per trace.

    Append-only and read back in arrival order, so it costs a write and a read of each record and
    nothing else (no B-tree, no index), and memory holds a few numbers per chunk, not the spans.
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="agentdesk-import-")  # noqa: SIM115 (closed in close())
        self._end = 0
        self._blobs: dict[str, list[tuple[int, int, int, int, int]]] = {}
        """trace -> [(facts offset, facts size, records offset, records size, spans)], in arrival order."""
        self.spans = 0

    def _append(self, data: bytes) -> tuple[int, int]:
        self._file.seek(self._end)
        self._file.write(data)
        offset, self._end = self._end, self._end + len(data)
        return offset, len(data)

    def _read(self, offset: int, size: int) -> bytes:
        self._file.seek(offset)
        return self._file.read(size)

    def add(self, spans: Sequence[Prepared]) -> None:
        by_trace: dict[str, list[Prepared]] = {}
        for span in spans:
            by_trace.setdefault(span.trace_id, []).append(span)
        for trace, group in by_trace.items():
            facts = marshal.dumps([(s.span_id, s.parent_id, s.agent_key, s.agent_name, s.start_ns, s.project,
                                    s.conversation, s.name) for s in group])
            records = marshal.dumps([tuple(s) for s in group])
            self._blobs.setdefault(trace, []).append((*self._append(facts), *self._append(records), len(group)))
        self.spans += len(spans)

    def drop(self, traces: set[str]) -> None:
        for trace in traces:
            self.spans -= sum(entry[4] for entry in self._blobs.pop(trace, []))

    def traces(self) -> list[tuple[str, int]]:
        """Every trace with its span count, in the order its first span arrived."""
        return [(trace, sum(entry[4] for entry in entries)) for trace, entries in self._blobs.items()]

    def index(self, trace: str) -> TraceIndex:
        index = TraceIndex(trace)
        for facts_at, facts_size, _, _, _ in self._blobs[trace]:
            for row in marshal.loads(self._read(facts_at, facts_size)):
                index.note(*row)
        return index

    def chunks(self, trace: str) -> Iterator[list[Prepared]]:
        batch: list[Prepared] = []
        for _, _, records_at, records_size, _ in self._blobs[trace]:
            batch.extend(map(Prepared._make, marshal.loads(self._read(records_at, records_size))))
            if len(batch) >= CHUNK:
                yield batch
                batch = []
        if batch:
            yield batch

    def close(self) -> None:
        self._file.close()


class _Staging:
    """Decoded spans waiting to be published: in memory up to a budget, then in the spill file.

    Most imports fit the budget and skip the spill's encode/insert/read round trip (a third
    of the reading time); a bigger input moves everything to the spill at once, so memory
    stays bounded by `MEMORY_SPANS` whatever the input size.
    """

    def __init__(self, memory_spans: int) -> None:
        self.memory_spans = memory_spans
        self.held: dict[str, list[Prepared]] = {}
        self.spill: _Spill | None = None
        self.spans = 0
        self.marked: set[str] = set()
        """Traces a span of which may carry an operator's note or label (`marks_otel`): only their runs are
        read back for marks after publishing (reading every span back cost ~1.3 s per 100,000 spans)."""

    def add(self, spans: Sequence[Prepared]) -> None:
        self.marked.update(s.trace_id for s in spans if may_carry_marks(s.attributes))
        if self.spill is None and self.spans + len(spans) > self.memory_spans:
            self.spill = _Spill()
            for held in self.held.values():
                self.spill.add(held)
            self.held = {}
        if self.spill is not None:
            self.spill.add(spans)
        else:
            for span in spans:
                self.held.setdefault(span.trace_id, []).append(span)
        self.spans += len(spans)

    def drop(self, traces: set[str]) -> None:
        if self.spill is not None:
            self.spill.drop(traces)
            self.spans = self.spill.spans
        else:
            for trace in traces:
                self.spans -= len(self.held.pop(trace, []))

    def traces(self) -> list[tuple[str, int]]:
        if self.spill is not None:
            return self.spill.traces()
        return [(trace, len(spans)) for trace, spans in self.held.items()]

    def index(self, trace: str) -> TraceIndex:
        if self.spill is not None:
            return self.spill.index(trace)
        index = TraceIndex(trace)
        for span in self.held[trace]:
            index.add(span)
        return index

    def chunks(self, trace: str) -> Iterator[list[Prepared]]:
        if self.spill is not None:
            yield from self.spill.chunks(trace)
            return
        spans = self.held[trace]
        for n in range(0, len(spans), CHUNK):
            yield spans[n:n + CHUNK]

    def close(self) -> None:
        self.held = {}
        if self.spill is not None:
            self.spill.close()


def _stage(spill: _Staging, trace_file: TraceFile, ready: list[Prepared]) -> None:
    """Stage mapped spans (decoded as they were mapped: their traces are the document's, which a bad record
    after them drops)."""
    if trace_file.decoded_later:
        trace_file.current_traces.update(span.trace_id for span in ready)
    spill.add(ready)


def import_files(store: Store, paths: Sequence[Path], *, default_project: str | None = None,
                 progress: ProgressFn | None = None, cancel: threading.Event | None = None,
                 actor: str = IMPORT_ACTOR, helper: bool = True, limits: ImportLimits | None = None) -> ImportResult:
    """Import OTLP files; returns what was written. Raises only for an unusable store.

    A bad record is reported in `result.error` (after publishing the whole traces read
    before it); a cancel in `result.cancelled`. `helper=False` maps every span in this
    process instead of sharing the work with a helper process.
    """
    began = time.perf_counter()
    thresholds = gc.get_threshold()
    fewer_collections()
    try:
        return _import(store, paths, default_project, progress, cancel, actor, helper, began,
                       limits or ImportLimits())
    finally:
        gc.set_threshold(*thresholds)


def _import(store: Store, paths: Sequence[Path], default_project: str | None, progress: ProgressFn | None,
            cancel: threading.Event | None, actor: str, helper: bool, began: float,
            limits: ImportLimits) -> ImportResult:
    total_bytes = sum(p.stat().st_size for p in paths)
    spill = _Staging(MEMORY_SPANS)
    preparer = Preparer(helper=helper, pack=not store.is_postgres)
    result = ImportResult(IngestReport(), [str(p) for p in paths], 0, 0.0, limits=limits)
    done_bytes = decoded = 0
    try:
        try:
            for path in paths:
                trace_file = TraceFile(path, limits)
                try:
                    for record in trace_file.records():
                        decoded += record.count
                        for ready in preparer.put(record.chunk or record.spans):
                            _stage(spill, trace_file, ready)
                        if progress is not None:
                            progress(ImportProgress("reading", done_bytes + trace_file.position, total_bytes,
                                                    decoded, 0, 0, 0, 0))
                        if cancel is not None and cancel.is_set():
                            result.cancelled = True
                            break
                    if not result.cancelled:
                        for ready in preparer.drain():
                            _stage(spill, trace_file, ready)
                    result.formats.append(trace_file.format)
                except BadRecord:
                    try:
                        for ready in preparer.drain():  # the records before the bad one
                            _stage(spill, trace_file, ready)
                    except BadRecord:  # the bad one itself, in the helper's queue (`json_spans`)
                        pass
                    spill.drop(trace_file.current_traces)  # no trace the bad document touched is published
                    raise
                finally:
                    result.strings_cut += trace_file.strings_cut
                    result.skipped.update(trace_file.skipped)
                    result.logs.logs.extend(trace_file.logs.logs)
                    result.logs.unplaced += trace_file.logs.unplaced
                    trace_file.close()
                done_bytes += path.stat().st_size
                if result.cancelled:
                    break
        except BadRecord as exc:
            result.error = exc
        finally:
            preparer.close()
            result.skipped.update(preparer.skipped)
            result.strings_cut += preparer.strings_cut
        result.spans_read = spill.spans
        if not result.cancelled:
            _publish(store, spill, result, default_project, progress, cancel)
            marked = {run_row_id(trace) for trace in spill.marked}
            result.marks = restore_marks(store, [run for run in result.report.run_ids if run in marked])
            if result.logs.logs or result.logs.unplaced:
                logs = ingest_logs(store, result.logs, actor=actor)
                result.report.events_joined += logs.events_joined
                result.report.events_waiting += logs.events_waiting
                result.report.logs_unplaced += logs.logs_unplaced
        _audit(store, result, actor)
    finally:
        spill.close()
    result.seconds = time.perf_counter() - began
    return result


class _Stop(Exception):
    """Cancel pressed while a trace was being written: its transaction rolls back, whole."""


def _publish(store: Store, spill: _Staging, result: ImportResult, default_project: str | None,
             progress: ProgressFn | None, cancel: threading.Event | None) -> None:
    traces = spill.traces()
    done = {"spans": 0, "traces": 0}

    def report() -> None:
        if progress is not None:
            progress(ImportProgress("writing", 0, 0, spill.spans, done["spans"], spill.spans, done["traces"],
                                    len(traces)))

    def chunks(trace: str) -> Iterator[list[Prepared]]:
        """A trace's chunks, reporting each one written (a big trace is one long transaction)."""
        for chunk in spill.chunks(trace):
            if cancel is not None and cancel.is_set():
                raise _Stop
            yield chunk
            done["spans"] += len(chunk)
            report()

    staging.clean_stale(store, keep={run_row_id(trace) for trace, _ in traces})
    resources: set[str] = set()
    """Resource keys known stored, shared by this import's traces (`TraceWriter._resources`): a failed
    transaction ends the import, so no key stays here whose row rolled back."""
    lookahead = Lookahead(spill.index, default_project, most_spans=SPANS_PER_TRANSACTION,
                          most_trace_spans=STAGED_SPANS)
    n = 0
    yielded = False
    while n < len(traces):
        if traces[n][1] > STAGED_SPANS:
            if cancel is not None and cancel.is_set():
                result.cancelled = True
                return
            before = done["spans"]
            try:
                staged = _write_staged(store, spill, traces[n][0], chunks, default_project)
            except _Stop:
                result.cancelled = True
                done["spans"] = before
                return
            if staged is not None:
                result.report.add(staged)
                n += 1
                done["spans"] = before + traces[n - 1][1]
                done["traces"] += 1
                report()
                continue
        if cancel is not None and cancel.is_set():
            result.cancelled = True
            return
        before, size = done["spans"], 0
        reports: list[IngestReport] = []
        # A collection inside a short transaction held the lock 150-300 ms under load: it runs after it.
        # A large trace (one long transaction anyway) keeps the collector, so its memory stays bounded.
        collecting = gc.isenabled() and traces[n][1] <= CHUNK
        if collecting:
            gc.disable()
        try:
            # A bulk writer (`runtime=True`): it queues with the runtimes and steps aside for an operator's
            # write; between traces it ends its transaction once it has held the lock for
            # IMPORT_SLICE_S, or as soon as an operator's write is waiting (a decision then waits for at
            # most the trace being written, never for the rest of the batch).
            with UnitOfWork(store, runtime=True) as uow, search_marks.deferred(uow.session.connection()):
                began = time.monotonic()
                ahead = lookahead.begin(uow)
                while n + len(reports) < len(traces):
                    trace, spans = traces[n + len(reports)]
                    if reports and (size + spans > SPANS_PER_TRANSACTION
                                    or time.monotonic() - began >= IMPORT_SLICE_S):
                        break
                    if reports and uow.operator_waiting():
                        yielded = True
                        break
                    index = lookahead.index(uow, ahead, traces, n + len(reports))
                    reports.append(write_trace(uow, index, chunks(trace), default_project, resources, ahead))
                    size += spans
        except _Stop:
            result.cancelled = True
            done["spans"] = before
            return
        finally:
            if collecting:
                gc.enable()
        if yielded:  # leave the CPU to the decision too, not only the lock (2 cores: it was starved of both)
            time.sleep(OPERATOR_COURTESY_S)
            yielded = False
        lookahead.end(len(reports))
        for r in reports:
            result.report.add(r)
        n += len(reports)
        done["spans"] = before + size
        done["traces"] += len(reports)
        report()


def _write_staged(store: Store, spill: _Staging, trace: str, chunks: Callable[[str], Iterator[list[Prepared]]],
                  default_project: str | None) -> IngestReport | None:
    """One large trace in short transactions, invisible until the flip; None when its run is already
    visible (more spans for a finished trace: one transaction, as before, so it never shows half).

    Each transaction writes `STAGED_STEP`-span pieces until it has held the lock `STAGED_SLICE_S` or
    an operator's write waits (then the import also pauses `OPERATOR_COURTESY_S`). A cancel (`_Stop`
    from `chunks`) rolls back only the piece in flight: the rest stays staged, hidden, resumable.
    """
    index = spill.index(trace)
    index.cycle()  # the trace's pure work (loop check, start order) before the lock, not under it
    index.by_start()
    with UnitOfWork(store, runtime=True) as uow:
        if staging.state(uow, run_row_id(trace)) == "visible":
            return None
        writer = StagedTraceWriter(uow, index, default_project)
        writer.prepare()
    pieces = (chunk[i:i + STAGED_STEP] for chunk in chunks(trace) for i in range(0, len(chunk), STAGED_STEP))
    piece = next(pieces, None)
    # PostgreSQL: the lock table says when an operator waits (SQLite: the unit of work's writer gate)
    waiters = TurnWaiters(store.engine) if store.is_postgres else None
    try:
        while piece is not None:
            waiting = False
            with UnitOfWork(store, runtime=True) as uow, search_marks.deferred(uow.session.connection()):
                writer.rebind(uow)
                began = time.monotonic()
                signalled = uow.signals_operators or waiters is not None
                slice_s = STAGED_SLICE_S if signalled else UNSIGNALLED_SLICE_S
                while piece is not None:
                    writer.write(piece)
                    writer.place_written()
                    post(uow.session.connection())  # PostgreSQL inserts this piece while the next is prepared
                    piece = next(pieces, None)
                    waiting = uow.operator_waiting() or (waiters is not None and waiters.waiting())
                    if waiting or time.monotonic() - began >= slice_s:
                        break
                writer.heartbeat()
            if waiting:
                time.sleep(OPERATOR_COURTESY_S)
    finally:
        if waiters is not None:
            waiters.close()
    with store.reading() as s:  # the roll-up's scan of the run reads, outside the write lock
        facts = writer.roll_up_facts(s.connection())
    with UnitOfWork(store, runtime=True) as uow:
        writer.rebind(uow)
        writer.settle(facts)
    with UnitOfWork(store, runtime=True) as uow:
        writer.rebind(uow)
        return writer.flip()


def _audit(store: Store, result: ImportResult, actor: str) -> None:
    """The import as one audited operation, including how it ended."""
    report = result.report
    if not (report.spans_written or report.completed or result.error or result.cancelled or result.skipped):
        return
    with UnitOfWork(store) as uow:
        uow.audit(actor, "otel.import", "import", new_id("imp"), {
            "files": result.files, "spans_read": result.spans_read, "spans_written": report.spans_written,
            "duplicates": report.duplicates, "completed": report.completed, "traces": report.traces,
            "orphans_pending": report.orphans_pending, "cancelled": result.cancelled,
            "error": str(result.error) if result.error else None, "runs": report.run_ids[:100],
            "strings_cut": result.strings_cut, "skipped": dict(result.skipped)})


def check_paths(paths: Sequence[Path]) -> None:
    for path in paths:
        if not path.is_file():
            raise InvalidInput(f"{path} is not a file that can be imported.")
