"""`agentdesk message`, `message --cancel` and `messages`, on both backends: ids printed, one sentence, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.messages.reads import read_message
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import BACKENDS, World

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


def run(capsys: pytest.CaptureFixture[str], store_path: Path, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--store", str(store_path)])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_send_list_cancel(store: Store, store_path: Path, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, printed, _ = run(capsys, store_path, "message", world.agent, "Check the \u202e logs first", "--actor",
                           "alice")
    assert code == 0
    message_id = printed.strip()
    assert message_id.startswith("msg_")
    found = read_message(store, message_id)
    assert found is not None and found.created_by == "alice" and found.pending

    code, printed, _ = run(capsys, store_path, "messages", "--json")
    listed = json.loads(printed)
    assert code == 0 and [m["id"] for m in listed] == [message_id]
    assert "\u202e" not in printed and "U+202E" in listed[0]["content"]  # hidden characters made visible
    code, printed, _ = run(capsys, store_path, "messages", "--agent", world.sub_agent)
    assert (code, printed.strip()) == (0, "No pending messages.")
    code, printed, _ = run(capsys, store_path, "messages")
    assert code == 0 and message_id in printed and "alice" in printed

    code, printed, _ = run(capsys, store_path, "message", "--cancel", message_id, "--actor", "bob")
    assert code == 0 and "Cancelled" in printed
    code, _, err = run(capsys, store_path, "message", "--cancel", message_id, "--actor", "carol")
    assert code == 3 and err.count("\n") == 1 and "already cancelled by bob" in err


def test_bad_input_is_one_sentence_with_its_exit_code(store: Store, store_path: Path, rt: AgentRuntime,
                                                      world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, store_path, "message", "agt_nobody", "hello")
    assert code == 4 and "no agent" in err and err.count("\n") == 1
    code, _, err = run(capsys, store_path, "message", world.agent)
    assert code == 2 and "AGENT_ID TEXT" in err
    code, _, err = run(capsys, store_path, "message", world.agent, "x", "--cancel", "msg_x")
    assert code == 2 and "not both" in err
    code, _, err = run(capsys, store_path, "message", world.agent, "x" * 1_000_001)
    assert code == 2 and "1 MB" in err
    code, _, err = run(capsys, store_path, "message", "--cancel", "msg_nothing")
    assert code == 4
    rt.set_session_status(world.session, "failed")
    code, _, err = run(capsys, store_path, "message", world.agent, "too late")
    assert code == 3 and "has finished" in err and err.count("\n") == 1
