"""File import: every format by content, streamed, idempotent, and refusing bad files clearly."""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from agentdesk.store.audit import verify_chain
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.schema import AuditRow, RunRow, SpanRow
from tests.store.ingest.traces import agent_trace, otlp_json, request_of

ROOT = Path(__file__).resolve().parents[3]


def write_json(path: Path, doc: Any, indent: int | None = None) -> Path:
    path.write_text(json.dumps(doc, indent=indent))
    return path


def spans_in(store: Store) -> int:
    with store.reading() as s:
        return s.query(SpanRow).count()


def runs_in(store: Store) -> set[str]:
    with store.reading() as s:
        return {r.id for r in s.query(RunRow)}


def cli(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "agentdesk.cli", "--store", str(store), *args],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("shape", ["json", "json-pretty", "jsonl", "protobuf", "records", "gzip", "base64"])
def test_every_format_is_detected_by_content(tmp_path: Path, store: Store, shape: str) -> None:
    a, b = agent_trace(service="alpha"), agent_trace(service="beta", conversation=None)
    path = tmp_path / "traces.data"  # no telling extension: detection is by content
    if shape == "json":
        write_json(path, otlp_json(a + b))
    elif shape == "json-pretty":
        write_json(path, otlp_json(a + b), indent=2)
    elif shape == "jsonl":
        path.write_text(json.dumps(otlp_json(a)) + "\n\n" + json.dumps(otlp_json(b)) + "\n")
    elif shape == "protobuf":
        path.write_bytes(request_of(a + b).SerializeToString())
    elif shape == "records":
        blobs = [request_of(x).SerializeToString() for x in (a, b)]
        path.write_bytes(b"".join(len(x).to_bytes(4, "big") + x for x in blobs))
    elif shape == "gzip":
        path.write_bytes(gzip.compress(json.dumps(otlp_json(a + b)).encode()))
    else:  # what many exporters write: base64 ids, enum names, int64 as numbers
        from google.protobuf import json_format
        doc = json_format.MessageToDict(request_of(a + b))
        for rs in doc["resourceSpans"]:
            for span in rs["scopeSpans"][0]["spans"]:
                span["startTimeUnixNano"] = int(span["startTimeUnixNano"])
                assert base64.b64decode(span["traceId"])
        write_json(path, doc)
    result = import_files(store, [path])
    assert result.error is None
    assert (result.report.spans_written, result.report.traces) == (16, 2)
    assert {p.name for p in NativeSource(store).projects()} == {"alpha", "beta"}


def test_reimport_adds_nothing_and_the_import_is_one_audit_record(tmp_path: Path, store: Store) -> None:
    path = write_json(tmp_path / "t.json", otlp_json(agent_trace()))
    first = import_files(store, [path])
    again = import_files(store, [path])
    assert (first.report.spans_written, again.report.spans_written, again.report.duplicates) == (8, 0, 8)
    assert spans_in(store) == 8
    with store.reading() as s:
        actions = [a for (a,) in s.query(AuditRow.action)]
        assert actions == ["otel.import"]  # an import that changed nothing is not an operation
        assert verify_chain(s).ok


