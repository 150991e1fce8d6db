"""The client over HTTP: the receiver's agent API with an agent token, so the agent never holds the store.

    AGENTDESK_URL=http://127.0.0.1:4318 AGENTDESK_TOKEN=adt_… python my_agent.py

Sync calls use the standard library (`http.client`, one keep-alive connection per thread);
waiting from asyncio uses aiohttp (already a dependency). Waiting for a decision is a long
poll: the receiver answers the moment the operator decides, or "still pending" after a while,
and the client asks again. The receiver beats the requester heartbeat while a wait is held.
When the receiver is unreachable (restarted, not up yet), the client reconnects with back-off:
a wait simply goes on and gets its decision from the receiver that comes back; other calls
retry for up to `reconnect_s`. A call is retried only when nothing can have been written
(the connection was refused, a kept-alive connection had gone stale, or a 503: the receiver
answers 503 only when nothing was applied, e.g. while its PostgreSQL server is unreachable), and
waiting, reading, beating and withdrawing always, since doing those twice changes nothing. Pauses
grow from 0.1 s to 2 s, calls retry for up to ten minutes (`RIDE_OUT_S`), and an outage is one
line on stderr ("agentdesk receiver at URL unreachable since 12:03:04, retrying"), not one per call.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from agentdesk.client.context import from_wire
from agentdesk.store.agents.context_view import ModelContext
from agentdesk.store.agents.refusals import Forbidden, Unauthorized
from agentdesk.store.agents.registry import Registered
from agentdesk.store.asks.waiting import AskState
from agentdesk.store.control.state import ControlState, RunControl
from agentdesk.store.errors import Conflict, InvalidInput, NotFound, StoreError, StoreUnavailable
from agentdesk.store.messages.commands import Delivered
from agentdesk.store.persistence.outage import RIDE_OUT_S, Outage, Pauses
from agentdesk.store.runtime import Decision

URL_ENV, TOKEN_ENV = "AGENTDESK_URL", "AGENTDESK_TOKEN"
PREFIX = "/agent/v1"
LONG_POLL_S = 50.0
"""How long one wait request is held at most (the receiver caps it at 55 s)."""
CALL_TIMEOUT_S = 60.0
RECONNECT_S = RIDE_OUT_S
FIRST_CONTACT_S = 60.0
"""Connecting gives up sooner: a receiver never reached is more likely a wrong URL than an outage."""
RETRY_STATUSES = {502, 503, 504}


def is_url(target: str | None) -> bool:
    return bool(target) and str(target).lower().startswith(("http://", "https://"))


class Unreachable(Exception):
    """No answer from the receiver (connection refused, reset, timed out)."""


Backoff = Pauses
"""0.1 s doubling to 2 s, as every agentdesk process waits for a server (store/persistence/outage.py)."""


class HttpRuntime:
    """The agent level over the agent API; the same methods the handles call on a local runtime."""

    def __init__(self, url: str, token: str | None, *, reconnect_s: float = RECONNECT_S) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(f"Not an agentdesk URL: {url!r} (expected http://HOST:PORT).")
        if not token:
            raise Unauthorized(f"An agent token is needed to use {url}: set ${TOKEN_ENV} (from `agentdesk "
                               "agent-token create NAME`) or pass token=.")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._token = token
        self.reconnect_s = reconnect_s
        self.outage = Outage(self.url, kind="agentdesk receiver")
        self._local = threading.local()
        self.actor = str(self._call("GET", "/whoami", give_up_s=min(reconnect_s, FIRST_CONTACT_S))["name"])
        self.store = None

    # -- transport -------------------------------------------------------------------------
    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = kind(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _once(self, method: str, path: str, body: Mapping[str, Any] | None, timeout: float,
              idempotent: bool) -> tuple[int, dict[str, Any]]:
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = self._connection(timeout)
            reused = conn.sock is not None
            try:
                conn.request(method, self._base + PREFIX + path, body=data if data is not None else
                             (b"" if method == "POST" else None), headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except ConnectionRefusedError as exc:
                self._drop_connection()
                raise Unreachable(f"connection refused ({exc.strerror or exc})") from exc
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self._drop_connection()
                if reused and attempt == 1:
                    continue  # a kept-alive connection the server had closed: nothing was received
                if idempotent:
                    raise Unreachable(f"the connection broke ({exc})") from exc
                raise StoreUnavailable(f"The connection to {self.url} broke before the answer; the write may or "
                                       "may not have happened.") from exc
            except (OSError, http.client.HTTPException) as exc:  # timeouts included
                self._drop_connection()
                if idempotent:
                    raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
                raise StoreUnavailable(f"No answer from {self.url}: {exc}.") from exc
            try:
                answer = json.loads(raw.decode() or "{}") if raw else {}
            except ValueError:
                answer = {"error": raw[:200].decode(errors="replace")}
            return response.status, answer if isinstance(answer, dict) else {}
        raise Unreachable("the connection broke twice")  # pragma: no cover - the loop returns or raises

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None, *, idempotent: bool = False,
              timeout: float = CALL_TIMEOUT_S, give_up_s: float | None = None) -> dict[str, Any]:
        """One call, retried with back-off while the receiver is unreachable or busy (see the module)."""
        backoff = Backoff()
        deadline = time.monotonic() + (self.reconnect_s if give_up_s is None else give_up_s)
        while True:
            try:
                status, answer = self._once(method, path, body, timeout, idempotent)
            except Unreachable as exc:
                problem = f"Cannot reach the agentdesk receiver at {self.url}: {exc}."
                status, answer = 0, {"error": problem}
            if status == 0 or status in RETRY_STATUSES:
                pause = backoff.next()
                if time.monotonic() + pause > deadline:
                    raise StoreUnavailable(str(answer.get("error") or f"The receiver answered {status}."))
                self.outage.lost()
                time.sleep(pause)
                continue
            self.outage.back()
            if status >= 400:
                raise error_of(status, str(answer.get("error") or f"The receiver answered {status}."))
            return answer

    # -- registration ----------------------------------------------------------------------
    def register(self, *, project: str, agent: str, model: str, session: str | None, task: str,
                 session_id: str | None, context_budget: int) -> Registered:
        found = self._call("POST", "/register", {"project": project, "agent": agent, "model": model,
                                                 "session": session, "task": task, "session_id": session_id,
                                                 "context_budget": context_budget})
        return registered(found)

    def attach(self, agent_id: str) -> Registered:
        return registered(self._call("GET", f"/agents/{q(agent_id)}", idempotent=True))

    def find_run(self, run_id: str) -> Registered | None:
        try:
            found = self._call("GET", f"/runs/{q(run_id)}", idempotent=True)
        except NotFound:
            return None
        return Registered(found["agent_id"], found["session_id"], found["project_id"], found["agent_name"])

    def create_agent(self, session_id: str, name: str, model: str, parent_agent_id: str | None = None,
                     context_budget: int = 128_000) -> str:
        if parent_agent_id is None:
            raise InvalidInput("Over HTTP a new agent is registered with AgentDesk.register, or made a sub-agent.")
        found = self._call("POST", f"/agents/{q(parent_agent_id)}/sub_agents",
                           {"name": name, "model": model, "context_budget": context_budget})
        return str(found["agent_id"])

    # -- runs and spans --------------------------------------------------------------------
    def start_run(self, agent_id: str, title: str) -> str:
        return str(self._call("POST", f"/agents/{q(agent_id)}/runs", {"title": title})["run_id"])

    def set_run_status(self, run_id: str, status: str, error: str | None = None) -> None:
        self._call("POST", f"/runs/{q(run_id)}/status", {"status": status, "error": error}, idempotent=True)

    def set_session_status(self, session_id: str, status: str) -> None:
        raise InvalidInput("Over HTTP a session's status is set through its agent (agent.finish) or a run.")

    def finish_session(self, agent_id: str, session_id: str, status: str) -> None:
        self._call("POST", f"/agents/{q(agent_id)}/finish", {"status": status}, idempotent=True)

    def start_span(self, run_id: str, kind: str, name: str, parent_span_id: str | None = None,
                   attributes: Mapping[str, Any] | None = None, input_text: str | None = None,
                   context_of_agent: str | None = None) -> str:
        found = self._call("POST", f"/runs/{q(run_id)}/spans", {
            "kind": kind, "name": name, "parent_span_id": parent_span_id, "attributes": dict(attributes or {}),
            "input": input_text, "context_of_agent": context_of_agent})
        return str(found["span_id"])

    def finish_span(self, span_id: str, status: str = "ok", output_text: str | None = None,
                    input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0,
                    error: str | None = None, attributes: Mapping[str, Any] | None = None) -> None:
        self._call("POST", f"/spans/{q(span_id)}/finish", {
            "status": status, "output": output_text, "input_tokens": input_tokens, "output_tokens": output_tokens,
            "cost_usd": cost_usd, "error": error, "attributes": dict(attributes) if attributes else None})

    # -- context ---------------------------------------------------------------------------
    def new_turn_group(self, agent_id: str, kind: str = "turn") -> str:
        return str(self._call("POST", f"/agents/{q(agent_id)}/turns", {"kind": kind})["group_id"])

    def append_context(self, agent_id: str, group_id: str, kind: str, role: str | None, content: str,
                       locked: bool = False) -> str:
        found = self._call("POST", f"/agents/{q(agent_id)}/context", {
            "group_id": group_id, "kind": kind, "role": role, "content": content, "locked": locked})
        return str(found["item_id"])

    def model_context(self, agent_id: str) -> ModelContext:
        return from_wire(self._call("GET", f"/agents/{q(agent_id)}/context", idempotent=True))

    def take_messages(self, agent_id: str) -> list[Delivered]:
        # idempotent: a retry after a lost answer takes nothing more, and what the first took is in the context
        found = self._call("POST", f"/agents/{q(agent_id)}/inbox", idempotent=True)
        return [Delivered(str(m["message_id"]), str(m["item_id"]), str(m["content"]), str(m["author"]),
                          float(m["sent_at"])) for m in found["messages"]]

    # -- approvals -------------------------------------------------------------------------
    def statuses(self, run_id: str, session_id: str) -> tuple[str, str]:
        found = self._call("GET", f"/runs/{q(run_id)}", idempotent=True)
        return str(found["status"]), str(found["session_status"])

    def set_statuses(self, run_id: str, session_id: str, run_status: str, session_status: str) -> None:
        self._call("POST", f"/runs/{q(run_id)}/status", {"status": run_status, "session_status": session_status},
                   idempotent=True)

    def request_approval(self, run_id: str, tool_name: str, arguments: str, span_id: str | None = None,
                         timeout_s: float | None = 300.0) -> str:
        found = self._call("POST", f"/runs/{q(run_id)}/approvals", {
            "tool": tool_name, "arguments": json.loads(arguments), "span_id": span_id, "expires_in": timeout_s})
        return str(found["approval_id"])

    def poll_decision(self, approval_id: str) -> Decision | None:
        return decision_of(self._call("GET", f"/approvals/{q(approval_id)}", idempotent=True))

    def beat(self, approval_id: str) -> bool:
        return bool(self._call("POST", f"/approvals/{q(approval_id)}/heartbeat", idempotent=True)["pending"])

    def wait_for_decision(self, approval_id: str, timeout_s: float | None = None, poll_s: float = 0.1) -> Decision:
        """Long polls until decided; reconnects with back-off for as long as it waits (`poll_s` is unused)."""
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        backoff = Backoff()
        while True:
            left = None if give_up is None else give_up - time.monotonic()
            if left is not None and left <= 0:
                return Decision("pending", None, "", None)
            hold = LONG_POLL_S if left is None else min(LONG_POLL_S, left)
            try:
                status, answer = self._once("POST", f"/approvals/{q(approval_id)}/wait", {"timeout_s": hold},
                                            hold + 15.0, True)
            except Unreachable:
                status, answer = 0, {}
            if status == 0 or status >= 500:  # waiting twice changes nothing: ride out any server trouble
                self.outage.lost()
                pause = backoff.next()
                time.sleep(pause if left is None else max(0.0, min(pause, left)))
                continue
            self.outage.back()
            if status >= 400:
                raise error_of(status, str(answer.get("error") or status))
            backoff = Backoff()
            decision = decision_of(answer)
            if decision is not None:
                return decision

    async def await_decision(self, approval_id: str, timeout_s: float | None = None) -> Decision:
        import aiohttp

        loop = asyncio.get_running_loop()
        give_up = None if timeout_s is None else loop.time() + timeout_s
        backoff = Backoff()
        url = f"{self.url}{PREFIX}/approvals/{q(approval_id)}/wait"
        headers = {"Authorization": f"Bearer {self._token}"}
        async with aiohttp.ClientSession() as session:
            while True:
                left = None if give_up is None else give_up - loop.time()
                if left is not None and left <= 0:
                    return Decision("pending", None, "", None)
                hold = LONG_POLL_S if left is None else min(LONG_POLL_S, left)
                try:
                    async with session.post(url, json={"timeout_s": hold}, headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=hold + 15.0)) as response:
                        status = response.status
                        answer = await response.json(content_type=None)
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    status, answer = 0, {}
                if status == 0 or status >= 500:
                    self.outage.lost()
                    pause = backoff.next()
                    await asyncio.sleep(pause if left is None else max(0.0, min(pause, left)))
                    continue
                self.outage.back()
                if status >= 400:
                    raise error_of(status, str((answer or {}).get("error") or status))
                backoff = Backoff()
                decision = decision_of(answer)
                if decision is not None:
                    return decision

    def withdraw_request(self, approval_id: str, why: str) -> Decision | None:
        return decision_of(self._call("POST", f"/approvals/{q(approval_id)}/withdraw", {"reason": why},
                                      idempotent=True))

    # -- questions -------------------------------------------------------------------------
    def ask(self, run_id: str, question: str, options: list[str] | None, expires_in: float | None,
            span_id: str | None) -> str:
        found = self._call("POST", f"/runs/{q(run_id)}/asks", {"question": question, "options": options,
                                                               "expires_in": expires_in, "span_id": span_id})
        return str(found["ask_id"])

    def wait_for_answer(self, ask_id: str, timeout_s: float | None = None) -> AskState:
        """Long polls until answered, expired or cancelled; reconnects with back-off for as long as it waits."""
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        backoff = Backoff()
        last: AskState | None = None
        while True:
            left = None if give_up is None else give_up - time.monotonic()
            if left is not None and left <= 0:
                return last or AskState.of(self._call("GET", f"/asks/{q(ask_id)}", idempotent=True))
            hold = LONG_POLL_S if left is None else min(LONG_POLL_S, left)
            try:
                status, answer = self._once("POST", f"/asks/{q(ask_id)}/wait", {"timeout_s": hold}, hold + 15.0, True)
            except Unreachable:
                status, answer = 0, {}
            if status == 0 or status >= 500:
                pause = backoff.next()
                time.sleep(pause if left is None else max(0.0, min(pause, left)))
                continue
            if status >= 400:
                raise error_of(status, str(answer.get("error") or status))
            backoff = Backoff()
            last = AskState.of(answer)
            if not last.pending:
                return last

    async def await_answer(self, ask_id: str, timeout_s: float | None = None) -> AskState:
        import aiohttp

        loop = asyncio.get_running_loop()
        give_up = None if timeout_s is None else loop.time() + timeout_s
        backoff = Backoff()
        url = f"{self.url}{PREFIX}/asks/{q(ask_id)}/wait"
        headers = {"Authorization": f"Bearer {self._token}"}
        last = AskState(ask_id, "pending")
        async with aiohttp.ClientSession() as session:
            while True:
                left = None if give_up is None else give_up - loop.time()
                if left is not None and left <= 0:
                    return last
                hold = LONG_POLL_S if left is None else min(LONG_POLL_S, left)
                try:
                    async with session.post(url, json={"timeout_s": hold}, headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=hold + 15.0)) as response:
                        status = response.status
                        answer = await response.json(content_type=None)
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    status, answer = 0, {}
                if status == 0 or status >= 500:
                    pause = backoff.next()
                    await asyncio.sleep(pause if left is None else max(0.0, min(pause, left)))
                    continue
                if status >= 400:
                    raise error_of(status, str((answer or {}).get("error") or status))
                backoff = Backoff()
                last = AskState.of(answer)
                if not last.pending:
                    return last

    def cancel_ask(self, ask_id: str, why: str) -> AskState:
        return AskState.of(self._call("POST", f"/asks/{q(ask_id)}/cancel", {"reason": why}, idempotent=True))

    def checkpoint(self, run_id: str) -> RunControl:
        return control_of(run_id, self._call("POST", f"/runs/{q(run_id)}/checkpoint", {}, idempotent=True))

    def wait_control(self, run_id: str, timeout_s: float) -> RunControl:
        """One long poll (capped at the receiver's limit); a receiver that is away is ridden out like a wait."""
        hold = max(0.0, min(LONG_POLL_S, timeout_s))
        try:
            status, answer = self._once("POST", f"/runs/{q(run_id)}/control/wait", {"timeout_s": hold},
                                        hold + 15.0, True)
        except Unreachable:
            status, answer = 0, {}
        if status == 0 or status >= 500:
            time.sleep(Backoff().next())
            return self.checkpoint(run_id)
        if status >= 400:
            raise error_of(status, str(answer.get("error") or status))
        return control_of(run_id, answer)

    def close(self) -> None:
        self._drop_connection()


def q(part: str) -> str:
    return quote(part, safe="")


def registered(found: Mapping[str, Any]) -> Registered:
    return Registered(str(found["agent_id"]), str(found["session_id"]), str(found["project_id"]), str(found["name"]))


def control_of(run_id: str, answer: Mapping[str, Any]) -> RunControl:
    return RunControl(run_id, ControlState(str(answer.get("state") or "running")),
                      answer.get("set_by"), answer.get("set_at"), answer.get("reason"), answer.get("held_at"),
                      answer.get("set_login"))


def decision_of(answer: Mapping[str, Any]) -> Decision | None:
    if answer.get("status") in (None, "pending"):
        return None
    return Decision(str(answer["status"]), answer.get("reason"), str(answer.get("arguments") or ""),
                    answer.get("decided_by"))


def error_of(status: int, message: str) -> StoreError:
    kind: type[StoreError] = {400: InvalidInput, 401: Unauthorized, 403: Forbidden, 404: NotFound,
                              409: Conflict}.get(status, StoreUnavailable)
    return kind(message)
