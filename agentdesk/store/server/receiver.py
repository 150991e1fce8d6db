"""The live OTLP/HTTP receiver: `POST /v1/traces` into the store while the agent runs.

Any OpenTelemetry exporter pointed at it (`OTEL_EXPORTER_OTLP_ENDPOINT=
http://127.0.0.1:4318`) makes its agent appear in the tree and the timeline.
Protobuf and JSON bodies are taken, gzip-compressed or not. Answers follow the
OTLP/HTTP spec: 200 once the body is decoded, validated and durable in the
receiver's write-ahead spool (appended and fsynced, `receiver_spool`; the writer
then drains it into the store in large batches, and a receiver started after a
crash replays it), 400 for a body that cannot be read, 401 without the bearer
token when one is set, 413 over the body limit, 415 for other content types,
429 with Retry-After when the spool holds more than its bound (the writer is
behind), 503 with Retry-After when the spool cannot be written; exporters retry
both: spans are refused, never accepted and dropped.

The same port serves the agent API (`/agent/v1/...`, store/server/agent_api.py): the gate over HTTP,
for agents holding an agent token instead of the store.

It listens on loopback unless told otherwise; another address needs both
`allow_remote` and a token, since anyone who can reach the port could write
into the store. aiohttp serves on whatever asyncio loop starts it: in the window
that is the window's own qasync loop (nothing on it waits for the disk or the
store: fsyncs on the spool's thread, writes on the writer's); `ReceiverThread`
gives it a plain loop and a thread of its own (`agentdesk receive`, tests).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import logging
import threading
from concurrent.futures import BrokenExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

from agentdesk.store.errors import InvalidInput, StoreError
from agentdesk.store.ingest.prepare import helper_pool
from agentdesk.store.ingest.receiver_commit import GroupCommit, Pending
from agentdesk.store.ingest.receiver_decode import (
    PROTOBUF_TYPES,
    BodyRefused,
    check_media,
    decode_logs,
    decode_prepared,
    media_type,
)
from agentdesk.store.ingest.receiver_limits import (
    ConnectionGuard,
    GuardedSite,
    ReceiverLimits,
    bearer_matches,
    read_body,
)
from agentdesk.store.ingest.receiver_replay import replayed
from agentdesk.store.ingest.receiver_spool import (
    DEFAULT_MAX_BYTES,
    JSON,
    LOGS,
    PROTOBUF,
    TRACES,
    Position,
    Record,
    Spool,
    SpoolFull,
    default_root,
    reject,
)
from agentdesk.store.ingest.receiver_stats import ReceiverStats
from agentdesk.store.ingest.receiver_writer import Entry, Ingest, IngestWriter
from agentdesk.store.paths import config_dir
from agentdesk.store.persistence.database import Store
from agentdesk.store.server.agent_api import AgentApi

log = logging.getLogger(__name__)

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 4318
DEFAULT_MAX_BODY = 20 * 1024 * 1024
"""20 MiB, the Collector's default; an exporter's batch of 512 spans is far below it."""
GRPC_CODES = {400: 3, 401: 16, 408: 4, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}
"""google.rpc.Code for each HTTP answer: INVALID_ARGUMENT, UNAUTHENTICATED, RESOURCE_EXHAUSTED, ..."""


SHUTDOWN_S = 1.0
"""How long a stop waits for connections still open once the receiver stopped listening. A request in
flight needs milliseconds (its spool's fsync), and an agent held waiting for a decision is answered 503
before (`AgentApi.stop`). What else is open is a connection with no request yet, and aiohttp waits the whole
timeout for one that was accepted as the listener closed: with 5 s, 3 of 20 `agentdesk receive` stopped by
SIGTERM under load took 5.5 s to exit (issue 22's "receive does not exit after SIGTERM"). An upload cut
here was never acknowledged: its exporter sends it again."""


class ReceiverRefused(InvalidInput):
    """The receiver will not start as configured (a remote address without the flag or a token)."""


class CannotListen(StoreError):
    """The address is taken or not ours to bind: a usage problem (exit 2), nothing was written."""

    exit_code = 2


class CannotSpool(StoreError):
    """The spool's folder cannot be made or locked (permissions, a full disk): nothing was accepted."""

    exit_code = 2


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ReceiverConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    """0 picks a free port (tests, benchmarks); `Receiver.address` says which."""
    token: str | None = None
    """When set, every request needs `Authorization: Bearer <token>`."""
    allow_remote: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY
    spool_dir: Path | None = None
    """The write-ahead spool's folder; None: beside the store file (`<store>-spool`), or under the
    config folder for a PostgreSQL store."""
    spool_max_bytes: int = DEFAULT_MAX_BYTES
    """Bytes acknowledged and not yet in the store before new requests get 429 + Retry-After."""
    retry_after_s: int = 1
    default_project: str | None = None
    """Project for spans whose resource names none (no service.name, no openinference.project.name)."""
    limits: ReceiverLimits = field(default_factory=ReceiverLimits)
    """Timeouts and connection caps against slow or greedy clients (`receiver_limits`)."""
    helper: bool = True
    """Decode and map requests in a helper process (False: in threads of this process)."""

    def check(self) -> None:
        if is_loopback(self.host):
            return
        if not self.allow_remote:
            raise ReceiverRefused(f"Listening on {self.host} would let other machines write into the store; "
                                  "pass --allow-remote (and a --token) to mean it.")
        if not self.token:
            raise ReceiverRefused(f"Listening on {self.host} needs a bearer token (--token or "
                                  "$AGENTDESK_RECEIVER_TOKEN), so only your agents can write.")


def default_ingest(default_project: str | None) -> Ingest:
    from agentdesk.store.ingest.ingest import ingest_payload  # the importer's write path, shared with `import`

    def ingest(store: Store, payload: Any) -> Any:
        return ingest_payload(store, payload, default_project=default_project)

    return ingest


class Receiver:
    """The HTTP side: checks, decodes off the loop, spools durably and answers; the writer stores it after."""

    def __init__(self, store: Store, config: ReceiverConfig | None = None, *, ingest: Ingest | None = None) -> None:
        self.config = config or ReceiverConfig()
        self.config.check()
        self.store = store
        self.stats = ReceiverStats()
        ingest = ingest or default_ingest(self.config.default_project)
        root = self.config.spool_dir or default_root(store.path, store.url, config_dir())
        self.spool = Spool(root, max_bytes=self.config.spool_max_bytes)
        self._writer = IngestWriter(store, ingest, rejected=self._set_aside)
        self._commit = GroupCommit(self.spool, self._durable)
        self._decoders = ThreadPoolExecutor(max_workers=2, thread_name_prefix="agentdesk-otlp-decode")
        self._mapper = helper_pool() if self.config.helper else None
        self._decode_traces = functools.partial(decode_prepared, pack=not store.is_postgres)
        """A SQLite store's span attributes are deflated where the spans are mapped (the helper process), as the
        import's are (docs/architecture.md, "Deflated ahead"): the zlib work leaves the one writer thread."""
        self.agent_api = AgentApi(store)
        """The gate over HTTP on the same port (`/agent/v1/...`, agent tokens): store/server/agent_api.py."""
        self._runner: web.AppRunner | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop it serves on once started: in the window, the window's own."""
        self.address: tuple[str, int] | None = None
        self.guard = ConnectionGuard(self.config.limits, retry_after_s=self.config.retry_after_s)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.max_body_bytes, middlewares=[self.guard.middleware])
        app.router.add_post("/v1/traces", self._traces)
        app.router.add_post("/v1/logs", self._logs)
        self.agent_api.add_routes(app)
        return app

    @property
    def writer(self) -> IngestWriter:
        return self._writer

    @property
    def commit(self) -> GroupCommit:
        return self._commit

    async def start(self) -> tuple[str, int]:
        """Open the spool (replaying what a receiver that died left in it), then listen.

        The folder work runs on a worker thread: on the window's loop nothing waits for the disk."""
        loop = self.loop = asyncio.get_running_loop()
        try:
            adopted = await loop.run_in_executor(None, self.spool.open)
        except OSError as exc:
            raise CannotSpool(f"Cannot use the receiver's spool folder {self.spool.root}: "
                              f"{exc.strerror or exc}.") from exc
        self._commit.start()
        self._writer.start(replayed(adopted, self.spool.root, self.config.max_body_bytes))
        self.agent_api.start(asyncio.get_running_loop())
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=SHUTDOWN_S)
        await self._runner.setup()
        site = GuardedSite(self._runner, self.config.host, self.config.port, self.guard)
        try:
            await site.start()
        except OSError as exc:
            await self.stop()
            raise CannotListen(f"Cannot listen on {self.config.host}:{self.config.port}: "
                               f"{exc.strerror or exc}.") from exc
        bound = self._runner.addresses  # the real port when 0 asked for any free one
        port = int(bound[0][1]) if bound else self.config.port
        self.address = (self.config.host, port)
        self.stats.listening(f"{self.config.host}:{port}")
        return self.address

    async def stop(self) -> None:
        """Stop listening, let requests in flight get their answers, then stop the writer.

        Agents held waiting for a decision are answered 503 first: their clients reconnect (to this
        receiver started again, or another on the port) and wait on."""
        await self.agent_api.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await asyncio.get_running_loop().run_in_executor(None, self.stop_writing)
        self._decoders.shutdown(wait=False)
        if self._mapper is not None:
            self._mapper.shutdown(wait=False, cancel_futures=True)
            self._mapper = None
        self.stats.listening(None)

    def stop_writing(self, timeout_s: float = 30.0) -> None:
        """Requests in flight are spooled and answered; the writer drains what it can within the timeout.
        What it could not write (the store unavailable) stays in the spool for the next start. Blocks:
        `stop` runs it on a worker thread; a window closing calls it directly."""
        self._commit.stop()
        self._writer.stop(timeout_s)
        self.spool.close(remove=self._writer.idle and not self._writer.abandoned)

    def _durable(self, pending: Pending, position: Position) -> None:
        """On the spool's thread, in spool order: the writer takes it from here."""
        self._writer.submit(Entry(pending.payload, pending.spans, pending.record,
                                  functools.partial(self.spool.drained, position, pending.record.size)))

    def _set_aside(self, entry: Entry, error: BaseException) -> None:
        """The store refused spans already acknowledged: kept in `rejected.otlp`, logged and counted."""
        log.error("OTLP receiver: the store refused %d acknowledged spans (%s: %s); kept in %s", entry.spans,
                  type(error).__name__, error, self.spool.root / "rejected.otlp")
        self.stats.failed(f"{type(error).__name__}: {error}")
        if entry.record is not None:
            try:
                reject(self.spool.root, entry.record)
            except OSError:
                log.exception("OTLP receiver: could not keep a refused request")

    # -- one request -----------------------------------------------------------------------
    async def _traces(self, request: web.Request) -> web.StreamResponse:
        return await self._receive(request, self._decode_traces, TRACES)

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        """OTLP logs: GenAI events (and any log record) joined to their span, whichever arrives first."""
        return await self._receive(request, _decode_logs, LOGS)

    async def _receive(self, request: web.Request, decoder: Any, what: int) -> web.StreamResponse:
        kind = media_type(request.content_type)
        try:
            self._authorise(request)
            check_media(request.headers.get("Content-Type"), request.headers.get("Content-Encoding"))
            if (request.content_length or 0) > self.config.max_body_bytes:
                raise BodyRefused(413, self._too_large())
            try:
                body = await read_body(request, self.config.limits)
            except web.HTTPRequestEntityTooLarge:
                raise BodyRefused(413, self._too_large()) from None
            if self.spool.over_bound():  # the writer is behind: spend no CPU decoding what must wait anyway
                return self._behind(kind, 0)
            # aiohttp has already inflated a gzip body, holding it to client_max_size as it went,
            # so a gzip bomb stops at the limit (413) and the decoder sees plain bytes.
            decoded, spans = await self._decode(body, request.headers.get("Content-Type"), decoder)
        except BodyRefused as exc:
            self.stats.rejected(str(exc))
            return self._error(kind, exc.status, str(exc))
        record = Record(what, PROTOBUF if kind in PROTOBUF_TYPES else JSON, body)
        return await self._spool_and_answer(kind, record, decoded, spans)

    async def _decode(self, body: bytes, content_type: str | None, decoder: Any) -> tuple[Any, int]:
        """Decoded and mapped in the helper process (both cores work: it maps while the writer
        writes); in threads when no process can be started or the helper died."""
        loop = asyncio.get_running_loop()
        limit = self.config.max_body_bytes
        if self._mapper is not None:
            try:
                return await loop.run_in_executor(self._mapper, decoder, body, content_type, None, limit)
            except BrokenExecutor:
                self._mapper = None
        return await loop.run_in_executor(self._decoders, decoder, body, content_type, None, limit)

    async def _spool_and_answer(self, kind: str, record: Record, decoded: Any, spans: int) -> web.StreamResponse:
        """200 once the record is fsynced in the spool (with others: group commit); the writer stores it after."""
        try:
            self.spool.reserve(record.size)
        except SpoolFull:
            return self._behind(kind, spans)
        loop = asyncio.get_running_loop()
        durable: asyncio.Future[BaseException | None] = loop.create_future()

        def done(error: BaseException | None) -> None:
            loop.call_soon_threadsafe(_resolve, durable, error)

        self._commit.submit(Pending(record, decoded, spans, done))
        error = await durable
        if error is not None:
            self.stats.refused(spans, str(error))
            return self._error(kind, 503, f"The spans could not be made durable ({error}); retry later.",
                               retry=True)
        self.stats.accepted(spans, logs=record.kind == LOGS)
        return self._ok(kind)

    def _behind(self, kind: str, spans: int) -> web.Response:
        """429 + Retry-After: the spool holds its bound of acknowledged bodies not yet stored."""
        problem = (f"{self.spool.pending_bytes / 1048576:.1f} MiB are waiting for the store; the spool's bound "
                   f"is {self.spool.max_bytes / 1048576:.0f} MiB")
        self.stats.refused(spans, problem)
        return self._error(kind, 429, f"The store writer is behind ({problem}); retry after "
                                      f"{self.config.retry_after_s} s.", retry=True)

    def _authorise(self, request: web.Request) -> None:
        token = self.config.token
        if not token:
            return
        if not bearer_matches(request.headers.get("Authorization", ""), token):
            raise BodyRefused(401, "A valid bearer token is required (Authorization: Bearer ...).")

    def _too_large(self) -> str:
        return f"The body is larger than {self.config.max_body_bytes:,} bytes, the limit."

    # -- answers ---------------------------------------------------------------------------
    def _ok(self, kind: str) -> web.Response:
        """Everything sent is durable and will be written (duplicates count as written: ingest is
        idempotent), so no partial success."""
        if kind in PROTOBUF_TYPES:
            return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                                content_type="application/x-protobuf")
        return web.Response(text="{}", content_type="application/json")

    def _error(self, kind: str, status: int, message: str, *, retry: bool = False) -> web.Response:
        """A google.rpc.Status in the request's own encoding, as the OTLP/HTTP spec asks."""
        headers = {"Retry-After": str(self.config.retry_after_s)} if retry else {}
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        code = GRPC_CODES.get(status, 2)
        if kind in PROTOBUF_TYPES:
            body = status_pb2.Status(code=code, message=message).SerializeToString()
            return web.Response(status=status, body=body, content_type="application/x-protobuf", headers=headers)
        return web.Response(status=status, text=json.dumps({"code": code, "message": message}),
                            content_type="application/json", headers=headers)


