"""The fast way through one OTLP/JSON document: msgspec finds each span's text, and both cores decode them.

Why: the incremental walker (`formats._JsonDocument`) decodes every span in the importing process, and the
decoded spans then cross to the mapping helper and back, pickled both ways: the helper saved under a tenth of
the reading time. Here msgspec walks the document's structure in C (about a second per GB), keeping each span
as its raw bytes (`msgspec.Raw`, no copy), and a chunk of spans crosses to the helper as bytes, which cost
nothing to pickle; the helper decodes and maps them (`decode_chunk`, then `prepare`). So the importing process
only slices bytes and stages results, and the two processes share the decoding as well as the mapping.

It takes only what it reads exactly as the walker would; anything else is left to the walker, which reads it
as before (a `None` from `plan` or `plan_file`, before any span is handed on):
- a file of at most `MAX_BYTES`, and a string limit of at least `SHORTEST_LIMIT` characters;
- one document, or JSON Lines (each line one document: `plan_file`), uncompressed, UTF-8 throughout (checked:
  msgspec does not look inside the strings it skips);
- only the current camelCase keys above the spans (`resourceSpans`, `resource`, `scopeSpans`, `scope`, `spans`,
  `schemaUrl`), a resource before its scopes and a scope before its spans (the walker reads in order: a
  resource after its scopes applies to none of them);
- no key repeated above the spans (msgspec keeps the last of repeated keys where the walker reads each): a
  document must name those keys and each span's start exactly where the structure read has them, in that
  order (`_KEYS`), so a repeat, or a string value spelling one of them, leaves the file to the walker. One
  repeat goes unseen: a key spelled with an escape (`"\\u0072esource"`) after its sibling; the last one wins
  there, as in the receiver's `json.loads`, and no span is lost either way;
- msgspec refuses what the walker refuses too (invalid JSON, lone UTF-16 surrogates, nesting past its depth),
  and `NaN`, which the walker's decoder takes: all of those are the walker's to read or to report.

A span is decoded by msgspec, or by `json` where msgspec refuses a number (`1e400`: `json` reads it as
infinity, as the walker does); strings longer than the limit are cut as the walker cuts them.
"""

from __future__ import annotations

import codecs
import json
import mmap
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec

from agentdesk.store.ingest import values as v
from agentdesk.store.ingest.decode import Skipped, span_from_json
from agentdesk.store.ingest.spans import BadRecord, OtelSpan
from agentdesk.store.text.jsonsafe import truncated

SPANS_PER_CHUNK = 2000
"""Spans per chunk handed to the helper (as the walker's records)."""
_KEYS = re.compile(rb'"(resourceSpans|resource|scopeSpans|scope|spans|startTimeUnixNano|start_time_unix_nano)"')
"""The keys above the spans, and a span's start: named in the document exactly where the structure read has them,
in that order, or the walker reads it (a repeated key, or one after the sibling it should precede, shows here)."""
_STARTS = frozenset({b"startTimeUnixNano", b"start_time_unix_nano"})
_START = b"start"
_BLANK = re.compile(rb"[ \t\r\n]*")
_UTF8_STEP = 1 << 22
MAX_BYTES = 2 * 1024**3
"""Larger files are the walker's, whose memory is one span whatever the size: here every span found is kept as a
small object until its chunk is handed on (~50 MB per million spans, about 1.5 GB of OTLP/JSON)."""
SHORTEST_LIMIT = 64
"""Under this string limit the walker would cut the keys above the spans too (`resourceSpans` is 13 characters):
such a limit is the walker's to apply."""
_ABSENT = msgspec.Raw(b"")


class _ScopeSpans(msgspec.Struct, forbid_unknown_fields=True):
    scope: msgspec.Raw = _ABSENT
    spans: list[msgspec.Raw] | None = None
    schemaUrl: msgspec.Raw = _ABSENT  # the OTLP/JSON key


class _ResourceSpans(msgspec.Struct, forbid_unknown_fields=True):
    resource: msgspec.Raw = _ABSENT
    scopeSpans: list[_ScopeSpans] | None = None  # the OTLP/JSON key
    schemaUrl: msgspec.Raw = _ABSENT  # the OTLP/JSON key


class _Document(msgspec.Struct, forbid_unknown_fields=True):
    resourceSpans: list[_ResourceSpans]  # the OTLP/JSON key


_DECODE_DOCUMENT = msgspec.json.Decoder(_Document)
_DECODE_ANY = msgspec.json.Decoder()


class SpanChunk(NamedTuple):
    """Spans of one scope as JSON bytes, with what the walker would give each of them."""

    spans: list[bytes]
    resource: dict[str, Any]
    scope_name: str
    scope_version: str
    limit: int
    """`ImportLimits.max_string_chars`: longer strings are cut."""
    where: str


class Plan(NamedTuple):
    groups: list[tuple[list[msgspec.Raw], dict[str, Any], str, str]]
    """(spans, resource attributes, scope name, scope version) per scopeSpans entry, in document order."""
    spans: int
    strings_cut: int
    """Strings cut in the resources (the spans' own are counted as they are decoded)."""


