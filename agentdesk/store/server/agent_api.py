"""The agent API: the gate over HTTP, on the receiver's port, so an agent never needs the store.

Every request needs `Authorization: Bearer <agent token>` (store/agents/tokens.py); without a
valid one the answer is 401 and nothing is read or written. A token is an *agent* identity: the
routes below are all there is (store/agents/service.py, each checking that the agent, run or
approval is the token's own: 403 otherwise), and anything else under `/agent/` is 404, so no
decision, rule, context edit or audit record can be made through this port. Bodies are strict
JSON (store/server/agent_json.py). Waiting for a decision is a long poll (store/server/agent_waits.py)
answered within moments of the decision, or `{"status": "pending"}` after `timeout_s` (the client
asks again, reconnecting with back-off if the receiver restarted). A run's checkpoint and the wait of a paused
agent (store/server/control_waits.py) are served the same way; pausing, resuming and stopping are not.

Answers are JSON: the result, or `{"error": sentence}` with 400 (bad input), 401, 403, 404,
409 (conflict), 411 (no Content-Length), 413 (too large), 415 (not JSON), 503 (store busy, its
PostgreSQL server unreachable, or the receiver stopping: nothing was applied, retry), 500 when the
server went away during a commit and never came back to say whether it landed (not retried blindly).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web

from agentdesk.store.agents import tokens
from agentdesk.store.agents.ownership import Ownership
from agentdesk.store.agents.refusals import Forbidden, Unauthorized
from agentdesk.store.agents.service import AgentService, control_json, decision_json
from agentdesk.store.agents.tokens import AgentIdentity
from agentdesk.store.errors import (
    CommitUnknown,
    Conflict,
    InvalidInput,
    NotFound,
    ServerUnreachable,
    StoreError,
    StoreUnavailable,
)
from agentdesk.store.persistence.database import Store
from agentdesk.store.server import agent_json as aj
from agentdesk.store.server.agent_waits import DecisionWaits, Gone, ShuttingDown
from agentdesk.store.server.control_waits import ControlWaits
from agentdesk.store.uow import commits_on_this_thread

log = logging.getLogger(__name__)

PREFIX = "/agent/v1"
MAX_WAIT_S = 55.0
"""The longest one long poll is held; the client asks again (below common proxies' 60 s idle cut)."""
DEFAULT_WAIT_S = 25.0
TOKEN_CACHE_S = 60.0
"""A verified token is trusted this long without a query; any token created or revoked (heard on the
change bus: at once in this process, within the watcher's poll from another) empties the cache."""
WORKERS = 4
HEARTBEAT_S = 5.0
"""A held question wait looks at the store at least this often, even if no change was heard (and notices a
closed connection)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Call = Callable[[AgentService, dict[str, Any], dict[str, str]], Any]

REGISTER = {"project": aj.NEEDED_TEXT, "agent": aj.NEEDED_TEXT, "model": aj.TEXT, "session": aj.TEXT,
            "task": aj.TEXT, "session_id": aj.TEXT, "context_budget": aj.WHOLE}
SUB_AGENT = {"name": aj.NEEDED_TEXT, "model": aj.NEEDED_TEXT, "context_budget": aj.WHOLE}
STATUS = {"status": aj.NEEDED_TEXT}
RUN = {"title": aj.NEEDED_TEXT}
RUN_STATUS = {"status": aj.TEXT, "session_status": aj.TEXT, "error": aj.TEXT}
SPAN = {"kind": aj.NEEDED_TEXT, "name": aj.NEEDED_TEXT, "parent_span_id": aj.TEXT, "attributes": aj.OBJECT,
        "input": aj.TEXT, "context_of_agent": aj.TEXT}
FINISH_SPAN = {"status": aj.TEXT, "output": aj.TEXT, "input_tokens": aj.WHOLE, "output_tokens": aj.WHOLE,
               "cost_usd": aj.NUMBER, "error": aj.TEXT, "attributes": aj.OBJECT}
TURN = {"kind": aj.TEXT}
CONTEXT = {"group_id": aj.NEEDED_TEXT, "kind": aj.TEXT, "role": aj.TEXT, "content": aj.NEEDED_TEXT,
           "locked": aj.FLAG}
APPROVAL = {"tool": aj.NEEDED_TEXT, "arguments": aj.field(dict, required=True), "span_id": aj.TEXT,
            "expires_in": aj.NUMBER}
WAIT = {"timeout_s": aj.NUMBER}
ASK = {"question": aj.NEEDED_TEXT, "options": aj.field(list), "expires_in": aj.NUMBER, "span_id": aj.TEXT}
CANCEL = {"reason": aj.TEXT}
WITHDRAW = {"reason": aj.TEXT}
NOTHING: aj.Spec = {}


class AgentApi:
    """Routes, token checks and waits; the store work runs on a few worker threads."""

    def __init__(self, store: Store, *, watch: bool = True) -> None:
        self.store = store
        self.ownership = Ownership(store)
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="agentdesk-agent-api")
        self.waits = DecisionWaits(store, self._pool, watch=watch, on_tokens_changed=self._forget_tokens,
                                   on_asks=self._asks_changed)
        self._ask_waits: dict[str, set[asyncio.Event]] = {}
        """Held question waits by ask id, woken (on the loop) when a change of that ask is heard."""
        self.control_waits = ControlWaits(store, self._pool)
        self.waits.listen(self.control_waits.heard)
        self._stamped: dict[str, float] = {}
        self._verified: dict[str, tuple[AgentIdentity, float]] = {}
        self._token_epoch = 0
        self._token_lock = threading.Lock()
        self._stopping = False

    def add_routes(self, app: web.Application) -> None:
        post, get = app.router.add_post, app.router.add_get
        get(f"{PREFIX}/whoami", self._route(NOTHING, lambda s, b, m: s.whoami()))
        post(f"{PREFIX}/register", self._route(REGISTER, lambda s, b, m: s.register(b)))
        get(f"{PREFIX}/agents/{{id}}", self._route(NOTHING, lambda s, b, m: s.attach(m["id"])))
        post(f"{PREFIX}/agents/{{id}}/sub_agents", self._route(SUB_AGENT, lambda s, b, m: s.sub_agent(m["id"], b)))
        post(f"{PREFIX}/agents/{{id}}/finish", self._route(STATUS, lambda s, b, m: s.finish_agent(m["id"], b)))
        post(f"{PREFIX}/agents/{{id}}/runs", self._route(RUN, lambda s, b, m: s.start_run(m["id"], b)))
        post(f"{PREFIX}/agents/{{id}}/turns", self._route(TURN, lambda s, b, m: s.new_turn(m["id"], b)))
        post(f"{PREFIX}/agents/{{id}}/context", self._route(CONTEXT, lambda s, b, m: s.append_context(m["id"], b)))
        get(f"{PREFIX}/agents/{{id}}/context", self._route(NOTHING, lambda s, b, m: s.context(m["id"])))
        post(f"{PREFIX}/agents/{{id}}/inbox", self._route(NOTHING, lambda s, b, m: s.take_messages(m["id"])))
        get(f"{PREFIX}/runs/{{id}}", self._route(NOTHING, lambda s, b, m: s.run_info(m["id"])))
        post(f"{PREFIX}/runs/{{id}}/status", self._route(RUN_STATUS, lambda s, b, m: s.set_run_status(m["id"], b)))
        post(f"{PREFIX}/runs/{{id}}/spans", self._route(SPAN, lambda s, b, m: s.start_span(m["id"], b)))
        post(f"{PREFIX}/runs/{{id}}/approvals",
             self._route(APPROVAL, lambda s, b, m: s.request_approval(m["id"], b)))
        post(f"{PREFIX}/spans/{{id}}/finish", self._route(FINISH_SPAN, lambda s, b, m: s.finish_span(m["id"], b)))
        get(f"{PREFIX}/approvals/{{id}}", self._route(NOTHING, lambda s, b, m: s.decision(m["id"])))
        post(f"{PREFIX}/approvals/{{id}}/withdraw",
             self._route(WITHDRAW, lambda s, b, m: s.withdraw(m["id"], b)))
        post(f"{PREFIX}/approvals/{{id}}/heartbeat", self._route(NOTHING, lambda s, b, m: s.heartbeat(m["id"])))
        post(f"{PREFIX}/approvals/{{id}}/wait", self._wait)
        post(f"{PREFIX}/runs/{{id}}/asks", self._route(ASK, lambda s, b, m: s.ask(m["id"], b)))
        get(f"{PREFIX}/asks/{{id}}", self._route(NOTHING, lambda s, b, m: s.ask_state(m["id"])))
        post(f"{PREFIX}/asks/{{id}}/cancel", self._route(CANCEL, lambda s, b, m: s.cancel_ask(m["id"], b)))
        post(f"{PREFIX}/asks/{{id}}/wait", self._ask_wait)
        post(f"{PREFIX}/runs/{{id}}/checkpoint", self._route(NOTHING, lambda s, b, m: s.checkpoint(m["id"])))
        post(f"{PREFIX}/runs/{{id}}/control/wait", self._wait_control)
        app.router.add_route("*", "/agent/{tail:.*}", self._unknown)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._stopping = False
        self.control_waits.start(loop)
        self.waits.start(loop)

    async def stop(self) -> None:
        """Release every held wait (503: the client reconnects and waits again), then stop the threads."""
        self._stopping = True
        await self.control_waits.stop()
        await self.waits.stop()
        self._pool.shutdown(wait=False)

    # -- plumbing --------------------------------------------------------------------------
    def _route(self, spec: aj.Spec, call: Call) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                service, body = await self._admit(request, spec)
                match = dict(request.match_info)
                result = await self._in_pool(call, service, body, match)
            except StoreError as exc:
                return refusal(exc)
            except Exception as exc:  # one sentence for the agent, the traceback for the log
                log.error("agent API: %s %s failed", request.method, request.path, exc_info=exc)
                return refusal(StoreError(f"The request failed inside agentdesk: {type(exc).__name__}."))
            return web.json_response(result)
        return handle

    async def _in_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._stopping:
            raise StoreUnavailable("The receiver is stopping; retry in a moment.")
        return await asyncio.get_running_loop().run_in_executor(self._pool, answered_once, fn, *args)

    async def _admit(self, request: web.Request, spec: aj.Spec) -> tuple[AgentService, dict[str, Any]]:
        """The caller's identity (401 without one), then the body checked against `spec`."""
        identity = await self._identify(request)
        body: dict[str, Any] = {}
        if request.method == "POST":
            if request.content_length is None:
                raise BodyError(411, "Send the body with a Content-Length.")
            if request.content_length > aj.MAX_BODY_BYTES:
                raise BodyError(413, f"The body is larger than {aj.MAX_BODY_BYTES:,} bytes, the limit.")
            if request.content_length and request.content_type != "application/json":
                raise BodyError(415, "The body must be application/json.")
            try:
                data = await request.read()
            except web.HTTPRequestEntityTooLarge:
                raise BodyError(413, f"The body is larger than {aj.MAX_BODY_BYTES:,} bytes, the limit.") from None
            body = aj.parse_body(data, spec)
        elif request.can_read_body:
            raise InvalidInput("This endpoint takes no body.")
        return AgentService(self.store, self.ownership, identity), body

    async def _identify(self, request: web.Request) -> AgentIdentity:
        given = request.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        presented = value.strip() if scheme.lower() == "bearer" else None
        identity = await self._verify(presented) if presented else None
        if identity is None:
            raise Unauthorized("A valid agent token is required (Authorization: Bearer <token from "
                               "`agentdesk agent-token create NAME`>).")
        now = time.time()
        if now - self._stamped.get(identity.token_id, 0.0) >= tokens.STAMP_EVERY_S and not self._stopping:
            self._stamped[identity.token_id] = now
            asyncio.get_running_loop().run_in_executor(self._pool, _stamp, self.store, identity.token_id, now)
        return identity

    async def _verify(self, presented: str) -> AgentIdentity | None:
        """The token's identity: from the cache (keyed by the token's hash) or one indexed read."""
        now = time.monotonic()
        key = tokens.hash_token(presented)
        with self._token_lock:
            cached, epoch = self._verified.get(key), self._token_epoch
        if cached is not None and now - cached[1] < TOKEN_CACHE_S:
            return cached[0]
        identity = await self._in_pool(tokens.verify, self.store, presented)
        with self._token_lock:
            if identity is not None and epoch == self._token_epoch:  # no token changed while it was read
                if len(self._verified) > 10_000:
                    self._verified.clear()
                self._verified[key] = (identity, now)
        return identity

    def _forget_tokens(self) -> None:
        """A token was created or revoked (any thread): the next request of every agent is checked again."""
        with self._token_lock:
            self._token_epoch += 1
            self._verified.clear()

    async def _wait(self, request: web.Request) -> web.StreamResponse:
        try:
            service, body = await self._admit(request, WAIT)
            approval_id = request.match_info["id"]
            if not self.ownership.cached_owns(service.identity.name, "approval", approval_id):
                await self._in_pool(service.own_approval, approval_id)
            timeout = body.get("timeout_s", DEFAULT_WAIT_S)
            if isinstance(timeout, bool) or not 0 <= timeout <= MAX_WAIT_S:
                raise InvalidInput(f"timeout_s must be from 0 to {MAX_WAIT_S:g} seconds.")
            try:
                decision = await self.waits.wait(approval_id, float(timeout), lambda: connected(request))
            except ShuttingDown:
                raise StoreUnavailable("The receiver is stopping; reconnect and wait again.") from None
            except Gone:
                raise StoreUnavailable("The waiting agent disconnected.") from None
        except StoreError as exc:
            return refusal(exc)
        except Exception as exc:  # e.g. the worker threads already shut down: the client waits on elsewhere
            if self._stopping:
                return refusal(StoreUnavailable("The receiver is stopping; reconnect and wait again."))
            log.error("agent API: waiting on %s failed", request.path, exc_info=exc)
            return refusal(StoreError(f"The wait failed inside agentdesk: {type(exc).__name__}."))
        return web.json_response(decision_json(decision))

    def _asks_changed(self, ids: set[str] | None) -> None:
        """On the loop: wake the held waits of these asks (all of them for None)."""
        for ask_id, events in self._ask_waits.items():
            if ids is None or ask_id in ids:
                for event in events:
                    event.set()

    async def _ask_wait(self, request: web.Request) -> web.StreamResponse:
        """A question's long poll: its state as soon as it is no longer pending, or pending after `timeout_s`.

        Woken by the change bus (this process's writes, and other processes' through the watcher); a deadline
        is a timer: the wait looks again when the question expires, and closes it as expired."""
        try:
            service, body = await self._admit(request, WAIT)
            ask_id = request.match_info["id"]
            timeout = body.get("timeout_s", DEFAULT_WAIT_S)
            if isinstance(timeout, bool) or not 0 <= timeout <= MAX_WAIT_S:
                raise InvalidInput(f"timeout_s must be from 0 to {MAX_WAIT_S:g} seconds.")
            loop = asyncio.get_running_loop()
            give_up = loop.time() + float(timeout)
            event = asyncio.Event()
            self._ask_waits.setdefault(ask_id, set()).add(event)
            try:
                while True:
                    event.clear()
                    found = await self._in_pool(service.ask_state, ask_id)
                    left = give_up - loop.time()
                    if found["status"] != "pending" or left <= 0 or not connected(request):
                        break
                    expires_at = found.get("expires_at")
                    if expires_at is not None:
                        left = min(left, max(0.0, float(expires_at) - time.time()) + 0.02)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(event.wait(), min(left, HEARTBEAT_S))
            finally:
                events = self._ask_waits.get(ask_id)
                if events is not None:
                    events.discard(event)
                    if not events:
                        del self._ask_waits[ask_id]
        except StoreError as exc:
            return refusal(exc)
        except Exception as exc:
            if self._stopping:
                return refusal(StoreUnavailable("The receiver is stopping; reconnect and wait again."))
            log.error("agent API: waiting on %s failed", request.path, exc_info=exc)
            return refusal(StoreError(f"The wait failed inside agentdesk: {type(exc).__name__}."))
        return web.json_response(found)

    async def _wait_control(self, request: web.Request) -> web.StreamResponse:
        """A paused agent's long poll: answered when its run is no longer held, or as it is after `timeout_s`."""
        try:
            service, body = await self._admit(request, WAIT)
            run_id = request.match_info["id"]
            await self._in_pool(service.own_run, run_id)
            timeout = body.get("timeout_s", DEFAULT_WAIT_S)
            if isinstance(timeout, bool) or not 0 <= timeout <= MAX_WAIT_S:
                raise InvalidInput(f"timeout_s must be from 0 to {MAX_WAIT_S:g} seconds.")
            try:
                control = await self.control_waits.wait(run_id, float(timeout))
            except asyncio.CancelledError:
                if self._stopping:
                    raise StoreUnavailable("The receiver is stopping; reconnect and wait again.") from None
                raise
        except StoreError as exc:
            return refusal(exc)
        except Exception as exc:
            if self._stopping:
                return refusal(StoreUnavailable("The receiver is stopping; reconnect and wait again."))
            log.error("agent API: waiting on %s failed", request.path, exc_info=exc)
            return refusal(StoreError(f"The wait failed inside agentdesk: {type(exc).__name__}."))
        return web.json_response(control_json(control))

    async def _unknown(self, request: web.Request) -> web.StreamResponse:
        try:
            await self._identify(request)
        except StoreError as exc:
            return refusal(exc)
        return refusal(NotFound(f"There is no agent endpoint {request.method} {request.path}: an agent token "
                                "can register, run, write spans and context, ask for approvals and ask questions; "
                                "deciding, answering, rules, context edits and the audit log are an operator's, "
                                "never served here."))


def answered_once(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, where a lost server after one of its writes committed is no 503.

    A 503 tells the client nothing was applied and to send the request again; a request that wrote
    twice (a registration: session, then agent) and lost the server between them would be applied
    twice. It says so instead (500), and the agent can look before it tries again.
    """
    before = commits_on_this_thread()
    try:
        return fn(*args)
    except ServerUnreachable as exc:
        if commits_on_this_thread() == before:
            raise
        raise CommitUnknown("The store's server went away after part of this request was written; look at "
                            "what is there before sending it again.") from exc


def connected(request: web.Request) -> bool:
    transport = request.transport
    return transport is not None and not transport.is_closing()


class BodyError(InvalidInput):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _stamp(store: Store, token_id: str, at: float) -> None:
    try:
        tokens.stamp_used(store, token_id, at)
    except Exception:  # a usage stamp is a courtesy: never fail a request for it
        log.debug("agent API: could not stamp token %s as used", token_id, exc_info=True)


def status_of(exc: StoreError) -> int:
    if isinstance(exc, BodyError):
        return exc.status
    for kind, status in ((Unauthorized, 401), (Forbidden, 403), (NotFound, 404), (Conflict, 409),
                         (InvalidInput, 400), (CommitUnknown, 500), (StoreUnavailable, 503)):
        if isinstance(exc, kind):
            return status
    return 500


def refusal(exc: StoreError) -> web.Response:
    status = status_of(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if status == 503:
        headers["Retry-After"] = "1"
    if status == 500:
        log.error("agent API: %s", exc, exc_info=exc)
    return web.Response(status=status, text=json.dumps({"error": str(exc)}), content_type="application/json",
                        headers=headers)
