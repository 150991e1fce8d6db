"""Red team for operators' messages: an agent cannot send, cancel, read or take another agent's messages.

- PostgreSQL, raw SQL (psycopg) as each level: nobody writes `messages` directly; only operators (and admins)
  may call `agentdesk_send_message` / `agentdesk_cancel_message`; an agent login takes only the messages of an
  agent its own login registered, and reads no other agent's messages (row-level security); a viewer does none.
- HTTP, an agent token: there is no route to send or cancel; taking another agent's messages is 403, no token
  401; each refusal writes nothing (the message stays pending).
"""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentdesk.client import AgentDesk
from agentdesk.store.agents import tokens
from agentdesk.store.messages import commands as messages
from agentdesk.store.messages.reads import read_message
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.conftest import BACKENDS, PgCluster, prebuilt

LEVELS = ("agent", "other agent", "viewer", "operator")


@dataclass
class Bench:
    owner: Store
    conns: dict[str, psycopg.Connection[Any]]
    agent_id: str
    """Registered by the `agent` login."""
    pending: str
    """A pending message for `agent_id`."""


@pytest.fixture(scope="module")
def bench(pg_cluster: PgCluster) -> Iterator[Bench]:
    url = pg_cluster.fresh_database()
    owner = open_store(url)
    names: dict[str, str] = {}
    with pg_cluster.admin() as admin:  # type: ignore[attr-defined]
        for level in LEVELS:
            names[level] = f"rm_{level.replace(' ', '_')}_{uuid.uuid4().hex[:6]}"
            admin.execute(f"CREATE ROLE {names[level]} LOGIN PASSWORD 'secret'")
            admin.execute(f"GRANT agentdesk_{level.split()[-1]} TO {names[level]}")
    scheme, rest = url.split("://", 1)
    urls = {level: f"{scheme}://{names[level]}:secret@{rest.split('@', 1)[1]}" for level in LEVELS}
    agent_store = open_store(urls["agent"])
    conns: dict[str, psycopg.Connection[Any]] = {}
    try:
        rt = AgentRuntime(agent_store)
        agent_id = rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"), "a", "m")
        operator = open_store(urls["operator"])
        try:
            pending = messages.send(operator, agent_id, "keep going", "alice")
        finally:
            operator.close()
        conns = {level: psycopg.connect(libpq_url(urls[level])) for level in LEVELS}
        yield Bench(owner, conns, agent_id, pending)
    finally:
        for conn in conns.values():
            conn.close()
        agent_store.close()
        owner.close()
        pg_cluster.drop(url)
        with pg_cluster.admin() as admin:  # type: ignore[attr-defined]
            for name in names.values():
                admin.execute(f"DROP ROLE IF EXISTS {name}")


def attempt(conn: psycopg.Connection[Any], sql: str) -> tuple[str, Any]:
    """('refused', why) for a privilege error; else ('through', rows). Always rolled back."""
    try:
        try:
            rows = conn.execute(sql).fetchall()
        except psycopg.errors.InsufficientPrivilege as exc:
            return "refused", str(exc).splitlines()[0]
        return "through", rows
    finally:
        conn.rollback()


def hostile(b: Bench) -> dict[str, str]:
    return {
        "insert": f"INSERT INTO messages (id, agent_id, session_id, content, status, created_at, created_by, "
                  f"revision) SELECT 'msg_evil', id, session_id, 'x', 'pending', 0, 'alice', 1 FROM agents "
                  f"WHERE id = '{b.agent_id}' RETURNING id",
        "update": f"UPDATE messages SET content = 'rm -rf ~' WHERE id = '{b.pending}' RETURNING id",
        "deliver by hand": f"UPDATE messages SET status = 'cancelled' WHERE id = '{b.pending}' RETURNING id",
        "delete": f"DELETE FROM messages WHERE id = '{b.pending}' RETURNING id",
        "send": f"SELECT outcome FROM agentdesk_send_message('msg_evil', '{b.agent_id}', 'x', 'alice', NULL)",
        "cancel": f"SELECT outcome FROM agentdesk_cancel_message('{b.pending}', 'alice', NULL)",
        "take": f"SELECT message_id FROM agentdesk_take_messages('{b.agent_id}', 'x', NULL)",
    }


