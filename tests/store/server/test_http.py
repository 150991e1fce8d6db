"""The receiver over real HTTP: formats, refusals, out-of-order batches and backpressure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from agentdesk.store.ingest import prepare
from agentdesk.store.ingest.spans import run_row_id, span_row_id
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverRefused, is_loopback
from tests.store.server.conftest import Gate, Start, as_protobuf, document, post, span_json, stored_parent

T1, T2 = "11" * 16, "22" * 16
ROOT, CHILD, GRANDCHILD = "a1" * 8, "b2" * 8, "c3" * 8


def test_json_request_lands_in_the_store(store: Store, start_receiver: Start) -> None:
    receiver, url = start_receiver()
    answer = post(url, json.dumps(document(span_json(T1, ROOT, name="invoke_agent planner"))).encode())
    assert answer.status == 200 and answer.json() == {}
    source = NativeSource(store)
    assert source.span(span_row_id(T1, ROOT)).name == "invoke_agent planner"
    assert [p.name for p in source.projects()] == ["receiver-test"]
    counters = receiver.stats.snapshot()
    assert (counters.requests, counters.spans, counters.refused_requests) == (1, 1, 0)


def test_gzip_protobuf_request_answers_in_protobuf(store: Store, start_receiver: Start) -> None:
    _, url = start_receiver()
    body = as_protobuf(document(span_json(T1, ROOT), span_json(T1, CHILD, ROOT)), compress=True)
    answer = post(url, body, "application/x-protobuf", {"Content-Encoding": "gzip"})
    assert answer.status == 200 and answer.headers["Content-Type"].startswith("application/x-protobuf")
    assert ExportTraceServiceResponse.FromString(answer.body) == ExportTraceServiceResponse()
    assert stored_parent(store, T1, CHILD) == span_row_id(T1, ROOT)


def test_the_same_batch_twice_adds_nothing(store: Store, start_receiver: Start) -> None:
    _, url = start_receiver()
    body = json.dumps(document(span_json(T1, ROOT), span_json(T1, CHILD, ROOT))).encode()
    assert post(url, body).status == 200
    assert post(url, body).status == 200  # an exporter's retry after a lost answer
    assert len(NativeSource(store).span_table(run_row_id(T1))) == 2


def test_children_before_parents_join_up(store: Store, start_receiver: Start) -> None:
    _, url = start_receiver()
    assert post(url, json.dumps(document(span_json(T1, GRANDCHILD, CHILD))).encode()).status == 200
    assert post(url, json.dumps(document(span_json(T1, CHILD, ROOT))).encode()).status == 200
    assert stored_parent(store, T1, GRANDCHILD) == span_row_id(T1, CHILD)
    assert post(url, json.dumps(document(span_json(T1, ROOT, name="root"))).encode()).status == 200
    assert stored_parent(store, T1, CHILD) == span_row_id(T1, ROOT)
    assert len(NativeSource(store).span_table(run_row_id(T1))) == 3


def test_an_open_span_shows_running_then_completes(store: Store, start_receiver: Start) -> None:
    _, url = start_receiver()
    assert post(url, json.dumps(document(span_json(T1, ROOT, end=False))).encode()).status == 200
    source = NativeSource(store)
    assert source.span(span_row_id(T1, ROOT)).status == "running"
    assert post(url, json.dumps(document(span_json(T1, ROOT))).encode()).status == 200
    assert source.span(span_row_id(T1, ROOT)).status != "running"


@pytest.mark.parametrize(("body", "ctype", "headers", "status", "words"), [
    (b"{broken", "application/json", {}, 400, "not valid JSON"),
    (b"\xff\xff\xff", "application/x-protobuf", {}, 400, "not a protobuf"),
    (b"a,b", "text/csv", {}, 415, "text/csv"),
])
def test_bad_requests_get_a_clear_status(store: Store, start_receiver: Start, body: bytes, ctype: str,
                                         headers: dict[str, str], status: int, words: str) -> None:
    receiver, url = start_receiver()
    answer = post(url, body, ctype, headers)
    assert answer.status == status
    message = (status_pb2.Status.FromString(answer.body).message if ctype == "application/x-protobuf"
               else answer.json()["message"])
    assert words in message
    assert receiver.stats.snapshot().rejected_requests == 1
    assert NativeSource(store).projects() == []


def test_an_unknown_content_encoding_is_refused_by_name(start_receiver: Start) -> None:
    receiver, url = start_receiver()
    answer = post(url, b"{}", "application/json", {"Content-Encoding": "zstd"})
    assert answer.status in (400, 415) and b"zstd" in answer.body  # aiohttp itself refuses codecs it lacks
    assert receiver.stats.snapshot().requests == 0


def test_deflate_bodies_are_accepted(store: Store, start_receiver: Start) -> None:
    import zlib

    _, url = start_receiver()
    body = zlib.compress(json.dumps(document(span_json(T1, ROOT))).encode())
    assert post(url, body, "application/json", {"Content-Encoding": "deflate"}).status == 200
    assert NativeSource(store).span(span_row_id(T1, ROOT)).name == "step"


def test_a_span_the_ingest_refuses_is_a_400_and_writes_nothing(store: Store, start_receiver: Start) -> None:
    _, url = start_receiver()
    bad = span_json(T1, ROOT)
    bad["startTimeUnixNano"] = "99999999999999999999"  # absurd timestamp
    answer = post(url, json.dumps(document(span_json(T2, ROOT), bad)).encode())
    assert answer.status == 400 and answer.json()["message"]
    assert NativeSource(store).projects() == []  # the good span in the same request was not written either


def test_bodies_over_the_limit_get_413(start_receiver: Start) -> None:
    _, url = start_receiver(max_body_bytes=10_000)
    big = document(*[span_json(T1, f"{n + 1:016x}", name="x" * 200) for n in range(100)])
    assert post(url, json.dumps(big).encode()).status == 413
    assert post(url, as_protobuf(big, compress=True), "application/x-protobuf",
                {"Content-Encoding": "gzip"}).status == 413  # small compressed, too large once inflated


def test_a_token_is_required_once_set(store: Store, start_receiver: Start) -> None:
    _, url = start_receiver(token="s3cret")
    body = json.dumps(document(span_json(T1, ROOT))).encode()
    denied = post(url, body)
    assert denied.status == 401 and denied.headers["WWW-Authenticate"] == "Bearer"
    assert post(url, body, headers={"Authorization": "Bearer wrong"}).status == 401
    assert NativeSource(store).projects() == []
    assert post(url, body, headers={"Authorization": "Bearer s3cret"}).status == 200


def test_a_remote_address_needs_the_flag_and_a_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    with pytest.raises(ReceiverRefused, match="--allow-remote"):
        ReceiverConfig(host="0.0.0.0").check()
    with pytest.raises(ReceiverRefused, match="token"):
        ReceiverConfig(host="0.0.0.0", allow_remote=True).check()
    ReceiverConfig(host="0.0.0.0", allow_remote=True, token="t").check()


def test_a_full_spool_answers_429_with_retry_after_and_loses_nothing(store: Store, start_receiver: Start) -> None:
    gate = Gate()
    receiver, url = start_receiver(ingest=gate.ingest, spool_max_bytes=1, retry_after_s=2)
    first = post(url, json.dumps(document(span_json(T1, ROOT, name="first"))).encode(), stored=False)
    assert first.status == 200  # durable in the spool: answered while the store writer is still held
    assert gate.entered.wait(10)
    second = json.dumps(document(span_json(T2, ROOT, name="second"))).encode()
    refused = post(url, second)  # the spool holds more than its bound until the writer catches up
    assert refused.status == 429 and refused.headers["Retry-After"] == "2"
    assert "behind" in refused.json()["message"] and "spool" in refused.json()["message"]
    gate.release.set()
    assert receiver.wait_stored(10)
    assert post(url, second).status == 200
    source = NativeSource(store)
    assert {source.span(span_row_id(t, ROOT)).name for t in (T1, T2)} == {"first", "second"}
    counters = receiver.stats.snapshot()
    # refused before decoding (the spool was already full), so its spans were never counted
    assert (counters.requests, counters.spans, counters.refused_requests, counters.refused_spans) == (2, 2, 1, 0)


def test_a_sqlite_stores_attributes_are_deflated_where_the_spans_are_mapped(
        store: Store, start_receiver: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off the writer's one thread, as the import does (`deflate.pack_head`). These receiver tests run on SQLite;
    a PostgreSQL store keeps the text as it is (`Receiver.__init__` passes `pack` by backend)."""
    heads: list[str] = []
    pack_head = prepare.pack_head

    def counted(text: str) -> Any:
        heads.append(text)
        return pack_head(text)

    monkeypatch.setattr(prepare, "pack_head", counted)
    _, url = start_receiver(helper=False)  # mapped in this process's threads, where the count can be seen
    history = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"step {n} of the plan"}]}
                          for n in range(60)])
    model = span_json(T1, ROOT, name="chat gpt-5", attributes={"gen_ai.operation.name": "chat",
                                                               "gen_ai.input.messages": history})
    assert post(url, json.dumps(document(model)).encode()).status == 200
    assert len(heads) == 1
    stored = NativeSource(store).span(span_row_id(T1, ROOT)).attributes
    assert stored["gen_ai.input.messages"] == history
