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

import contextlib
import gzip
import io
import json
import mmap
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from google.protobuf.message import DecodeError
from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, TracesData

from agentdesk.store.ingest import json_spans
from agentdesk.store.ingest import values as v
from agentdesk.store.ingest.decode import (
    RESOURCE_SPANS_KEYS,
    SCOPE_KEYS,
    SCOPE_SPANS_KEYS,
    Skipped,
    not_otlp,
    span_from_json,
    spans_from_proto,
)
from agentdesk.store.ingest.json_spans import SpanChunk, chunks, cut_strings, plan_file
from agentdesk.store.ingest.logs import (
    RESOURCE_LOGS_KEYS,
    LogBatch,
    OtelLog,
    logs_from_proto,
    logs_from_resource_json,
)
from agentdesk.store.ingest.spans import BadRecord, NotOtlp, OtelSpan
from agentdesk.store.text.jsonsafe import SURROGATE_ESCAPE, lone_surrogate_in
from agentdesk.store.validation import special_kind

MAX_RECORD_BYTES = 64 * 1024 * 1024
"""The largest line, proto record or single span accepted: a bound on memory, not on file size."""
MAX_STRING_CHARS = 1_000_000
"""The default limit on one string (a span name, an attribute value): the rest is cut, with a marker saying how
long the whole was (`--max-string-mb`)."""
MAX_DECOMPRESSED_BYTES = 4 * 1024**3
"""The default limit on what one compressed file may decompress to (`--max-decompressed-mb`)."""
SPANS_PER_RECORD = 2000
"""A large JSON document is handed on in groups of this many spans."""
_CHUNK = 1 << 20
_BLANK = re.compile(r"[ \t\r\n]*")


@dataclass(frozen=True, slots=True)
class ImportLimits:
    """What one file may cost: the longest string kept whole and the most bytes a compressed file may
    decompress to (a 61 KB gzip can hold a 60 MB name, a 2 MB one 2 GiB of spaces)."""

    max_string_chars: int = MAX_STRING_CHARS
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES


def _cut_span(span: OtelSpan, limit: int) -> int:
    """`cut_strings` over one decoded span's texts."""
    cut = 0
    for name in ("name", "status_message", "attributes", "events", "links", "resource"):
        value, n = cut_strings(getattr(span, name), limit)
        if n:
            setattr(span, name, value)
            cut += n
    return cut


class _Budget:
    """A decompressing stream that stops (`BadRecord`) once it has given more than its budget of bytes."""

    def __init__(self, stream: gzip.GzipFile, budget: int, path: Path) -> None:
        self.stream, self.budget, self.path, self.given = stream, budget, path, 0

    def _count(self, data: bytes) -> bytes:
        self.given += len(data)
        if self.given > self.budget:
            raise BadRecord(str(self.path), f"decompresses to more than {self.budget / 2**20:,.0f} MiB, the limit "
                            "for one file (--max-decompressed-mb)")
        return data

    def read(self, size: int = -1) -> bytes:
        return self._count(self.stream.read(size))

    def peek(self, size: int = 0) -> bytes:
        return self.stream.peek(size)

    def tell(self) -> int:
        return self.stream.tell()

    def close(self) -> None:
        self.stream.close()


@dataclass(slots=True)
class Record:
    where: str
    spans: list[OtelSpan]
    document: int
    """Which top-level document (JSON document or line, proto message or record) the spans came from."""
    chunk: SpanChunk | None = None
    """Spans still as JSON bytes (`json_spans`): whoever maps them decodes them; `spans` is then empty."""

    @property
    def count(self) -> int:
        return len(self.chunk.spans) if self.chunk is not None else len(self.spans)


