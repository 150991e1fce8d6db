"""Everything about a span that depends only on the span: mapped once, possibly in another process.

Why a separate step: mapping a span onto agentdesk's model (the GenAI / OpenInference
classification, message parsing and rendering, the attribute JSON) is most of an
import's CPU time, and none of it needs the store. `prepare` turns a decoded
`OtelSpan` into a flat `Prepared` record of plain values; the writer then only
places it in the hierarchy and inserts it. Because the record is plain tuples and
strings it crosses a process boundary cheaply, so the importer maps chunks in a
helper process while it decodes the next ones (`Preparer`), and both cores work.

This module imports no SQLAlchemy: the helper process starts in a fraction of a second.
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, NamedTuple

from agentdesk.store.ingest import messages as msgs
from agentdesk.store.ingest import semconv
from agentdesk.store.ingest import values as v
from agentdesk.store.ingest.decode import Skipped
from agentdesk.store.ingest.json_spans import SpanChunk, decode_chunk
from agentdesk.store.ingest.messages import PLAIN, SORTED
from agentdesk.store.ingest.prices import ESTIMATED_KEY, price_table
from agentdesk.store.ingest.spans import OtelSpan
from agentdesk.store.persistence.deflate import pack_head

ORPHAN_KEY = "agentdesk.orphan"
AGENT_KEY = "agentdesk.agent"
"""On a model span: the agent whose context its messages are (what `readback` rebuilds them with)."""
OWN_KEYS = (ORPHAN_KEY, AGENT_KEY)
"""Attribute keys only the writer sets (an input carrying them has them replaced)."""
EXTRA_KEYS = frozenset({"otel.kind", "otel.status_message", "otel.events", "otel.links", "otel.scope",
                        "otel.scope_version", "otel.resource", ESTIMATED_KEY, *OWN_KEYS})
"""Keys the importer adds to a span's attributes (export strips them again)."""


def digest(*parts: str, n: int = 16) -> str:
    """The hash agentdesk's derived ids are made of."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:n]


def item_id(agent: str, role: str, content: str, repeat: int) -> str:
    """A context item's id: the same message sent again (a growing or sliding history) is the same item;
    the `repeat`-th copy of a message within one call is another."""
    return "oti_" + digest(agent, role, content, str(repeat), n=24)


class Prepared(NamedTuple):
    """One span, mapped: the facts that place it, and its row's values except those the hierarchy sets."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    kind: str
    """`classify`'s kind for a top-level span: the writer makes a nested `agent` a `sub_agent`."""
    status: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    input_text: str | None
    output_text: str | None
    error: str | None
    model: str
    agent_key: str | None
    """Set for agent spans (`semconv.is_agent_span`): what makes two invocations one agent."""
    agent_name: str | None
    project: str | None
    conversation: str | None
    attributes: str
    """The attributes as JSON, with the `otel.*` keys added; `add_keys` appends the writer's own."""
    resource_key: str | None
    resource: str | None
    """The resource's attributes as sorted JSON (stored once per key in `otel_resources`)."""
    messages: tuple[tuple[str, str, str], ...]
    """(role, rendered content, context-item kind) of a model call's input messages, then its output."""
    inputs: int
    """How many of `messages` are input (what the model saw)."""
    packed: tuple[bytes, int] | None = None
    """`attributes` but its closing brace, already deflated for a SQLite store (`deflate.pack_head`): the writer
    deflates only the keys it adds (`deflate.Prepacked`). None for a short text or a PostgreSQL store."""


