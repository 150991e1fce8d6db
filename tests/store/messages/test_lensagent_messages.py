"""Messages on a lensagent database: its own pending row listed; sending writes `messages` + `pending_messages`
the way lensagent queues input (next ordinal, revision 0, state revision bumped), only with --allow-writes;
cancelling removes only what agentdesk queued; a stopped agent is refused; other runtimes say why not."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.errors import Conflict, NotFound, ReadOnlyStore, Unsupported
from agentdesk.store.messages.desk import message_desk, messaging_refusal
from agentdesk.store.persistence.bus import Change
from agentdesk.store.sources import open_source
from agentdesk.store.sources.lensagent import LensagentSource
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lens") / "lensagent.sqlite"
    build_lensagent_fixture(path, "0.1.2", volume=False)
    return path


@pytest.fixture
def copy(built: Path, tmp_path: Path) -> Path:
    target = tmp_path / "lensagent.sqlite"
    target.write_bytes(built.read_bytes())
    return target


@pytest.fixture
def writer(copy: Path) -> Iterator[LensagentSource]:
    source = open_source(str(copy), allow_writes=True)
    assert isinstance(source, LensagentSource)
    yield source
    source.close()


def raw(path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_its_own_pending_message_is_listed_read_only(copy: Path) -> None:
    source = open_source(str(copy))
    try:
        desk = message_desk(source)
        assert desk is not None
        [pending] = desk.pending("agt_main")
        assert (pending.id, pending.content, pending.status, pending.created_by) == (
            "pnd_1", "Also keep the fix minimal, please.", "pending", "a lensagent user")
        refusal = messaging_refusal(source)
        assert refusal is not None and "--allow-writes" in refusal
        with pytest.raises(ReadOnlyStore):
            desk.send("agt_main", "hello", "alice")
    finally:
        source.close()


def test_sending_writes_lensagents_two_rows(writer: LensagentSource, copy: Path) -> None:
    heard: list[Change] = []
    writer.bus.subscribe(heard.extend)
    before = raw(copy, "SELECT state_revision FROM instance")[0][0]
    desk = message_desk(writer)
    assert desk is not None and messaging_refusal(writer) is None
    pending_id = desk.send("agt_main", "Run the flaky test 50 times first.", "alice")
    [(ordinal, revision, message_id, content)] = raw(
        copy, "SELECT ordinal, revision, message_id, content FROM pending_messages WHERE id = ?", pending_id)
    assert (ordinal, revision, content) == (1, 0, "Run the flaky test 50 times first.")  # after pnd_1's 0
    [(role, meta)] = raw(copy, "SELECT role, metadata_json FROM messages WHERE id = ?", message_id)
    assert role == "user" and json.loads(str(meta)) == {"source": "agentdesk", "actor": "alice"}
    assert raw(copy, "SELECT state_revision FROM instance")[0][0] == before + 1
    assert any(c.entity == "message" and c.id == pending_id and c.parent("agent") == "agt_main" for c in heard)
    assert [(m.id, m.created_by) for m in desk.pending("agt_main")] == [("pnd_1", "a lensagent user"),
                                                                         (pending_id, "alice")]
    assert raw(copy, "PRAGMA foreign_key_check") == []

    desk.cancel(pending_id, "bob")
    assert raw(copy, "SELECT count(*) FROM pending_messages WHERE id = ?", pending_id) == [(0,)]
    assert raw(copy, "SELECT count(*) FROM messages WHERE id = ?", message_id) == [(0,)]
    with pytest.raises(Conflict, match="no longer pending"):
        desk.cancel(pending_id, "bob")
    with pytest.raises(Unsupported, match="queued this message itself"):
        desk.cancel("pnd_1", "bob")


def test_a_taken_message_shows_its_author_in_the_context(writer: LensagentSource, copy: Path) -> None:
    desk = message_desk(writer)
    assert desk is not None
    pending_id = desk.send("agt_main", "Check the lock order.", "alice")
    [(message_id,)] = raw(copy, "SELECT message_id FROM pending_messages WHERE id = ?", pending_id)
    conn = sqlite3.connect(copy)  # what lensagent does at its next step: the pending row becomes context
    try:
        conn.execute("DELETE FROM pending_messages WHERE id = ?", (pending_id,))
        conn.execute("INSERT INTO context_items (id, agent_id, turn_group_id, turn_group_ordinal, kind, source_id, "
                     "role, content, ordinal, visible, locked, revision, created_at, updated_at) VALUES "
                     "('ci_msg', 'agt_main', 'tg_2', 99, 'message', ?, 'user', 'Check the lock order.', 99, 1, 0, 0, "
                     "'2026-11-30T09:05:00.000Z', '2026-11-30T09:05:00.000Z')", (message_id,))
        conn.commit()
    finally:
        conn.close()
    assert desk.authors(["ci_msg", "ci_0"]) == {"ci_msg": "alice"}
    assert [m.id for m in desk.pending("agt_main")] == ["pnd_1"]


def test_refusals(writer: LensagentSource, copy: Path) -> None:
    desk = message_desk(writer)
    assert desk is not None
    with pytest.raises(NotFound):
        desk.send("agt_nobody", "hello", "alice")
    conn = sqlite3.connect(copy)
    try:
        conn.execute("UPDATE agents SET state = 'STOPPED' WHERE id = 'agt_sub'")
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(Conflict, match="has finished"):
        desk.send("agt_sub", "hello", "alice")


def test_the_cli_needs_allow_writes(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["message", "agt_main", "hello", "--store", str(copy)]) == 5
    assert "--allow-writes" in capsys.readouterr().err
    assert main(["message", "agt_main", "hello", "--store", str(copy), "--allow-writes", "--actor", "alice"]) == 0
    pending_id = capsys.readouterr().out.strip()
    assert main(["messages", "--agent", "agt_main", "--json", "--store", str(copy)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [m["id"] for m in listed] == ["pnd_1", pending_id]
    assert main(["messages", "--store", str(copy)]) == 2  # a foreign database is listed one agent at a time


def test_another_runtime_says_why_not() -> None:
    class Other:
        class descriptor:  # the shape of a SourceDescriptor
            kind = "stageflow"
    refusal = messaging_refusal(Other())
    assert refusal is not None and refusal.startswith("stageflow has no queue")