@pytest.fixture(params=["memory", "spill"])
def staging(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with spans staged in memory, and again through the spill file (a tiny budget)."""
    if request.param == "spill":
        import agentdesk.store.ingest.importer as importer
        monkeypatch.setattr(importer, "MEMORY_SPANS", 3)
    return str(request.param)


def test_a_trace_split_over_lines_out_of_order_is_one_run(tmp_path: Path, store: Store, staging: str) -> None:
    spans = agent_trace()
    lines = [json.dumps(otlp_json([s])) for s in reversed(spans)]  # children first
    path = tmp_path / "split.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = import_files(store, [path])
    assert (result.report.traces, result.report.spans_written, result.report.orphans_pending) == (1, 8, 0)
    source = NativeSource(store)
    (run_id,) = runs_in(store)
    table = source.span_table(run_id)
    assert sum(p is None for p in table.parent_ids) == 1


def test_an_unmappable_span_is_named_and_skipped_and_the_rest_imported(tmp_path: Path, store_path: Path) -> None:
    good, split = agent_trace(service="good"), agent_trace(service="split")
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([json.dumps(otlp_json(good)), json.dumps(otlp_json(split[:3])),
                               '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}',
                               json.dumps(otlp_json(split[3:]))]) + "\n")
    done = cli("import", str(path), store=store_path)
    assert done.returncode == 0, done.stderr
    assert "1 span skipped: 1 with an invalid traceId" in done.stdout
    assert "Traceback" not in done.stderr
    store = open_store(str(store_path))
    try:
        assert {p.name for p in NativeSource(store).projects()} == {"good", "split"}
        assert spans_in(store) == 8 + 8  # every span but the unmappable one
    finally:
        store.close()


def test_a_bad_document_drops_every_trace_it_touched(tmp_path: Path, store: Store, staging: str) -> None:
    good, split = agent_trace(service="good"), agent_trace(service="split")
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([json.dumps(otlp_json(good)), json.dumps(otlp_json(split[:3])),
                               json.dumps(otlp_json(split[3:]))[:-40]]) + "\n")  # line 3 is cut short
    result = import_files(store, [path])
    assert result.error is not None and "line 3" in str(result.error)
    assert {p.name for p in NativeSource(store).projects()} == {"good"}  # "split" was touched by line 3
    assert spans_in(store) == 8


def test_a_truncated_document_leaves_no_half_trace(tmp_path: Path, store_path: Path) -> None:
    text = json.dumps(otlp_json(agent_trace()), indent=1)
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) * 2 // 3])
    done = cli("import", str(path), "--quiet", store=store_path)
    assert done.returncode == 2
    assert "truncated" in done.stderr and "cut.json, line" in done.stderr
    store = open_store(str(store_path))
    try:
        assert spans_in(store) == 0
    finally:
        store.close()


@pytest.mark.parametrize(("content", "message"), [
    (b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(2000), "is not an OTLP trace file"),
    (b"", "is empty"),
    (b'{"resourceSpans": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "expected a resourceSpans object"),
    (b'{"junk": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested too deeply"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "1"}]}]}]}',
     "Nothing was imported: 1 span skipped: 1 with an invalid traceId"),
    (b"\x00\x00\x00\x10" + b"\x0a\x05hello", "truncated"),
    (b"\x7f\xff\xff\xff" + random.Random(2).randbytes(64), "not an OTLP trace file"),
    (b"\x0a\xff\xff\xff\xff\x0f", "limit is"),
])
def test_hostile_files_get_one_clear_sentence(tmp_path: Path, store_path: Path, content: bytes,
                                              message: str) -> None:
    path = tmp_path / "hostile.bin"
    path.write_bytes(content)
    done = cli("import", str(path), "--quiet", store=store_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_absurd_times_and_duplicated_ids(tmp_path: Path, store: Store, staging: str) -> None:
    doc = otlp_json(agent_trace())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.extend(json.loads(json.dumps(spans)))  # every span twice in the same file
    ok = import_files(store, [write_json(tmp_path / "dup.json", doc)])
    assert (ok.error, ok.report.spans_written, ok.report.duplicates) == (None, 8, 8)
    spans[0]["endTimeUnixNano"] = str(10**20)
    bad = import_files(store, [write_json(tmp_path / "far.json", doc)])  # that span is left out, and named
    assert bad.error is None and dict(bad.skipped) == {"with an implausible endTimeUnixNano": 1}


def test_a_large_garbage_stream_fails_fast_with_bounded_memory(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "garbage.json"
    with path.open("wb") as f:  # 200 MB of one never-ending JSON string: the worst case for a line reader
        f.write(b'{"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": {"stringValue": "')
        block = b"A" * (1 << 20)
        for _ in range(200):
            f.write(block)
    before = psutil.Process().memory_info().rss
    result = import_files(store, [path])
    grew = psutil.Process().memory_info().rss - before
    assert result.error is not None and "larger than 64 MiB" in str(result.error)
    assert grew < 600 * 2**20
    assert spans_in(store) == 0


def test_cancel_leaves_only_whole_traces(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(otlp_json(agent_trace(service=f"s{n}"))) + "\n" for n in range(6)))
    cancel = threading.Event()
    seen: list[str] = []

    def progress(p: Any) -> None:
        seen.append(p.phase)
        if p.phase == "reading" and p.spans_read >= 24:
            cancel.set()

    result = import_files(store, [path], progress=progress, cancel=cancel)
    assert result.cancelled
    assert spans_in(store) == 0  # cancelled while reading: nothing published
    cancel2 = threading.Event()

    def stop_after_first_write(p: Any) -> None:
        if p.phase == "writing":
            cancel2.set()

    import agentdesk.store.ingest.importer as importer
    old = importer.SPANS_PER_TRANSACTION
    importer.SPANS_PER_TRANSACTION = 8  # one trace per transaction
    try:
        result = import_files(store, [path], progress=stop_after_first_write, cancel=cancel2)
    finally:
        importer.SPANS_PER_TRANSACTION = old
    assert result.cancelled
    assert spans_in(store) == 8 and len(runs_in(store)) == 1


def test_the_cli_prints_a_summary_and_exit_0(tmp_path: Path, store_path: Path) -> None:
    path = write_json(tmp_path / "t.json", otlp_json(agent_trace()))
    done = cli("import", str(path), "--project", "fallback", store=store_path)
    assert done.returncode == 0, done.stderr
    assert "Imported 8 spans in 1 trace (" in done.stdout
    assert "spans/s" in done.stderr  # the tqdm bar
    one = write_json(tmp_path / "one.json", otlp_json(agent_trace(service="solo")[:1]))
    single = cli("import", str(one), store=store_path)
    assert single.returncode == 0 and "Imported 1 span in 1 trace (" in single.stdout, single.stdout
    missing = cli("import", str(tmp_path / "nope.json"), store=store_path)
    assert missing.returncode == 2 and "is not a file" in missing.stderr


def test_project_falls_back_to_the_option(tmp_path: Path, store: Store) -> None:
    doc = otlp_json(agent_trace())
    doc["resourceSpans"][0]["resource"] = {"attributes": []}
    import_files(store, [write_json(tmp_path / "t.json", doc)], default_project="from-option")
    assert [p.name for p in NativeSource(store).projects()] == ["from-option"]


def test_cancel_inside_a_big_trace_rolls_that_trace_back(tmp_path: Path, store: Store,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import agentdesk.store.ingest.importer as importer
    monkeypatch.setattr(importer, "CHUNK", 2)  # a trace written over several chunks, in one transaction
    path = write_json(tmp_path / "one.json", otlp_json(agent_trace()))
    cancel = threading.Event()
    written: list[int] = []

    def progress(p: Any) -> None:
        if p.phase == "writing":
            written.append(p.spans_done)
            cancel.set()  # after the first chunk of the only trace

    result = import_files(store, [path], progress=progress, cancel=cancel)
    assert result.cancelled and written == [2]
    assert spans_in(store) == 0 and runs_in(store) == set()


def _tables(path: Path, names: tuple[str, ...]) -> list[str]:
    import sqlite3
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [line for line in conn.iterdump() if line.startswith(tuple(f'INSERT INTO "{n}"' for n in names))]
    finally:
        conn.close()


def test_the_helper_process_maps_exactly_as_this_process_would(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(otlp_json(agent_trace(service=f"s{n % 2}", conversation=f"c{n}"))) + "\n"
                            for n in range(8)))
    written = []
    for helper in (True, False):
        store_path = tmp_path / f"helper-{helper}.sqlite"
        store = open_store(str(store_path))
        result = import_files(store, [path], helper=helper)
        store.close()
        assert result.error is None and result.report.spans_written > 0
        written.append(_tables(store_path, ("spans", "agents", "runs", "sessions", "context_items",
                                            "context_groups", "otel_resources")))
    assert written[0] == written[1] and len(written[0]) > 50


def test_a_helper_that_dies_loses_nothing(tmp_path: Path) -> None:
    import signal

    from agentdesk.store.ingest.decode import spans_from_json
    from agentdesk.store.ingest.prepare import Preparer, prepare_all

    spans = spans_from_json(otlp_json(agent_trace()), "test")
    preparer = Preparer(window=2)
    try:
        first = [p for ready in preparer.put(spans) for p in ready] + [p for ready in preparer.drain() for p in ready]
        assert first == prepare_all(spans) and preparer.helped == 1
        pool = preparer._pool
        assert pool is not None
        for process in list(pool._processes.values()):  # the helper is killed (out of memory, say)
            os.kill(process.pid, signal.SIGKILL)
        again = [p for ready in preparer.put(spans) for p in ready] + [p for ready in preparer.drain() for p in ready]
        assert again == first
    finally:
        preparer.close()


def test_an_import_ends_its_transaction_between_traces_when_an_operator_waits(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small traces share a transaction only while nobody waits: a decision waits for one trace at most."""
    import agentdesk.store.ingest.importer as importer
    from agentdesk.store.uow import UnitOfWork

    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(otlp_json(agent_trace(service=f"s{n}"))) + "\n" for n in range(5)))
    traces_per_unit: list[int] = []
    real_exit = UnitOfWork.__exit__

    def count_exit(self: UnitOfWork, *exc: Any) -> None:
        traces_per_unit.append(sum(1 for c in self._changes if c.entity == "span_batch"))
        real_exit(self, *exc)

    monkeypatch.setattr(UnitOfWork, "__exit__", count_exit)
    monkeypatch.setattr(importer, "IMPORT_SLICE_S", 3600.0)  # the time slice never ends a transaction here
    monkeypatch.setattr(UnitOfWork, "operator_waiting", lambda self: True)
    result = import_files(store, [path], helper=False)
    assert result.report.traces == 5 and spans_in(store) == 40 and len(runs_in(store)) == 5
    assert [n for n in traces_per_unit if n] == [1, 1, 1, 1, 1]  # each trace alone, and each one whole

    traces_per_unit.clear()
    monkeypatch.setattr(UnitOfWork, "operator_waiting", lambda self: False)
    other = tmp_path / "more.jsonl"
    other.write_text("".join(json.dumps(otlp_json(agent_trace(service=f"t{n}"))) + "\n" for n in range(5)))
    import_files(store, [other], helper=False)
    assert [n for n in traces_per_unit if n] == [5]  # nobody waiting, no slice over: one transaction


def test_an_import_writes_as_a_bulk_writer_that_steps_aside(tmp_path: Path, store: Store,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The import's units are runtime-class: they queue with the agents and yield to a person's write."""
    from agentdesk.store.uow import UnitOfWork

    kinds: list[bool] = []
    real_enter = UnitOfWork.__enter__

    def spy(self: UnitOfWork) -> UnitOfWork:
        kinds.append(self.runtime)
        return real_enter(self)

    monkeypatch.setattr(UnitOfWork, "__enter__", spy)
    import_files(store, [write_json(tmp_path / "t.json", otlp_json(agent_trace()))], helper=False)
    assert kinds[0] is True  # the publishing transaction; the audit record after it is the import's own