def prepare(span: OtelSpan, resources: dict[int, tuple[str, str]] | None = None, *, pack: bool = False) -> Prepared:
    """Map one span. `resources` caches resource JSON by object identity across a chunk; `pack` deflates the
    attributes ahead for a SQLite store (`Prepared.packed`)."""
    c = semconv.classify(span)
    a = span.attributes
    key = name = None
    if semconv.is_agent_span(a):
        key, name = semconv.agent_identity(span)
    attrs = dict(a) if any(k in a for k in OWN_KEYS) else a
    if attrs is not a:
        for k in OWN_KEYS:
            attrs.pop(k, None)
    extra: dict[str, Any] = {}
    if span.kind:
        extra["otel.kind"] = v.KIND_NAMES.get(span.kind, str(span.kind))
    if span.status_message:
        extra["otel.status_message"] = span.status_message
    if span.events:
        extra["otel.events"] = span.events
    if span.links:
        extra["otel.links"] = span.links
    if c.cost_estimated:
        extra[ESTIMATED_KEY] = price_table()
    if span.scope_name:
        extra["otel.scope"] = span.scope_name
        if span.scope_version:
            extra["otel.scope_version"] = span.scope_version
    resource_key = resource_text = None
    if span.resource:
        cached = resources.get(id(span.resource)) if resources is not None else None
        if cached is None:
            text = SORTED.encode(span.resource)
            cached = (digest(text, n=32), text)
            if resources is not None:
                resources[id(span.resource)] = cached
        resource_key, resource_text = cached
        extra["otel.resource"] = resource_key
    attributes = PLAIN.encode({**attrs, **extra} if extra else attrs)
    messages: tuple[tuple[str, str, str], ...] = ()
    if c.input_messages or c.output_messages:
        messages = tuple((str(m.get("role") or "user"), content, msgs.item_kind(m)) for m, content in zip(
            c.input_messages + c.output_messages, c.input_rendered + c.output_rendered, strict=True))
    return Prepared(span.trace_id, span.span_id, span.parent_id, span.name, span.start_ns, span.end_ns, c.kind,
                    c.status, c.input_tokens, c.output_tokens, c.cost_usd, c.input_text, c.output_text, c.error,
                    c.model, key, name, semconv.project_of(span), semconv.conversation_of(a), attributes,
                    resource_key, resource_text, messages, len(c.input_messages),
                    pack_head(attributes) if pack else None)


def prepare_all(spans: Sequence[OtelSpan], *, pack: bool = False) -> list[Prepared]:
    resources: dict[int, tuple[str, str]] = {}
    return [prepare(s, resources, pack=pack) for s in spans]


Work = Sequence[OtelSpan] | SpanChunk
"""Decoded spans, or spans still as JSON bytes (`json_spans`: decoded where they are mapped)."""
Mapped = tuple[list[Prepared], Skipped, int]
"""The spans mapped, and (for a `SpanChunk`) those skipped while decoding by reason, and the strings cut."""


def prepare_work(work: Work, pack: bool = False) -> Mapped:
    """One chunk mapped (decoded first when it is still bytes), here or in the helper: the same result."""
    if isinstance(work, SpanChunk):
        spans, skipped, cut = decode_chunk(work)
        return prepare_all(spans, pack=pack), skipped, cut
    return prepare_all(work, pack=pack), Skipped(), 0


def _prepare_plain(work: Work, pack: bool) -> tuple[list[tuple[Any, ...]], Skipped, int]:
    """The helper process's task: plain tuples pickle faster than named ones."""
    prepared, skipped, cut = prepare_work(work, pack)
    return [tuple(p) for p in prepared], skipped, cut


def add_keys(attributes: str, keys: dict[str, Any]) -> str:
    """`attributes` (a JSON object written by `PLAIN`) with `keys` added, without decoding it again."""
    tail = PLAIN.encode(keys)
    return tail if attributes == "{}" else f"{attributes[:-1]}, {tail[1:]}"


def fewer_collections() -> None:
    """Run the cyclic garbage collector a hundred times less often.

    A decoded span is dozens of small containers, and an import makes millions of
    them, so the default thresholds (a collection every 700 allocations, a full one
    every so often over everything alive) cost a third of the mapping time. The
    importer's data holds no reference cycles; reference counting frees it.
    """
    gc.set_threshold(70_000, 50, 100)


