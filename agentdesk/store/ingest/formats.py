"""OTLP trace files, detected by content and read as a stream of bounded records.

Formats: an OTLP/JSON document (`ExportTraceServiceRequest` / `TracesData`, any
size: it is walked incrementally and decoded span by span), OTLP JSON Lines
(one `TracesData` per line), a binary `ExportTraceServiceRequest` (split on its
top-level `resource_spans` fields, each decoded with opentelemetry-proto), and
the Collector file exporter's 4-byte big-endian length-prefixed proto records.
Gzip is undone transparently. Memory stays bounded by `MAX_RECORD_BYTES`
whatever the file size; anything bigger, or anything that is not one of these,
is a `BadRecord` naming the file and the line, byte or record.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from google.protobuf.message import DecodeError
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, TracesData

from agentdesk.store.ingest import values as v
from agentdesk.store.ingest.decode import span_from_json, spans_from_proto
from agentdesk.store.ingest.spans import BadRecord, OtelSpan

MAX_RECORD_BYTES = 64 * 1024 * 1024
"""The largest line, proto record or single span accepted: a bound on memory, not on file size."""
SPANS_PER_RECORD = 2000
"""A large JSON document is handed on in groups of this many spans."""
_CHUNK = 1 << 20


@dataclass(slots=True)
class Record:
    where: str
    spans: list[OtelSpan]
    document: int
    """Which top-level document (JSON document or line, proto message or record) the spans came from."""


class TraceFile:
    """One input file: `format` after detection, `records()` to stream it, `position` for progress."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size
        self._raw = cast(io.BufferedReader, path.open("rb", buffering=_CHUNK))
        self.compressed = self._raw.peek(2)[:2] == b"\x1f\x8b"
        self._stream: io.BufferedReader | gzip.GzipFile = (
            gzip.GzipFile(fileobj=self._raw, mode="rb") if self.compressed else self._raw)
        self._buffered = self._stream
        self.format = self._detect()
        self.document = 0
        """The top-level document being read: a `BadRecord` belongs to it."""
        self.current_traces: set[str] = set()
        """Traces with spans decoded from the current document (yielded or not): what an error taints."""

    @property
    def position(self) -> int:
        """Bytes of the file read so far (of the compressed file when gzipped)."""
        return self._raw.tell()

    def close(self) -> None:
        self._stream.close()
        self._raw.close()

    def _detect(self) -> str:
        try:
            head = self._buffered.peek(64)[:64]
        except (OSError, EOFError) as exc:
            raise BadRecord(str(self.path), f"cannot be read ({exc})") from None
        text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if not text:
            raise BadRecord(str(self.path), "is empty: there are no traces in it")
        if text[:1] == b"{":
            return "json"
        if head[:1] == b"\x0a":
            return "protobuf"
        if len(head) >= 4 and head[0] == 0 and 0 < int.from_bytes(head[:4], "big") <= MAX_RECORD_BYTES:
            return "protobuf-records"
        shown = head[:8].hex(" ")
        raise BadRecord(str(self.path), "is not an OTLP trace file (expected OTLP/JSON, JSON Lines, or "
                        f"protobuf; it starts with the bytes {shown})")

    def records(self) -> Iterator[Record]:
        if self.format == "protobuf":
            return self._proto()
        if self.format == "protobuf-records":
            return self._proto_records()
        return self._json()

    # -- JSON: one document, or JSON Lines (a document per line), both streamed -------------------
    def _json(self) -> Iterator[Record]:
        reader = _JsonDocument(self)
        yield from reader.records()
        self.format = "jsonl" if reader.documents > 1 else "json"

    # -- protobuf ------------------------------------------------------------------------------
    def _proto(self) -> Iterator[Record]:
        n = 0
        while True:
            offset = self._tell()
            tag = self._varint(allow_eof=True)
            if tag is None:
                return
            where = f"{self.path}, resourceSpans[{n}] at byte {offset}"
            if tag != 0x0A:
                raise BadRecord(where, f"is not an ExportTraceServiceRequest (unexpected field tag {tag})")
            size = self._varint() or 0
            data = self._read_exact(size, where)
            try:
                message = ResourceSpans.FromString(data)
            except DecodeError as exc:
                raise BadRecord(where, f"is not valid protobuf ({exc})") from None
            spans = spans_from_proto([message], where)
            self.current_traces.update(sp.trace_id for sp in spans)
            yield Record(where, spans, 0)
            n += 1

    def _proto_records(self) -> Iterator[Record]:
        n = 1
        while True:
            self.document, self.current_traces = n, set()
            offset = self._tell()
            prefix = self._stream.read(4)
            if not prefix:
                return
            where = f"{self.path}, record {n} at byte {offset}"
            if len(prefix) < 4:
                raise BadRecord(where, "the file ends inside a record's length prefix (truncated)")
            data = self._read_exact(int.from_bytes(prefix, "big"), where)
            try:
                message = TracesData.FromString(data)
            except DecodeError as exc:
                raise BadRecord(where, f"is not a valid protobuf trace record ({exc})") from None
            yield Record(where, spans_from_proto(message.resource_spans, where), n)
            n += 1

    def _tell(self) -> int:
        return self._stream.tell() if not self.compressed else self._raw.tell()

    def _read_exact(self, size: int, where: str) -> bytes:
        if size > MAX_RECORD_BYTES:
            raise BadRecord(where, f"claims {size:,} bytes; the limit is {MAX_RECORD_BYTES:,} (not a trace file?)")
        if not self.compressed and size > self.size - self._raw.tell():
            raise BadRecord(where, f"claims {size:,} bytes but the file ends before that (truncated)")
        data = self._stream.read(size)
        if len(data) < size:
            raise BadRecord(where, f"claims {size:,} bytes but the file ends after {len(data):,} (truncated)")
        return data

    def _varint(self, allow_eof: bool = False) -> int | None:
        result, shift = 0, 0
        while True:
            byte = self._stream.read(1)
            if not byte:
                if allow_eof and shift == 0:
                    return None
                raise BadRecord(f"{self.path}, byte {self._tell()}", "the file ends inside a field (truncated)")
            result |= (byte[0] & 0x7F) << shift
            if not byte[0] & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise BadRecord(f"{self.path}, byte {self._tell()}", "is not protobuf (a varint runs on)")


