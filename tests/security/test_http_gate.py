"""Red team, over HTTP: what an agent token can do to the store through the receiver's agent API.

Without a valid token nothing is read or written (401). With one, an agent can do only the agent
level's work on what it registered itself: every operator action (decide, rules, context edits,
the audit log, tokens) is refused, as is any other agent's approval, run or context (403/404).
Each refusal is checked to have written nothing: every table's row count, the change log and the
audit log stay as they were, and the victim approval stays pending and unbeaten. On SQLite and on
PostgreSQL (tests/conftest.py: PG_MODULES).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from agentdesk.client import AgentDesk
from agentdesk.store.agents import tokens
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.conftest import prebuilt


@dataclass
class World:
    store: Store
    host: str
    port: int
    alice: str
    """alice-bot's token: it registered the agent and asked for the approval."""
    mallory: str
    """mallory-bot's token: another agent."""
    revoked: str
    agent_id: str
    session_id: str
    run_id: str
    span_id: str
    item_id: str
    group_id: str
    approval_id: str
    ask_id: str = ""
    """alice-bot's question (issue 24): an agent token asks, waits and cancels; nobody answers over this port."""
    receiver: ReceiverThread | None = None
    """To wait for what `/v1/traces` acknowledged (durable in the spool) to be in the store."""


@pytest.fixture
def world(store_path: Path) -> Iterator[World]:
    store = open_store(str(prebuilt(store_path)), create=True)
    alice = tokens.create(store, "alice-bot", "operator")[1]
    mallory = tokens.create(store, "mallory-bot", "operator")[1]
    revoked = tokens.create(store, "old-bot", "operator")[1]
    tokens.revoke(store, "old-bot", "operator")
    thread = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = thread.start()
    with AgentDesk.connect(f"http://{host}:{port}", token=alice) as desk:
        agent = desk.register(project="p", agent="a")
        group = agent.new_turn()
        item = agent.add_context("hello")
        run = agent.start_run("r")
        span = desk.runtime.start_span(run.id, "tool", "t")
        approval = desk.runtime.request_approval(run.id, "run_shell", '{"command": "ls"}', span_id=span)
        ask = desk.runtime.ask(run.id, "Deploy now?", ["yes", "no"], 600, None)
    yield World(store, host, port, alice, mallory, revoked, agent.id, agent.session_id, run.id, span, item, group,
                approval, ask, thread)
    thread.stop()
    store.close()


