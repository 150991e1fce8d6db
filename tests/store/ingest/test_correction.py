"""The late-parent correction rebuilds an agent's context only when a call that leaves it had brought items.

The run's agent holds a trace's orphaned calls until their agent span arrives; with a growing or repeated
history most of them brought nothing new. Rebuilding that agent each time one moves away was most of a
children-first trace's write time (the raw clients' bench: 23 rebuilds of the same agent); the stores must
still equal what `import` writes.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agentdesk.store.ingest import agent_context
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.ingest import ingest_json
from agentdesk.store.ingest.prepare import AGENT_KEY
from agentdesk.store.ingest.spans import span_row_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import open_store
from agentdesk.store.persistence.payloads import unpack
from tests.conftest import prebuilt
from tests.store.ingest.test_one_decoder import assert_same_stores, import_all, ordered_rows, spans_document
from tests.store.ingest.test_retype_backends import TRACE, span

AGENT = {"gen_ai.operation.name": "invoke_agent"}
QUESTION = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "disk usage on db-3?"}]}])


def chat(n: int, parent: int, messages: str = QUESTION) -> dict[str, Any]:
    return span(n, parent, "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                    "gen_ai.input.messages": messages})


BOSS = span(1, None, "invoke_agent boss", {**AGENT, "gen_ai.agent.name": "boss"})
WORKER = span(5, 1, "invoke_agent worker", {**AGENT, "gen_ai.agent.name": "worker"})


@pytest.mark.parametrize("second", [QUESTION, json.dumps([{"role": "user", "parts": [
    {"type": "text", "content": "something new"}]}])], ids=["brought-nothing", "brought-an-item"])
def test_an_agent_is_rebuilt_only_when_a_call_leaving_it_brought_items(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second: str) -> None:
    rebuilt: list[set[str]] = []
    real = agent_context.rebuild

    def spy(conn: Any, session_id: str, agents: Any, known: Any = None) -> None:
        rebuilt.append(set(agents))
        real(conn, session_id, agents, known)

    monkeypatch.setattr(agent_context, "rebuild", spy)
    spans = [BOSS, chat(3, 1), chat(4, 5, second), WORKER]
    store = open_store(str(prebuilt(tmp_path / "received.sqlite")))
    try:
        ingest_json(store, spans_document([BOSS, spans[1]]))
        ingest_json(store, spans_document([spans[2]]))  # its agent span is not there: filed under the run's agent, boss
        with store.reading() as s:
            boss = s.execute(select(sc.AgentRow.id)).scalar_one()  # the one agent so far
        ingest_json(store, spans_document([WORKER]))  # the call moves to the worker
    finally:
        store.close()
    moved_away_brought_items = second != QUESTION
    assert any(boss in agents for agents in rebuilt) == moved_away_brought_items
    import_all(tmp_path / "imported.sqlite", tmp_path, spans, [])
    assert_same_stores(ordered_rows(tmp_path / "received.sqlite"), ordered_rows(tmp_path / "imported.sqlite"))


def test_a_call_stored_deflated_moves_to_its_agent_when_a_later_import_brings_the_agent(tmp_path: Path) -> None:
    """A long history is stored deflated by the import's helper (two streams); the late-parent correction's
    compare-and-set reads it as text, so the call still moves to the agent span that arrives after it."""
    history = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"line {n} of the log"}]}
                          for n in range(80)])
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps(spans_document([BOSS, chat(3, 1), chat(4, 5, history)])))
    second.write_text(json.dumps(spans_document([WORKER])))
    path = prebuilt(tmp_path / "store.sqlite")
    store = open_store(str(path))
    try:
        for file in (first, second):
            assert import_files(store, [file]).error is None
    finally:
        store.close()
    conn = sqlite3.connect(path)
    try:
        agents = dict(conn.execute("SELECT name, id FROM agents"))
        call = span_row_id(TRACE, f"{4:016x}")
        (raw,) = conn.execute("SELECT attributes FROM spans WHERE id = ?", (call,)).fetchone()
    finally:
        conn.close()
    assert isinstance(raw, bytes)  # stored deflated: the case the compare-and-set must read as text
    assert json.loads(unpack(raw))[AGENT_KEY] == agents["worker"] != agents["boss"]
