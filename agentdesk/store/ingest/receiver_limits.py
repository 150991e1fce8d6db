"""The receiver under hostile clients: slow or idle connections, too many of them, bodies that never end.

aiohttp waits as long as a client likes for a request's headers (its keep-alive timeout is an hour) and
reads a body at whatever pace it comes, and it accepts connections until the process runs out of file
descriptors, after which nobody is answered. What this module adds, outside aiohttp's request handling:

- a **header timeout**: a connection must complete a request's headers this long after it opened or after
  its last answer, or it is closed (a slow-loris client is gone within seconds);
- a **body timeout**: the body must arrive within `body_timeout_s` plus `body_s_per_mib` per MiB it
  declares; otherwise 408, and the connection is closed;
- a **connection cap**, per client address and overall, below the open-file limit: a connection past either
  is answered 503 (with `Retry-After`) and closed at once, so one client cannot take every slot and the
  process never runs out of descriptors;
- **client errors as client errors**: a Content-Encoding the receiver does not take is 415 (aiohttp's own
  parser would answer a bare 400 for `br`), a body that does not decode as its Content-Encoding says is 400,
  an Authorization header with bytes that are not text is compared as bytes (401, never 500), and what
  aiohttp's HTTP parser refuses (a request line or a header it cannot read) keeps its 4xx but gets the body
  too: each answer carries the OTLP `Status` body.

`ConnectionGuard` holds the counts and timers; `GuardedSite` listens through it; `guard.middleware` tells it
when a request is being handled; `read_body` reads a body within its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler, RequestPayloadError

from agentdesk.store.ingest.receiver_decode import ENCODINGS, BodyRefused

LINGERING, LINGER_S = 64, 1.0
"""Refused connections kept half-open at once, and for how long, so the client reads its 503 first."""
RESERVED_FILES = 128
"""Descriptors left to everything else (the store, its WAL, the helper process's pipes, logs)."""


@dataclass(frozen=True, slots=True)
class ReceiverLimits:
    header_timeout_s: float = 10.0
    """From a connection's opening (or its last answer) to a request's complete headers."""
    body_timeout_s: float = 10.0
    body_s_per_mib: float = 1.0
    """The body's deadline grows by this per MiB its Content-Length declares (a 20 MiB body: 30 s)."""
    max_connections: int | None = None
    """Open connections at once; None: half of what the open-file limit leaves, at most 1,024."""
    max_per_client: int | None = None
    """Open connections from one address; None: a quarter of `max_connections`."""

    def caps(self) -> tuple[int, int]:
        total = self.max_connections if self.max_connections is not None else default_connections()
        per_client = self.max_per_client if self.max_per_client is not None else max(4, total // 4)
        return total, min(per_client, total)


def default_connections() -> int:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 256
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(8, min(1024, (soft - RESERVED_FILES) // 2))


def status_body(code: int, message: str) -> bytes:
    """A google.rpc.Status as OTLP/JSON (before a request is read its encoding is not known: JSON)."""
    return json.dumps({"code": code, "message": message}).encode()


def status_response(status: int, message: str) -> web.Response:
    response = web.Response(status=status, content_type="application/json",
                            text=json.dumps({"code": GRPC_CODES.get(status, 3), "message": message}))
    if status == 405:
        response.headers["Allow"] = "POST"
    return response


def raw_answer(status: int, reason: str, code: int, message: str, *, retry_after: int | None = None) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, for the moments aiohttp has no request yet."""
    body = status_body(code, message)
    head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json", f"Content-Length: {len(body)}",
            "Connection: close"]
    if retry_after is not None:
        head.append(f"Retry-After: {retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def bearer_matches(header: str, token: str) -> bool:
    """`Authorization: Bearer <token>`, compared as bytes in constant time: a header with bytes that are not
    text (kept by the parser as surrogates) is simply not the token."""
    scheme, _, value = header.partition(" ")
    given = value.strip().encode("utf-8", "surrogateescape")
    return scheme.lower() == "bearer" and hmac.compare_digest(given, token.encode("utf-8", "surrogateescape"))


class ConnectionGuard:
    """Counts connections per address, closes the ones that dawdle, answers 503 past the caps."""

    def __init__(self, limits: ReceiverLimits | None = None, *, retry_after_s: int = 1) -> None:
        self.limits = limits or ReceiverLimits()
        self.max_connections, self.max_per_client = self.limits.caps()
        self.retry_after_s = retry_after_s
        self.open = 0
        self.by_client: Counter[str] = Counter()
        self.refused = 0
        """Connections answered 503 because a cap was reached."""
        self.timed_out = 0
        """Connections closed because headers or a body did not arrive in time."""
        self.lingering = 0
        """Refused connections held half-open a moment so their 503 is read (at most `LINGERING`)."""
        self._guarded: dict[Any, _Guarded] = {}

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Guarded(inner, self)

    # -- what the middleware reports ---------------------------------------------------------
    def handling(self, transport: Any) -> None:
        guarded = self._guarded.get(transport)
        if guarded is not None:
            guarded.handling()

    def answered(self, transport: Any) -> None:
        guarded = self._guarded.get(transport)
        if guarded is not None:
            guarded.waiting()

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        transport = request.transport
        self.handling(transport)
        try:
            refused = getattr(request.match_info, "http_exception", None)
            if isinstance(refused, web.HTTPException):  # the router's own 404/405: no route owns the answer
                return status_response(refused.status, f"{request.method} {request.path[:200]} is not served "
                                                       f"here ({refused.reason}); POST /v1/traces.")
            response = await handler(request)
            if response.status == 408:  # the rest of the body may still come: this connection is done
                response.force_close()
            return response
        finally:
            self.answered(transport)

    # -- connections -------------------------------------------------------------------------
    def admit(self, client: str) -> str | None:
        """None when a connection from `client` may open, else why not."""
        if self.open >= self.max_connections:
            return f"The receiver has {self.open} connections open, its limit; retry shortly."
        if self.by_client[client] >= self.max_per_client:
            return f"This address has {self.by_client[client]} connections open, the limit per client; retry shortly."
        return None

    def opened(self, client: str, guarded: _Guarded, transport: Any) -> None:
        self.open += 1
        self.by_client[client] += 1
        self._guarded[transport] = guarded

    def closed(self, client: str, transport: Any) -> None:
        self.open -= 1
        self.by_client[client] -= 1
        if self.by_client[client] <= 0:
            del self.by_client[client]
        self._guarded.pop(transport, None)


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol for one connection, behind the guard: admitted or refused, timed, inspected."""

    def __init__(self, inner: Callable[[], asyncio.Protocol], guard: ConnectionGuard) -> None:
        self._make_inner = inner
        self.inner: asyncio.Protocol | None = None
        self.guard = guard
        self.transport: asyncio.Transport | None = None
        self.client = "?"
        self.timer: asyncio.TimerHandle | None = None
        self.head = b""
        """The bytes of a request's header block, while one is awaited (to refuse an encoding early)."""
        self.inspecting = True
        self.lingers = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.client = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        refusal = self.guard.admit(self.client)
        if refusal is not None:
            self._refuse(refusal)
            return
        self.guard.opened(self.client, self, transport)
        self.inner = self._make_inner()
        if type(self.inner) is RequestHandler:  # aiohttp's own answers to what its parser refuses: OTLP Status
            self.inner.__class__ = _StatusErrors
        self.inner.connection_made(transport)
        self.waiting()

    def _refuse(self, refusal: str) -> None:
        """Answer 503 and close. While few refused connections linger, this one stays half-open a moment,
        dropping what the client sends, so closing does not reset the connection before the answer is read
        (a close with unread data sends a reset); past that, it is closed at once."""
        guard, transport = self.guard, self.transport
        assert transport is not None
        guard.refused += 1
        with contextlib.suppress(Exception):
            transport.write(raw_answer(503, "Service Unavailable", 14, refusal, retry_after=guard.retry_after_s))
        if guard.lingering >= LINGERING or not transport.can_write_eof():
            transport.close()
            return
        guard.lingering += 1
        self.lingers = True
        with contextlib.suppress(Exception):
            transport.write_eof()
        self._arm(LINGER_S)

    # -- timers ------------------------------------------------------------------------------
    def waiting(self) -> None:
        """Waiting for a request's headers: it must come within the header timeout."""
        self.inspecting, self.head = True, b""
        self._arm(self.guard.limits.header_timeout_s)

    def handling(self) -> None:
        """A request is being handled: its body has a deadline of its own (`read_body`)."""
        self.inspecting, self.head = False, b""
        self._disarm()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _too_slow(self) -> None:
        self.timer = None
        if self.transport is not None and not self.lingers:
            self.guard.timed_out += 1
        if self.transport is not None:
            self.transport.abort()

    # -- the byte stream ---------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self.inner is None:
            return
        if self.inspecting and not self._inspect(data):
            return
        self.inner.data_received(data)

    def _inspect(self, data: bytes) -> bool:
        """Look at a request's header block as it arrives; False when it was answered here (415)."""
        self.head = (self.head + data)[:16384]
        end = self.head.find(b"\r\n\r\n")
        if end < 0:
            return True
        self.inspecting = False
        for line in self.head[:end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() != b"content-encoding":
                continue
            encoding = value.strip().lower().decode("latin-1")
            if encoding not in ENCODINGS:
                message = (f"Content-Encoding {encoding[:40]} is not accepted; send gzip, deflate or no "
                           "compression.")
                if self.transport is not None:
                    self.transport.write(raw_answer(415, "Unsupported Media Type", 3, message))
                    self.transport.close()
                return False
        return True

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.lingers:
            self.lingers = False
            self.guard.lingering -= 1
        if self.inner is None:
            return
        self.guard.closed(self.client, self.transport)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


GRPC_CODES = {400: 3, 401: 16, 404: 5, 405: 12, 408: 4, 413: 8, 414: 3, 415: 3, 431: 3}
"""google.rpc.Code for the answers aiohttp gives itself (INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED, …)."""


class _StatusErrors(RequestHandler):
    """aiohttp's request handler, answering what its HTTP parser refuses (a request line or header it cannot
    read, a header too long) with the OTLP `Status` body instead of plain text; same status, same close."""

    __slots__ = ()

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if request.writer.output_size > 0:  # an answer is under way: the connection is broken, as aiohttp says
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        if status >= 500:
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
        text = " ".join(str(message or getattr(exc, "message", "") or exc or "").split())[:300]
        response = web.Response(status=status, content_type="application/json",
                                text=json.dumps({"code": GRPC_CODES.get(status, 13 if status >= 500 else 3),
                                                 "message": f"The request cannot be read: {text}"}))
        response.force_close()
        return response


class GuardedSite(web.BaseSite):
    """`web.TCPSite`, with every connection passing through a `ConnectionGuard` first."""

    __slots__ = ("_guard", "_host", "_port")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: ConnectionGuard) -> None:
        super().__init__(runner)
        self._host, self._port, self._guard = host, port, guard

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._guard.factory(server), self._host, self._port,
                                                reuse_address=os.name != "nt")


async def read_body(request: web.Request, limits: ReceiverLimits) -> bytes:
    """The request's body within its deadline; a body that does not decode as its Content-Encoding says is
    400, one that does not arrive in time 408 (the connection is closed after the answer)."""
    declared = request.content_length or 0
    deadline = limits.body_timeout_s + limits.body_s_per_mib * declared / 2**20
    try:
        return await asyncio.wait_for(request.read(), deadline)
    except TimeoutError:
        raise BodyRefused(408, f"The body did not arrive within {deadline:.0f} s.") from None
    except (HttpProcessingError, RequestPayloadError, zlib.error) as exc:
        cause = exc.__cause__ or exc.__context__ or exc
        raise BodyRefused(400, "The body cannot be read as its Content-Encoding says "
                               f"({type(cause).__name__}: {cause}).") from None
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        raise BodyRefused(400, f"The body ended early: {exc}.") from None