def plan(data: mmap.mmap | bytes | memoryview, limit: int) -> Plan | None:
    """The document's spans, or None when the walker must read it (see the module's list)."""
    if limit < SHORTEST_LIMIT:
        return None
    try:
        document = _DECODE_DOCUMENT.decode(data)
        groups: list[tuple[list[msgspec.Raw], dict[str, Any], str, str]] = []
        keys: list[bytes] = [b"resourceSpans"]
        cut = 0
        for entry in document.resourceSpans:
            resource: dict[str, Any] = {}
            if len(entry.resource):
                keys.append(b"resource")
                raw, n = _value(entry.resource, limit)
                cut += n
                resource = v.json_attributes(raw.get("attributes") if isinstance(raw, dict) else None)
            if entry.scopeSpans is None:
                continue
            keys.append(b"scopeSpans")
            for scope_spans in entry.scopeSpans:
                name = version = ""
                if len(scope_spans.scope):
                    keys.append(b"scope")
                    scope, n = _value(scope_spans.scope, limit)
                    cut += n
                    if isinstance(scope, dict):
                        name, version = str(scope.get("name") or ""), str(scope.get("version") or "")
                if scope_spans.spans is None:
                    continue
                keys.append(b"spans")
                keys.extend([_START] * len(scope_spans.spans))
                groups.append((scope_spans.spans, resource, name, version))
    except (msgspec.DecodeError, v.FieldError, ValueError, RecursionError):
        return None
    named = [_START if key in _STARTS else key for key in _KEYS.findall(data)]
    if named != keys or not _utf8(data):
        return None
    return Plan(groups, sum(len(g[0]) for g in groups), cut)


def plan_file(data: mmap.mmap | bytes, limit: int) -> list[tuple[int, Plan]] | None:
    """(line, plan) of each document: the file as one document, else as JSON Lines (a document per line, blank
    lines skipped); None when the walker must read it (a document over several lines beside another, two on one
    line, or anything `plan` leaves to it)."""
    whole = plan(data, limit)
    if whole is not None:
        return [(1, whole)]
    view = memoryview(data)  # not released: the plans' spans are slices of it (the file is unmapped after them)
    found: list[tuple[int, Plan]] = []
    start, line = 0, 1
    while start < len(view):
        end = data.find(b"\n", start)
        end = len(view) if end < 0 else end
        if not _BLANK.fullmatch(view[start:end]):
            one = plan(view[start:end], limit)
            if one is None:
                return None
            found.append((line, one))
        start, line = end + 1, line + 1
    return found if len(found) > 1 else None


def chunks(found: Plan, limit: int, where: str) -> Iterator[SpanChunk]:
    """The plan's spans as chunks of bytes (copied out of the file a chunk at a time)."""
    for spans, resource, name, version in found.groups:
        for n in range(0, len(spans), SPANS_PER_CHUNK):
            yield SpanChunk([bytes(raw) for raw in spans[n:n + SPANS_PER_CHUNK]], resource, name, version, limit,
                            where)


def decode_chunk(chunk: SpanChunk) -> tuple[list[OtelSpan], Skipped, int]:
    """A chunk's spans as the walker decodes them: the spans, those skipped by reason, and the strings cut."""
    spans: list[OtelSpan] = []
    skipped = Skipped()
    cut = 0
    for raw in chunk.spans:
        try:
            value = _DECODE_ANY.decode(raw)
        except msgspec.DecodeError:  # a number out of msgspec's range (1e400): json reads it as the walker does
            try:
                value = json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError) as exc:  # `plan` let no such span through
                raise BadRecord(chunk.where, f"a span is not valid JSON ({exc})") from None
        if len(raw) > chunk.limit:
            value, n = cut_strings(value, chunk.limit)
            cut += n
        try:
            span = span_from_json(value)
        except v.FieldError as exc:  # a span that cannot be mapped: counted by reason, left out (as the walker)
            skipped[exc.reason] += 1
            continue
        span.resource, span.scope_name, span.scope_version = chunk.resource, chunk.scope_name, chunk.scope_version
        spans.append(span)
    return spans, skipped, cut


def cut_strings(value: Any, limit: int) -> tuple[Any, int]:
    """`value` with every string (and key) longer than `limit` cut to it, followed by a marker saying how long
    the whole was; and how many were cut. Iterative: any nesting."""
    if isinstance(value, str):
        return (truncated(value, limit), 1) if len(value) > limit else (value, 0)
    cut = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in list(node):
                item = node[key]
                if isinstance(key, str) and len(key) > limit:
                    del node[key]
                    key = truncated(key, limit)
                    node[key] = item
                    cut += 1
                cut += _cut_item(node, key, item, limit, stack)
        elif isinstance(node, list):
            for n, item in enumerate(node):
                cut += _cut_item(node, n, item, limit, stack)
    return value, cut


def _cut_item(node: Any, slot: Any, item: Any, limit: int, stack: list[Any]) -> int:
    """Cut `item` (`node[slot]`) if it is a long string (1), or queue it if it holds more (0)."""
    if isinstance(item, str):
        if len(item) > limit:
            node[slot] = truncated(item, limit)
            return 1
    elif isinstance(item, dict | list):
        stack.append(item)
    return 0


def _value(raw: msgspec.Raw, limit: int) -> tuple[Any, int]:
    """A resource or scope as the walker decodes it (`json`), with its long strings cut."""
    value = json.loads(bytes(raw).decode("utf-8"))
    return cut_strings(value, limit) if len(raw) > limit else (value, 0)


def _utf8(data: mmap.mmap | bytes | memoryview) -> bool:
    """Whether all of `data` is UTF-8 (the walker decodes it strictly; msgspec does not look inside what it skips)."""
    check = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    try:
        for at in range(0, len(view), _UTF8_STEP):
            check.decode(view[at:at + _UTF8_STEP])
        check.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    finally:
        view.release()
    return True
