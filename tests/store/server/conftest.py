"""A receiver on a free port over a fresh store, and helpers to post to it and read what landed."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from agentdesk.store.ingest.ingest import ingest_payload
from agentdesk.store.ingest.receiver_decode import parse_json
from agentdesk.store.ingest.spans import span_row_id
from agentdesk.store.persistence.database import Store
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


RUNNING: dict[str, ReceiverThread] = {}
"""Receivers the `start_receiver` fixture started, by `host:port`."""


def post(url: str, body: bytes, content_type: str | None = "application/json",
         headers: dict[str, str] | None = None, *, stored: bool = True) -> Answer:
    """One POST from an aiohttp client, run to completion.

    A 200 means the body is durable in the receiver's spool, not yet that it is in the store: for a
    receiver this fixture started, wait for its writer, so the test can read the store at once."""
    async def send() -> Answer:
        sent = dict(headers or {})
        if content_type:
            sent["Content-Type"] = content_type
        async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=sent) as response:
            return Answer(response.status, dict(response.headers), await response.read())
    answer = asyncio.run(send())
    receiver = RUNNING.get(url.split("/")[2]) if "://" in url else None
    if stored and answer.status == 200 and receiver is not None:
        assert receiver.wait_stored(30), "the receiver's writer did not store what it acknowledged"
    return answer


def span_json(trace: str, span: str, parent: str | None = None, name: str = "step", end: bool = True,
              attributes: dict[str, str] | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {"traceId": trace, "spanId": span, "name": name, "kind": 1,
                           "startTimeUnixNano": "1700000000000000000",
                           "attributes": [{"key": k, "value": {"stringValue": v}}
                                          for k, v in (attributes or {}).items()]}
    if end:
        raw["endTimeUnixNano"] = "1700000001000000000"
    if parent:
        raw["parentSpanId"] = parent
    return raw


def document(*spans: dict[str, Any], service: str = "receiver-test") -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name",
                                                            "value": {"stringValue": service}}]},
                               "scopeSpans": [{"scope": {"name": "tests"}, "spans": list(spans)}]}]}


def as_protobuf(doc: dict[str, Any], *, compress: bool = False) -> bytes:
    body = parse_json(json.dumps(doc).encode()).SerializeToString()
    return gzip.compress(body) if compress else body


def stored_parent(store: Store, trace: str, span: str) -> str | None:
    from agentdesk.store.native import NativeSource

    return NativeSource(store).span(span_row_id(trace, span)).parent_span_id


class Gate:
    """Wraps the real ingest so a test can hold the writer still (to fill the queue) and let it go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def ingest(self, store: Store, payload: Any) -> Any:
        self.calls += 1
        self.entered.set()
        self.release.wait(30)
        return ingest_payload(store, payload)


Start = Callable[..., tuple[ReceiverThread, str]]


@pytest.fixture
def start_receiver(store: Store) -> Iterator[Start]:
    started: list[ReceiverThread] = []

    def start(ingest: Any = None, **config: Any) -> tuple[ReceiverThread, str]:
        receiver = ReceiverThread(store, ReceiverConfig(port=0, **config), ingest=ingest)
        host, port = receiver.start()
        started.append(receiver)
        RUNNING[f"{host}:{port}"] = receiver
        return receiver, f"http://{host}:{port}/v1/traces"

    yield start
    for receiver in started:
        address = receiver.receiver.address
        receiver.stop()
        if address is not None:
            RUNNING.pop(f"{address[0]}:{address[1]}", None)