def _decode_logs(body: bytes, content_type: str | None, content_encoding: str | None,
                 limit: int) -> tuple[Any, int]:
    batch = decode_logs(body, content_type, content_encoding, limit)
    return batch, len(batch.logs)


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


class ReceiverThread:
    """A receiver on an asyncio loop of its own, in a daemon thread: nothing it does waits on the caller."""

    def __init__(self, store: Store, config: ReceiverConfig | None = None, *, ingest: Ingest | None = None) -> None:
        self.receiver = Receiver(store, config, ingest=ingest)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentdesk-otlp-receiver", daemon=True)

    @property
    def stats(self) -> ReceiverStats:
        return self.receiver.stats

    def start(self, timeout_s: float = 10.0) -> tuple[str, int]:
        """Listen; returns the bound address, or raises why it could not (port taken, ...)."""
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self.receiver.start(), self._loop).result(timeout_s)
        except BaseException:
            self._end_loop(timeout_s)  # nothing listens: leave no thread behind
            raise

    def wait_stored(self, timeout_s: float = 30.0) -> bool:
        """Block until every request answered 200 so far is in the store (a 200 means durable, in the
        spool); False on timeout. For tests and benches that read the store right after sending."""
        return self.receiver.writer.wait_idle(timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        if not self._thread.is_alive():
            return
        try:
            asyncio.run_coroutine_threadsafe(self.receiver.stop(), self._loop).result(timeout_s)
        finally:
            self._end_loop(timeout_s)

    def _end_loop(self, timeout_s: float) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self._loop.close()