def helper_pool() -> ProcessPoolExecutor | None:
    """One helper process for mapping (spawned: no fork of a threaded GUI), or None where none can start.

    A frozen (packaged) app cannot start one without `multiprocessing.freeze_support` in its
    entry point, so it maps in-process. Like every `multiprocessing` user, a script calling the
    importer or the receiver must guard its own top level with `if __name__ == "__main__":`.
    """
    if getattr(sys, "frozen", False):
        return None
    try:
        return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=fewer_collections)
    except (OSError, ValueError):
        return None


HELPER_SWITCH_S = 0.0005
"""The interpreter's thread switch interval while a helper works (the default is 5 ms): process-wide, restored
by `Preparer.close`."""


class _Slot:
    __slots__ = ("future", "result", "work")

    def __init__(self, work: Work, future: Future[tuple[list[tuple[Any, ...]], Skipped, int]] | None,
                 result: Mapped | None) -> None:
        self.work, self.future, self.result = work, future, result

    def ready(self) -> bool:
        return self.result is not None or (self.future is not None and self.future.done())


class Preparer:
    """Prepares chunks of decoded spans in order, in a helper process when one can be started.

    The importing thread keeps decoding while the helper maps; when `window` chunks are
    already waiting for the helper (or it is still starting), the thread maps the next
    chunk itself instead of waiting. So both cores work, neither waits on the other,
    and at most `window` chunks are in flight (memory stays bounded). Results come out
    in input order. If the helper fails, its chunks are mapped here: nothing is lost.
    A chunk may be spans still as JSON bytes (`SpanChunk`): then whoever maps it decodes it
    too, and `skipped` and `strings_cut` count what its decoding left out or cut.
    """

    def __init__(self, *, helper: bool = True, window: int = 3, pack: bool = False) -> None:
        self.window = window
        self.pack = pack
        """Deflate the attributes ahead (`Prepared.packed`): the store is SQLite."""
        self._slots: deque[_Slot] = deque()
        self._pool = helper_pool() if helper else None
        self.helped = 0
        """Chunks the helper mapped (the rest were mapped in this process)."""
        self.skipped = Skipped()
        self.strings_cut = 0
        self._switch_s = sys.getswitchinterval()
        if self._pool is not None:
            # The executor's threads hand chunks over and take results back only when they get the GIL, which
            # this thread holds while it maps: at the default 5 ms the helper sat idle for half the import.
            sys.setswitchinterval(HELPER_SWITCH_S)

    def put(self, work: Work) -> Iterator[list[Prepared]]:
        """Hand in one chunk; yields every chunk (this one or earlier ones) now ready, in order."""
        yield from self._ready(block=False)
        in_flight = sum(1 for s in self._slots if s.future is not None)
        if self._pool is not None and in_flight < self.window:
            try:
                self._slots.append(_Slot(work, self._pool.submit(_prepare_plain, work, self.pack), None))
            except RuntimeError:  # the pool broke or was shut down
                self._pool = None
                self._slots.append(_Slot(work, None, prepare_work(work, self.pack)))
        else:
            self._slots.append(_Slot(work, None, prepare_work(work, self.pack)))
        yield from self._ready(block=False)

    def drain(self) -> Iterator[list[Prepared]]:
        """Every chunk still in flight, in order (waiting for the helper)."""
        yield from self._ready(block=True)

    def _ready(self, *, block: bool) -> Iterator[list[Prepared]]:
        while self._slots and (block or self._slots[0].ready()):
            slot = self._slots.popleft()
            if slot.result is None:
                assert slot.future is not None
                try:
                    plain, skipped, cut = slot.future.result()
                except Exception:  # the helper died (killed, out of memory), or the chunk is bad: mapped here
                    self._pool = None  # (a bad chunk raises its `BadRecord` here, in order)
                    slot.result = prepare_work(slot.work, self.pack)
                else:
                    self.helped += 1
                    slot.result = list(map(Prepared._make, plain)), skipped, cut
            prepared, skipped, cut = slot.result
            self.skipped.update(skipped)
            self.strings_cut += cut
            yield prepared

    def close(self) -> None:
        """Stop the helper; chunks still in flight are dropped (the caller is cancelling or done)."""
        self._slots.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        sys.setswitchinterval(self._switch_s)