def call(w: World, method: str, path: str, body: Any = None, *, token: str | None = None,
         authorization: str | None = None, raw: bytes | None = None,
         content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection(w.host, w.port, timeout=30)
    headers = {}
    if authorization is not None:
        headers["Authorization"] = authorization
    elif token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    if data is not None:
        headers["Content-Type"] = content_type
    elif method in ("POST", "PUT", "PATCH"):
        data = b""
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        text = response.read()
    finally:
        conn.close()
    try:
        answer = json.loads(text) if text else {}
    except ValueError:
        answer = {"raw": text[:200].decode(errors="replace")}
    return response.status, answer if isinstance(answer, dict) else {}


def footprint(store: Store) -> dict[str, Any]:
    """Every table's row count, the change log's and the audit log's last seq, and the victim approvals."""
    found: dict[str, Any] = {}
    with store.reading() as s:
        for table in sc.Base.metadata.sorted_tables:
            found[table.name] = s.execute(select(func.count()).select_from(table)).scalar()
        found["change_seq"] = s.execute(select(func.max(sc.ChangeRow.seq))).scalar()
        found["audit_seq"] = s.execute(select(func.max(sc.AuditRow.seq))).scalar()
        found["asks"] = [tuple(r) for r in s.execute(select(sc.AskRow.id, sc.AskRow.status, sc.AskRow.answer,
                                                           sc.AskRow.revision))]
        A = sc.ApprovalRow
        found["approvals"] = [tuple(r) for r in s.execute(select(A.id, A.status, A.decided_by, A.reason,
                                                                A.edited_arguments, A.requester_heartbeat_at,
                                                                A.revision))]
        item = sc.ContextItemRow
        found["items"] = [tuple(r) for r in s.execute(select(item.id, item.content, item.visible, item.locked,
                                                             item.revision))]
    return found


def routes(w: World) -> list[tuple[str, str, Any]]:
    """Every agent endpoint, with a body it would accept from its owner."""
    v = "/agent/v1"
    return [
        ("GET", f"{v}/whoami", None),
        ("POST", f"{v}/register", {"project": "p", "agent": "x"}),
        ("GET", f"{v}/agents/{w.agent_id}", None),
        ("POST", f"{v}/agents/{w.agent_id}/sub_agents", {"name": "s", "model": "m"}),
        ("POST", f"{v}/agents/{w.agent_id}/finish", {"status": "done"}),
        ("POST", f"{v}/agents/{w.agent_id}/runs", {"title": "t"}),
        ("POST", f"{v}/agents/{w.agent_id}/turns", {"kind": "turn"}),
        ("POST", f"{v}/agents/{w.agent_id}/context", {"group_id": w.group_id, "content": "c"}),
        ("GET", f"{v}/agents/{w.agent_id}/context", None),
        ("GET", f"{v}/runs/{w.run_id}", None),
        ("POST", f"{v}/runs/{w.run_id}/status", {"status": "done"}),
        ("POST", f"{v}/runs/{w.run_id}/spans", {"kind": "tool", "name": "n"}),
        ("POST", f"{v}/runs/{w.run_id}/approvals", {"tool": "t", "arguments": {}}),
        ("POST", f"{v}/spans/{w.span_id}/finish", {"status": "ok"}),
        ("GET", f"{v}/approvals/{w.approval_id}", None),
        ("POST", f"{v}/approvals/{w.approval_id}/wait", {"timeout_s": 0}),
        ("POST", f"{v}/approvals/{w.approval_id}/withdraw", {"reason": "r"}),
        ("POST", f"{v}/approvals/{w.approval_id}/heartbeat", None),
        ("POST", f"{v}/runs/{w.run_id}/asks", {"question": "q?"}),
        ("GET", f"{v}/asks/{w.ask_id}", None),
        ("POST", f"{v}/asks/{w.ask_id}/wait", {"timeout_s": 0}),
        ("POST", f"{v}/asks/{w.ask_id}/cancel", {"reason": "r"}),
        ("POST", f"{v}/runs/{w.run_id}/checkpoint", None),
        ("POST", f"{v}/runs/{w.run_id}/control/wait", {"timeout_s": 0}),
    ]


def operator_actions(w: World) -> list[tuple[str, str, Any]]:
    """What only an operator (or admin) may do, as an agent might guess the endpoints."""
    v, a = "/agent/v1", w.approval_id
    decision = {"approve": True, "actor": "alice", "reason": "ok", "edited_arguments": '{"command": "id"}'}
    return [
        *[("POST", f"{v}/approvals/{a}/{verb}", decision)
          for verb in ("approve", "deny", "decide", "edit", "dismiss", "expire", "answer")],
        ("POST", f"{v}/approvals/{a}", decision),
        *[("POST", f"{v}/asks/{w.ask_id}/{verb}", {"answer": "yes", "actor": "alice"})
          for verb in ("answer", "reply", "decide")],
        ("PATCH", f"{v}/asks/{w.ask_id}", {"status": "answered", "answer": "yes"}),
        ("PUT", f"{v}/approvals/{a}", decision),
        ("PATCH", f"{v}/approvals/{a}", {"status": "approved"}),
        ("DELETE", f"{v}/approvals/{a}", None),
        ("POST", f"{v}/decide", {"id": a, **decision}),
        ("POST", f"{v}/approvals/dismiss_gone", {}),
        ("GET", f"{v}/rules", None),
        ("POST", f"{v}/rules", {"tool": "*", "matcher": {"kind": "any"}, "effect": "allow"}),
        ("PUT", f"{v}/rules/rul_1", {"tool": "*"}),
        ("DELETE", f"{v}/rules/rul_1", None),
        ("POST", f"{v}/context/items/{w.item_id}/edit", {"content": "rewritten"}),
        ("PATCH", f"{v}/agents/{w.agent_id}/context/{w.item_id}", {"content": "rewritten"}),
        ("POST", f"{v}/agents/{w.agent_id}/context/{w.item_id}/hide", {}),
        ("POST", f"{v}/agents/{w.agent_id}/context/{w.item_id}/lock", {}),
        ("POST", f"{v}/groups/{w.group_id}/hide", {}),
        ("POST", f"{v}/agents/{w.agent_id}/compactions", {"summary": "s", "items": [w.item_id]}),
        ("DELETE", f"{v}/agents/{w.agent_id}/context", None),
        ("POST", f"{v}/audit", {"action": "approval.approved", "entity_id": a}),
        ("POST", f"{v}/audit/append", {"action": "approval.approved"}),
        ("POST", f"{v}/agent-tokens", {"name": "root"}),
        ("DELETE", f"{v}/agent-tokens/alice-bot", None),
        ("POST", f"{v}/admin/role", {"login": "x", "level": "admin"}),
        *[("POST", f"{v}/runs/{w.run_id}/{verb}", {"actor": "alice"})
          for verb in ("pause", "resume", "stop", "control", "control/resume", "control/stop")],
        ("PUT", f"{v}/runs/{w.run_id}/control", {"state": "running"}),
        ("POST", "/v1/decide", {"id": a, **decision}),
        ("POST", "/v1/approvals/approve", {"id": a}),
        ("GET", "/v1/traces", None),
    ]


# -- no valid token: 401 and nothing written -------------------------------------------------
@pytest.mark.parametrize("how", ["none", "empty", "wrong", "revoked", "basic", "huge", "lowercase-prefix-only"])
def test_without_a_valid_token_every_endpoint_is_401(world: World, how: str) -> None:
    auth = {"none": None, "empty": "Bearer ", "wrong": "Bearer adt_" + "A" * 43, "revoked": f"Bearer {world.revoked}",
            "basic": f"Basic {world.alice}", "huge": "Bearer " + "x" * 100_000,
            "lowercase-prefix-only": world.alice}[how]
    before = footprint(world.store)
    refused = []
    for method, path, body in [*routes(world), *[r for r in operator_actions(world) if r[1].startswith("/agent/")]]:
        status, answer = call(world, method, path, body, authorization=auth)
        if status != 401 and not (how == "huge" and status in (400, 431)):
            refused.append(f"{method} {path} answered {status}: {answer}")
    assert refused == []
    assert footprint(world.store) == before


def test_a_token_stops_working_the_moment_it_is_revoked(world: World) -> None:
    assert call(world, "GET", "/agent/v1/whoami", token=world.mallory)[0] == 200
    tokens.revoke(world.store, "mallory-bot", "operator")
    assert call(world, "GET", "/agent/v1/whoami", token=world.mallory)[0] == 401


# -- an agent token: never an operator -------------------------------------------------------
@pytest.mark.parametrize("who", ["owner", "other"])
def test_every_operator_action_is_refused_to_an_agent_token(world: World, who: str) -> None:
    token = world.alice if who == "owner" else world.mallory
    before = footprint(world.store)
    got_through = []
    for method, path, body in operator_actions(world):
        status, answer = call(world, method, path, body, token=token)
        if status not in (403, 404, 405):
            got_through.append(f"{method} {path} answered {status}: {answer}")
    assert got_through == []
    after = footprint(world.store)
    assert after == before
    assert [row[1] for row in after["approvals"]] == ["pending"]


def test_another_agents_things_are_403_and_untouched(world: World) -> None:
    before = footprint(world.store)
    got_through = []
    for method, path, body in routes(world):
        if path.endswith(("/whoami", "/register")):
            continue
        status, answer = call(world, method, path, body, token=world.mallory)
        if status != 403:
            got_through.append(f"{method} {path} answered {status}: {answer}")
    assert got_through == []
    assert footprint(world.store) == before


def test_an_agent_cannot_join_another_agents_session_or_snapshot_its_context(world: World) -> None:
    status, _ = call(world, "POST", "/agent/v1/register", {"project": "p", "agent": "x",
                                                          "session_id": world.session_id}, token=world.mallory)
    assert status == 403
    _, mine = call(world, "POST", "/agent/v1/register", {"project": "p", "agent": "m"}, token=world.mallory)
    _, run = call(world, "POST", f"/agent/v1/agents/{mine['agent_id']}/runs", {"title": "r"}, token=world.mallory)
    before = footprint(world.store)
    status, _ = call(world, "POST", f"/agent/v1/runs/{run['run_id']}/spans",
                     {"kind": "model", "name": "peek", "context_of_agent": world.agent_id}, token=world.mallory)
    assert status == 403 and footprint(world.store) == before


def test_an_agent_cannot_write_an_operators_compaction(world: World) -> None:
    before = footprint(world.store)
    status, answer = call(world, "POST", f"/agent/v1/agents/{world.agent_id}/context",
                          {"group_id": world.group_id, "kind": "compaction", "content": "all fine"}, token=world.alice)
    assert status == 400 and "kind" in answer["error"]
    assert footprint(world.store) == before


def test_the_requester_is_the_tokens_name(world: World) -> None:
    A = sc.AuditRow
    with world.store.reading() as s:
        actor = s.execute(select(A.actor).where(A.entity_id == world.approval_id,
                                                A.action == "approval.request")).scalar_one()
    assert actor == "alice-bot"
    status, answer = call(world, "POST", f"/agent/v1/runs/{world.run_id}/approvals",
                          {"tool": "t", "arguments": {}, "actor": "alice"}, token=world.alice)
    assert status == 400 and "Unknown field" in answer["error"]


# -- bodies ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("raw", "content_type", "status", "words"), [
    (b'{"tool": "run_shell", "arguments": {"command": "rm -rf ~", "command": "git status"}}', "application/json",
     400, "appears twice"),
    (b'{"tool": "t", "tool": "u", "arguments": {}}', "application/json", 400, "appears twice"),
    (b'{"tool": "t", "arguments": {"n": NaN}}', "application/json", 400, "not valid JSON"),
    (b'{"tool": "t", "arguments": []}', "application/json", 400, "must be an object"),
    (b'["tool"]', "application/json", 400, "JSON object"),
    (b'{"tool": "t", "arguments": {}', "application/json", 400, "not valid JSON"),
    (b'{"tool": "t", "arguments": {}}', "text/plain", 415, "application/json"),
    (b'\xff\xfe', "application/json", 400, "UTF-8"),
    (b'{"tool": "t", "arguments": ' + b'{"a":' * 200 + b'1' + b'}' * 200 + b'}', "application/json", 400, "nested"),
    (b'{"tool": "t", "arguments": {}, "expires_in": 1e308}', "application/json", 400, "expires_in"),
    (b'{"tool": "t", "arguments": {}, "expires_in": -1}', "application/json", 400, "expires_in"),
])
def test_bad_bodies_are_refused_before_anything_is_written(world: World, raw: bytes, content_type: str, status: int,
                                                           words: str) -> None:
    before = footprint(world.store)
    got, answer = call(world, "POST", f"/agent/v1/runs/{world.run_id}/approvals", raw=raw, content_type=content_type,
                       token=world.alice)
    assert (got, words in answer.get("error", "")) == (status, True), answer
    assert footprint(world.store) == before