def _reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return str(exc)


class _JsonDocument:
    """Walks `{resourceSpans: [{resource, scopeSpans: [{scope, spans: [...]}]}]}` incrementally.

    Only the structure above the spans is navigated by hand; each resource, scope and
    span is decoded by the C JSON decoder (`raw_decode`), so a multi-GB document costs
    one span of memory at a time. Keys other than these are decoded and dropped.
    """

    def __init__(self, file: TraceFile) -> None:
        self.file = file
        self.decoder = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.documents = 0
        self.eof = False
        self.dropped_lines = 0
        self.dropped_chars = 0
        self.pending: list[OtelSpan] = []
        self._tail = b""

    # -- low level -------------------------------------------------------------------------
    def where(self, pos: int | None = None) -> str:
        at = self.pos if pos is None else pos
        line = self.dropped_lines + self.buf.count("\n", 0, at) + 1
        return f"{self.file.path}, line {line} (character {self.dropped_chars + at})"

    def fail(self, problem: str, pos: int | None = None) -> BadRecord:
        return BadRecord(self.where(pos), problem)

    def fill(self, want: int = _CHUNK) -> bool:
        if self.eof:
            return False
        data = self._tail + self.file._buffered.read(max(want, _CHUNK))
        if not data:
            self.eof = True
            return False
        cut = len(data)
        while cut > 0 and cut > len(data) - 4 and (data[cut - 1] & 0xC0) == 0x80:
            cut -= 1  # do not split a UTF-8 sequence between reads
        if cut > 0 and data[cut - 1] >= 0xC0:
            cut -= 1
        self._tail = data[cut:]
        if self.pos:
            self.dropped_lines += self.buf.count("\n", 0, self.pos)
            self.dropped_chars += self.pos
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += data[:cut].decode("utf-8", errors="replace")
        return True

    def peek(self) -> str | None:
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            self.pos = pos
            if pos < len(buf):
                return buf[pos]
            if not self.fill():
                return None

    def expect(self, chars: str, what: str) -> str:
        c = self.peek()
        if c is None:
            raise self.fail(f"the file ends where {what} should be (truncated)")
        if c not in chars:
            raise self.fail(f"expected {what} but found {c!r}")
        self.pos += 1
        return c

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise self.fail("the JSON is nested too deeply to be OTLP") from None
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_RECORD_BYTES:
                    raise self.fail(f"a value is larger than {MAX_RECORD_BYTES // 2**20} MiB or is not valid "
                                    f"JSON ({exc.msg})") from None
                if self.fill(len(self.buf) - self.pos):
                    continue
                raise self.fail(f"is not valid JSON ({exc.msg}; the file may be truncated)", exc.pos) from None
            if end == len(self.buf) and not self.eof and self.fill():
                continue  # a number may go on past the buffer
            self.pos = end
            return value

    def key(self) -> str | None:
        """The next key of the current object, or None at its end."""
        c = self.peek()
        if c == "}":
            self.pos += 1
            return None
        if c == ",":
            self.pos += 1
        k = self.value()
        if not isinstance(k, str):
            raise self.fail("expected an object key")
        self.expect(":", "':'")
        return k

    def items(self) -> Iterator[None]:
        """Positions on each element of the array that starts here."""
        self.expect("[", "a list")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield None
            if self.expect(",]", "',' or ']'") == "]":
                return

    # -- the OTLP structure ----------------------------------------------------------------
    def records(self) -> Iterator[Record]:
        """Every top-level document in turn (one for OTLP/JSON, one per line for JSON Lines)."""
        if self.peek() == "\ufeff":
            self.pos += 1
        while self.peek() is not None:
            self.documents += 1
            self.file.document, self.file.current_traces = self.documents, set()
            self.expect("{", "an OTLP/JSON object ('{')")
            while (k := self.key()) is not None:
                if k in ("resourceSpans", "resource_spans"):
                    for r, _ in enumerate(self.items()):
                        yield from self._resource_spans(r)
                else:
                    self.value()
            if self.pending:
                yield self._flush()

    def _resource_spans(self, r: int) -> Iterator[Record]:
        self.expect("{", "a resourceSpans object")
        resource: dict[str, Any] = {}
        while (k := self.key()) is not None:
            if k == "resource":
                where = self.where()
                raw = self.value()
                try:
                    resource = v.json_attributes((raw or {}).get("attributes") if isinstance(raw, dict) else None)
                except v.FieldError as exc:
                    raise BadRecord(where, str(exc)) from None
            elif k in ("scopeSpans", "scope_spans", "instrumentationLibrarySpans"):
                for s, _ in enumerate(self.items()):
                    yield from self._scope_spans(r, s, resource)
            else:
                self.value()

    def _scope_spans(self, r: int, s: int, resource: dict[str, Any]) -> Iterator[Record]:
        self.expect("{", "a scopeSpans object")
        name = version = ""
        while (k := self.key()) is not None:
            if k in ("scope", "instrumentationLibrary"):
                scope = self.value()
                if isinstance(scope, dict):
                    name, version = str(scope.get("name") or ""), str(scope.get("version") or "")
            elif k == "spans":
                for n, _ in enumerate(self.items()):
                    raw = self.value()
                    try:
                        span = span_from_json(raw)
                    except v.FieldError as exc:  # located where the span ends: counting lines is for errors only
                        raise BadRecord(f"{self.where()}, resourceSpans[{r}].scopeSpans[{s}].spans[{n}]",
                                        str(exc)) from None
                    span.resource, span.scope_name, span.scope_version = resource, name, version
                    self.file.current_traces.add(span.trace_id)
                    self.pending.append(span)
                    if len(self.pending) >= SPANS_PER_RECORD:
                        yield self._flush()
            else:
                self.value()

    def _flush(self) -> Record:
        record = Record(self.where(), self.pending, self.documents)
        self.pending = []
        return record
