"""A hypothesis fuzzer over what a client can send the receiver: methods, paths, headers (types, encodings,
lengths, tokens with bytes that are not text) and bodies (garbage, gzip of anything, JSON with lone
surrogates or raw 0xFF, valid OTLP). Every answer is below 500 and, when it refuses, carries the OTLP
`Status` body; afterwards a valid request is still answered 200. Raw sockets: a client library would
correct most of these. Bounded: `FUZZ_EXAMPLES` (default 100), derandomized.
"""

from __future__ import annotations

import gzip
import json
import os
import socket

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.ingest.receiver_limits import ReceiverLimits
from agentdesk.store.persistence.database import Store
from tests.store.server.conftest import Start, document, span_json
from tests.store.server.test_hostile_clients import answer, port_of, request

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
VALID = json.dumps(document(span_json("11" * 16, "a1" * 8))).encode()
BODIES = [b"", b"{", b"\xff\xfe\x00", VALID, gzip.compress(VALID), gzip.compress(b"not json"), b"[]" * 1000,
          VALID.replace(b'"step"', b'"\\ud800"'), VALID.replace(b'"step"', b'"\xff"'), b"\x1f\x8b\x08" + b"\x00" * 20,
          json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}).encode()]
HEADER_VALUES = {
    b"Content-Type": [b"application/json", b"application/x-protobuf", b"text/plain", b"", b"application/json; x=\xff",
                      b"application/protobuf"],
    b"Content-Encoding": [b"gzip", b"br", b"deflate", b"zstd", b"identity", b"gzip, br", b"\xff", b""],
    b"Authorization": [b"Bearer right", b"Bearer wrong", b"Bearer \xff\xfe", "Bearer é".encode(), b"Basic x", b""],
    b"Content-Length": [b"-1", b"0", b"99999999999999999999", b"abc", b"5"],
    b"Transfer-Encoding": [b"chunked", b"gzip", b"\xff"],
    b"X-Junk": [b"a" * 100, b"\x00", b"\x7f\x1b[31m"],
}


@st.composite
def raw_requests(draw: st.DrawFn) -> bytes:
    method = draw(st.sampled_from([b"POST", b"GET", b"PUT", b"OPTIONS", b"P\x00ST", b"BREW"]))
    path = draw(st.sampled_from([b"/v1/traces", b"/", b"/v1/traces?x=1", b"/" + b"x" * 3000, b"/v1/%ff"]))
    body = draw(st.one_of(st.sampled_from(BODIES), st.binary(max_size=200)))
    names = draw(st.lists(st.sampled_from(sorted(HEADER_VALUES)), unique=True, max_size=4))
    headers = [(name, draw(st.sampled_from(HEADER_VALUES[name]))) for name in names]
    if b"Content-Length" not in names and b"Transfer-Encoding" not in names:
        headers.append((b"Content-Length", str(len(body)).encode()))
    lines = [method + b" " + path + b" HTTP/1.1", b"Host: x"] + [n + b": " + v for n, v in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def test_no_request_gets_a_500_or_a_bare_refusal(store: Store, start_receiver: Start) -> None:
    receiver, url = start_receiver(limits=ReceiverLimits(header_timeout_s=1, body_timeout_s=0.3), token="right")
    port = port_of(url)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("FUZZ_RANDOM"), database=None,
              suppress_health_check=list(HealthCheck))
    @given(raw_requests())
    def check(data: bytes) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(data)
            status, body = answer(sock)
        assert 0 < status < 500, (data[:300], status, body[:300])
        if status >= 400 and body:
            try:
                message = json.loads(body)["message"]
            except ValueError:  # a protobuf Status (the request said protobuf)
                from google.rpc import status_pb2

                message = status_pb2.Status.FromString(body).message
            assert message, (data[:300], status, body[:300])

    check()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request(headers={"Authorization": b"Bearer right"}))
        assert answer(sock)[0] == 200
    assert receiver.stats.snapshot().failed_requests == 0  # type: ignore[attr-defined]