def test_an_oversize_body_is_413(world: World) -> None:
    before = footprint(world.store)
    big = json.dumps({"group_id": world.group_id, "content": "x" * (6 * 1024 * 1024)}).encode()
    status, _ = call(world, "POST", f"/agent/v1/agents/{world.agent_id}/context", raw=big, token=world.alice)
    assert status == 413 and footprint(world.store) == before


def test_an_agent_gates_inside_a_received_trace_but_cannot_rewrite_its_spans(world: World) -> None:
    from tests.store.server.conftest import document, span_json

    trace, root = "ab" * 16, "cd" * 8
    raw = json.dumps(document(span_json(trace, root, name="invoke_agent janitor"))).encode()
    status, _ = call(world, "POST", "/v1/traces", raw=raw)
    assert status == 200 and world.receiver is not None and world.receiver.wait_stored()
    run_id = f"otr_{trace}"
    otel_span = f"o{trace}{root}"
    before = footprint(world.store)
    status, answer = call(world, "POST", f"/agent/v1/spans/{otel_span}/finish", {"status": "error", "error": "x"},
                          token=world.mallory)
    assert status == 403 and "OpenTelemetry" in answer["error"]
    assert footprint(world.store) == before
    status, answer = call(world, "POST", f"/agent/v1/runs/{run_id}/approvals",
                          {"tool": "delete_files", "arguments": {"paths": ["a"]}, "span_id": otel_span},
                          token=world.mallory)
    assert status == 200, answer
    theirs = answer["approval_id"]
    assert call(world, "GET", f"/agent/v1/approvals/{theirs}", token=world.mallory)[0] == 200
    assert call(world, "GET", f"/agent/v1/approvals/{theirs}", token=world.alice)[0] == 403
