"""lensagent questions: calls waiting for user input are questions in agentdesk's queue, answered as
`completeCall` would (TERMINAL `success` plus a result), only with --allow-writes, exactly once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.asks.commands import AlreadyAnswered
from agentdesk.store.errors import ReadOnlyStore
from agentdesk.store.sources import open_source
from agentdesk.store.sources.lensagent.source import LensagentSource
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture

QUESTION = "Should the README mention the old retry timer?"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    found = tmp_path / "lensagent.sqlite"
    build_lensagent_fixture(found, "0.1.2")
    return found


def test_a_user_input_wait_is_a_pending_question(path: Path) -> None:
    source = open_source(str(path))
    try:
        assert isinstance(source, LensagentSource)
        [asked] = source.asks()
        assert (asked.id, asked.question, asked.options, asked.status, asked.source) == (
            "cal_dq", QUESTION, ("Yes, as deprecated", "No, drop it"), "pending", "lensagent")
        assert (asked.agent_name, asked.run_id, asked.expires_at) == ("docs", "run_d", None)
        assert all(a.id != "cal_dq" for a in source.approvals("pending"))  # a question, not an approval
        with pytest.raises(ReadOnlyStore, match="--allow-writes"):
            source.answer_ask("cal_dq", "No, drop it", "alice")
    finally:
        source.close()


def test_answered_with_allow_writes_as_completeCall_and_only_once(path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(path), "asks", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(a["id"], a["source"]) for a in listed] == [("cal_dq", "lensagent")]
    assert main(["--store", str(path), "answer", "cal_dq", "--option", "2", "--as", "alice"]) == 5  # as approve
    assert "--allow-writes" in capsys.readouterr().err
    assert main(["--store", str(path), "--allow-writes", "answer", "cal_dq", "--option", "2", "--as", "alice"]) == 0
    with sqlite3.connect(path) as conn:
        state, outcome, wait, revision = conn.execute(
            "SELECT state, outcome, wait_reason, revision FROM calls WHERE id = 'cal_dq'").fetchone()
        content, result_outcome = conn.execute(
            "SELECT content_json, outcome FROM results WHERE call_id = 'cal_dq'").fetchone()
    assert (state, outcome, wait, revision, result_outcome) == ("TERMINAL", "success", None, 3, "success")
    assert json.loads(content) == {"answer": "No, drop it", "agentdesk_answered_by": "alice"}
    source = open_source(str(path), allow_writes=True)
    try:
        done = source.ask("cal_dq")  # type: ignore[attr-defined]
        assert (done.status, done.answer, done.answered_by) == ("answered", "No, drop it", "alice")
        with pytest.raises(AlreadyAnswered, match="already answered by alice"):
            source.answer_ask("cal_dq", "Yes", "bob")  # type: ignore[attr-defined]
    finally:
        source.close()
