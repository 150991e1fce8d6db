"""`agentdesk asks` and `agentdesk answer`: listing, answering by text or option, and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.asks import commands as asks
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import prebuilt


@pytest.fixture
def asked(tmp_path: Path) -> tuple[str, str, str]:
    path = prebuilt(tmp_path / "s.sqlite")
    store = open_store(str(path), create=True)
    rt = AgentRuntime(store)
    agent = rt.create_agent(rt.create_session(rt.create_task(rt.create_project("P"), "t"), "s"), "planner", "m")
    run = rt.start_run(agent, "r")
    ask_id = asks.create(store, run, "Which branch\u202e? evil", ["main", "dev"], expires_in=600)
    gone = asks.create(store, run, "Too late?", expires_in=1e-6)
    store.close()
    return str(path), ask_id, gone


def test_asks_lists_with_hidden_characters_marked(asked: tuple[str, str, str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path, ask_id, gone = asked
    assert main(["--store", path, "asks"]) == 0
    shown = capsys.readouterr().out
    assert ask_id in shown and "⚠ Which branch⟨U+202E⟩? evil" in shown and "1. main | 2. dev" in shown
    assert gone not in shown
    assert main(["--store", path, "asks", "--status", "expired", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(a["id"], a["status"]) for a in listed] == [(gone, "expired")]


def test_answer_by_option_then_refusals_with_exit_codes(asked: tuple[str, str, str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path, ask_id, gone = asked
    assert main(["--store", path, "answer", ask_id, "--option", "3", "--as", "alice"]) == 2
    assert "has 2 options" in capsys.readouterr().err
    assert main(["--store", path, "answer", ask_id, "--as", "alice"]) == 2
    assert main(["--store", path, "answer", ask_id, "--option", "2", "--as", "alice"]) == 0
    assert "Answered" in capsys.readouterr().out
    assert main(["--store", path, "answer", ask_id, "other", "--actor", "bob"]) == 3
    assert "already answered by alice at" in capsys.readouterr().err
    assert main(["--store", path, "answer", gone, "yes", "--as", "bob"]) == 3
    assert "expired at" in capsys.readouterr().err
    assert main(["--store", path, "answer", "ask_nope", "yes", "--as", "bob"]) == 4
    assert main(["--store", path, "asks", "--status", "answered", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(a["answer"], a["answered_by"]) for a in listed] == [("dev", "alice")]