class TraceFile:
    """One input file: `format` after detection, `records()` to stream it, `position` for progress."""

    def __init__(self, path: Path, limits: ImportLimits | None = None) -> None:
        self.path = path
        self.limits = limits or ImportLimits()
        if (kind := special_kind(path)) is not None:  # a FIFO would block the open, /dev/zero never end
            raise BadRecord(str(path), f"is {kind}, not a file that can be imported")
        self.size = path.stat().st_size
        self._raw = cast(io.BufferedReader, path.open("rb", buffering=_CHUNK))
        self.compressed = self._raw.peek(2)[:2] == b"\x1f\x8b"
        self._stream: io.BufferedReader | _Budget = (
            _Budget(gzip.GzipFile(fileobj=self._raw, mode="rb"), self.limits.max_decompressed_bytes, path)
            if self.compressed else self._raw)
        self.strings_cut = 0
        self.skipped = Skipped()
        """Spans that cannot be mapped (no trace id, an end before the start): counted, left out."""
        self.logs = LogBatch()
        self._proto_kind: str | None = None
        """A binary file holds "spans" or "logs" (decided on its first field)."""
        """Log records read (GenAI events and other logs), joined to their spans after the spans are written."""
        """Strings longer than `limits.max_string_chars`, cut (the summary names them)."""
        self._buffered = self._stream
        self.format = self._detect()
        self.document = 0
        """The top-level document being read: a `BadRecord` belongs to it."""
        self.current_traces: set[str] = set()
        """Traces with spans decoded from the current document (yielded or not): what an error taints."""
        self._last_size = 0
        self._mapped: mmap.mmap | None = None
        """The file mapped for `json_spans` (a plain JSON document), and how many of its bytes its chunks have
        covered (in proportion to their spans: the progress bar's position)."""
        self._mapped_done = 0
        self.decoded_later = False
        """Its spans are handed on as JSON bytes (`Record.chunk`): `current_traces` is for the importer to fill
        as they are mapped (every document of the file was checked before the first span was handed on)."""

    @property
    def position(self) -> int:
        """Bytes of the file read so far (of the compressed file when gzipped)."""
        return self._mapped_done or self._raw.tell()

    def close(self) -> None:
        self._unmap()
        self._stream.close()
        self._raw.close()

    def _unmap(self) -> None:
        if self._mapped is not None:
            with contextlib.suppress(BufferError):  # a chunk still refers to it (cancelled): closed once collected
                self._mapped.close()
            self._mapped = None

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
            return self._capped(self._proto())
        if self.format == "protobuf-records":
            return self._capped(self._proto_records())
        return self._json()

    def _capped(self, records: Iterator[Record]) -> Iterator[Record]:
        """Protobuf records with their long strings cut (a record no longer than the limit has none)."""
        limit = self.limits.max_string_chars
        for record in records:
            if self._last_size > limit:
                self.strings_cut += sum(_cut_span(span, limit) for span in record.spans)
            yield record

    # -- JSON: one document, or JSON Lines (a document per line), both streamed -------------------
    def _json(self) -> Iterator[Record]:
        if not self.compressed and (yield from self._json_spans()):
            return
        reader = _JsonDocument(self)
        yield from reader.records()
        self.format = "jsonl" if reader.documents > 1 else "json"

    def _json_spans(self) -> Generator[Record, None, bool]:
        """A plain JSON document or JSON Lines file through `json_spans` (the spans decoded by the helper too):
        True once read; False, having read nothing, where the walker must read it."""
        if self.size > json_spans.MAX_BYTES:
            return False
        try:
            self._mapped = mmap.mmap(self._raw.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return False
        limit = self.limits.max_string_chars
        found = plan_file(self._mapped, limit)
        if found is None:
            self._unmap()
            return False
        self.decoded_later = True
        self.strings_cut += sum(one.strings_cut for _, one in found)
        total, done = max(sum(one.spans for _, one in found), 1), 0
        for document, (line, one) in enumerate(found, 1):
            self.document = document
            for chunk in chunks(one, limit, f"{self.path}, line {line}"):
                done += len(chunk.spans)
                self._mapped_done = self.size * done // total
                yield Record(f"{self.path}, line {line}", [], document, chunk)
        self.format = "jsonl" if len(found) > 1 else "json"
        del found, one
        self._unmap()
        self._mapped_done = self.size
        return True

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
            self._last_size = size
            logs = self._proto_logs(data, where)  # ExportLogsServiceRequest shares field 1 with the trace request
            if logs is not None:
                self.logs.extend(logs)
                n += 1
                continue
            try:
                message = ResourceSpans.FromString(data)
            except DecodeError as exc:
                raise BadRecord(where, f"is not valid protobuf ({exc})") from None
            spans = spans_from_proto([message], where, self.skipped)
            self.current_traces.update(sp.trace_id for sp in spans)
            yield Record(where, spans, 0)
            n += 1

    def _proto_logs(self, data: bytes, where: str) -> list[OtelLog] | None:
        """The records of a `ResourceLogs`, or None for a `ResourceSpans`. Decided on the file's first field: a
        log record read as a span has no trace id (its field 1 is a fixed64 time), or does not parse at all."""
        if self._proto_kind is None:
            try:
                as_spans: ResourceSpans | None = ResourceSpans.FromString(data)
            except DecodeError:
                as_spans = None
            self._proto_kind = "spans"
            if as_spans is None or _logs_not_spans(as_spans):
                try:
                    as_logs = ResourceLogs.FromString(data)
                except DecodeError:
                    as_logs = None
                if as_logs is not None and any(sl.log_records for sl in as_logs.scope_logs):
                    self._proto_kind = "logs"
        if self._proto_kind == "spans":
            return None
        try:
            return logs_from_proto([ResourceLogs.FromString(data)], where)
        except DecodeError as exc:
            raise BadRecord(where, f"is not valid protobuf ({exc})") from None

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
            self._last_size = len(data)
            try:
                message = TracesData.FromString(data)
            except DecodeError as exc:
                raise BadRecord(where, f"is not a valid protobuf trace record ({exc})") from None
            yield Record(where, spans_from_proto(message.resource_spans, where, self.skipped), n)
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


def _logs_not_spans(message: ResourceSpans) -> bool:
    """A `ResourceLogs` read as `ResourceSpans`: its records' first field (a fixed64 time) is no span's trace
    id, so every "span" has none."""
    spans = [sp for ss in message.scope_spans for sp in ss.spans]
    return bool(spans) and all(len(sp.trace_id) != 16 for sp in spans)


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
        self._bytes_decoded = 0
        self._counted = (0, 0)
        """(position, newlines in `buf` before it): `where` counts on from there, not from the buffer's start
        (it is asked once per record; counting from 0 each time was 10 % of a 100,000-span import)."""

    # -- low level -------------------------------------------------------------------------
    def where(self, pos: int | None = None) -> str:
        at = self.pos if pos is None else pos
        counted_to, lines = self._counted
        if at >= counted_to:
            lines += self.buf.count("\n", counted_to, at)
            self._counted = (at, lines)
        else:
            lines = self.buf.count("\n", 0, at)
        line = self.dropped_lines + lines + 1
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
            self._counted = (0, 0)
        try:
            text = data[:cut].decode("utf-8")
        except UnicodeDecodeError as exc:  # the receiver refuses these bytes too: one rule for both
            at = self._bytes_decoded + exc.start
            raise BadRecord(f"{self.file.path}, byte {at:,}" if not self.file.compressed else
                            f"{self.file.path}, byte {at:,} of its decompressed text",
                            f"is not UTF-8 text (the byte 0x{data[exc.start]:02x}); OTLP/JSON is UTF-8") from None
        self._bytes_decoded += cut
        self.buf += text
        return True

    def peek(self) -> str | None:
        blank = 0
        while True:
            buf, start = self.buf, self.pos
            pos = _BLANK.match(buf, start).end()  # type: ignore[union-attr]
            self.pos = pos
            if pos < len(buf):
                return buf[pos]
            blank += pos - start
            if blank > MAX_RECORD_BYTES:  # a tail of nothing but blank space stops here, not at its end
                raise self.fail(f"holds more than {MAX_RECORD_BYTES // 2**20} MiB of nothing but blank space "
                                "(not a trace file?)")
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
            start, self.pos = self.pos, end
            if SURROGATE_ESCAPE.search(self.buf, start, end) and (bad := lone_surrogate_in(value)) is not None:
                raise self.fail(f"holds a lone UTF-16 surrogate escape, which is no character ({bad}); the "
                                "receiver refuses it too", start)
            if end - start > self.file.limits.max_string_chars:
                value, cut = cut_strings(value, self.file.limits.max_string_chars)
                self.file.strings_cut += cut
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
            start = self.pos
            self.expect("{", "an OTLP/JSON object ('{')")
            keys: list[str] = []
            otlp = False
            while (k := self.key()) is not None:
                if k in RESOURCE_SPANS_KEYS:
                    otlp = True
                    for r, _ in enumerate(self.items()):
                        yield from self._resource_spans(r)
                elif k in RESOURCE_LOGS_KEYS:
                    otlp = True
                    for r, _ in enumerate(self.items()):
                        self.file.logs.extend(logs_from_resource_json(self.value(), f"{self.where()}, "
                                                                      f"resourceLogs[{r}]"))
                else:
                    if len(keys) < 7:
                        keys.append(k)
                    self.value()
            if not otlp:
                raise NotOtlp(self.where(start), "is not OTLP: it is " + not_otlp(dict.fromkeys(keys)))
            if self.pending:
                yield self._flush()
            self.file.current_traces = set()  # whole: nothing after it (a bad line, a blank tail) taints it

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
            elif k in SCOPE_SPANS_KEYS:
                for s, _ in enumerate(self.items()):
                    yield from self._scope_spans(r, s, resource)
            else:
                self.value()

    def _scope_spans(self, r: int, s: int, resource: dict[str, Any]) -> Iterator[Record]:
        self.expect("{", "a scopeSpans object")
        name = version = ""
        while (k := self.key()) is not None:
            if k in SCOPE_KEYS:
                scope = self.value()
                if isinstance(scope, dict):
                    name, version = str(scope.get("name") or ""), str(scope.get("version") or "")
            elif k == "spans":
                for _ in self.items():
                    raw = self.value()
                    try:
                        span = span_from_json(raw)
                    except v.FieldError as exc:  # a span that cannot be mapped: counted by reason, left out
                        self.file.skipped[exc.reason] += 1
                        continue
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