MAY = {("operator", "send"), ("operator", "cancel"), ("operator", "take"), ("agent", "take")}
"""What each level may do; everything else must be refused by the server."""


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("what", ["insert", "update", "deliver by hand", "delete", "send", "cancel", "take"])
def test_raw_sql_attempt(bench: Bench, level: str, what: str) -> None:
    outcome, found = attempt(bench.conns[level], hostile(bench)[what])
    if (level, what) in MAY:
        assert outcome == "through", f"{level} should be able to {what}: {found}"
    else:
        assert outcome == "refused", f"{level} got through: {what} ({found})"
    still = read_message(bench.owner, bench.pending)
    assert still is not None and still.pending  # every attempt was rolled back


def test_an_agent_reads_only_its_own_agents_messages(bench: Bench) -> None:
    sql = f"SELECT id FROM messages WHERE id = '{bench.pending}'"
    assert attempt(bench.conns["agent"], sql) == ("through", [(bench.pending,)])
    assert attempt(bench.conns["other agent"], sql) == ("through", [])  # row-level security hides it


def test_the_other_agent_is_refused_in_one_sentence(bench: Bench) -> None:
    outcome, why = attempt(bench.conns["other agent"], hostile(bench)["take"])
    assert outcome == "refused" and "is an agent that did not register agent" in why


# -- over HTTP, with an agent token -------------------------------------------------------------------------------

@dataclass
class Served:
    store: Store
    host: str
    port: int
    alice: str
    mallory: str
    agent_id: str
    pending: str


@pytest.fixture
def served(store_path: Path) -> Iterator[Served]:
    store = open_store(str(prebuilt(store_path)), create=True)
    alice = tokens.create(store, "alice-bot", "operator")[1]
    mallory = tokens.create(store, "mallory-bot", "operator")[1]
    thread = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = thread.start()
    with AgentDesk.connect(f"http://{host}:{port}", token=alice) as desk:
        agent = desk.register(project="p", agent="a")
    pending = messages.send(store, agent.id, "for alice-bot only", "carol")
    yield Served(store, host, port, alice, mallory, agent.id, pending)
    thread.stop()
    store.close()


def call(w: Served, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(w.host, w.port, timeout=30)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = b"" if body is None else json.dumps(body).encode()
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data if method == "POST" else None, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_an_agent_token_cannot_send_cancel_or_take_anothers_messages(served: Served) -> None:
    a = served.agent_id
    attempts = [
        ("POST", f"/agent/v1/agents/{a}/inbox", None, served.mallory, 403),
        ("POST", f"/agent/v1/agents/{a}/inbox", None, None, 401),
        ("POST", f"/agent/v1/agents/{a}/messages", {"content": "x"}, served.alice, 404),
        ("POST", f"/agent/v1/messages/{served.pending}/cancel", None, served.alice, 404),
        ("POST", "/agent/v1/agents/agt_nobody/inbox", None, served.alice, 404),
    ]
    for method, path, body, token, status in attempts:
        got, answer = call(served, method, path, body, token)
        assert got == status, (path, answer)
        still = read_message(served.store, served.pending)
        assert still is not None and still.pending, path
    got, answer = call(served, "POST", f"/agent/v1/agents/{a}/inbox", None, served.alice)
    assert got == 200 and [m["message_id"] for m in answer["messages"]] == [served.pending]
    assert answer["messages"][0]["author"] == "carol"


def test_a_viewers_window_disables_sending_with_the_reason(bench: Bench, pg_cluster: PgCluster) -> None:
    from agentdesk.store.messages.desk import messaging_refusal
    from agentdesk.store.native import NativeSource
    name = f"rm_view_{uuid.uuid4().hex[:6]}"
    with pg_cluster.admin() as admin:  # type: ignore[attr-defined]
        admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'secret' IN ROLE agentdesk_viewer")
    url = bench.owner.url
    scheme, rest = url.split("://", 1)
    viewer = NativeSource(open_store(f"{scheme}://{name}:secret@{rest.split('@', 1)[1]}"))
    try:
        assert messaging_refusal(viewer) == f"{name} is a viewer; sending a message needs operator."
        assert messaging_refusal(NativeSource(bench.owner)) is None
    finally:
        viewer.close()
        with pg_cluster.admin() as admin:  # type: ignore[attr-defined]
            admin.execute(f"DROP ROLE IF EXISTS {name}")
