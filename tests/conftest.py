"""Store fixtures: a fresh store file per test, the runtime API, and a full-content dump.

Qt-free on purpose: the store's tests must run where no display or Qt exists
(the GUI's fixtures live in tests/gui/conftest.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentdesk.store.database import Store, open_store
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime


@pytest.fixture(autouse=True)
def audit_config_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Audit keys and anchors (store/keys.py) go to a folder of each test's own, never the user's."""
    folder = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "agentdesk.sqlite"


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    opened = open_store(str(store_path))
    yield opened
    opened.close()


@pytest.fixture
def source(store: Store) -> NativeSource:
    return NativeSource(store)


@pytest.fixture
def rt(store: Store) -> AgentRuntime:
    return AgentRuntime(store)


def dump(path: Path) -> list[str]:
    """Every row of every table, as SQL: two equal dumps mean two equal databases."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


@dataclass(frozen=True)
class World:
    project: str
    task: str
    session: str
    agent: str
    sub_agent: str
    run: str
    groups: tuple[str, ...]
    items: tuple[str, ...]
    approval: str


@pytest.fixture
def world(rt: AgentRuntime) -> World:
    """Project → task → session → agent (and a sub-agent) → run; three context groups; one approval."""
    pid = rt.create_project("Payments")
    tid = rt.create_task(pid, "Fix the flaky test")
    sid = rt.create_session(tid, "Session 1")
    aid = rt.create_agent(sid, "planner", "model-a")
    sub = rt.create_agent(sid, "coder", "model-b", parent_agent_id=aid)
    rid = rt.start_run(aid, "Investigate")
    groups, items = [], []
    for kind, contents in (("turn", ["system prompt", "user asks"]),
                           ("tool", ['{"tool": "read"}', "file contents " * 20]),
                           ("turn", ["assistant answers"])):
        gid = rt.new_turn_group(aid, kind)
        groups.append(gid)
        items += [rt.append_context(aid, gid, "message", "user", text) for text in contents]
    approval = rt.request_approval(rid, "shell", {"cmd": "ls"})
    return World(pid, tid, sid, aid, sub, rid, tuple(groups), tuple(items), approval)
