"""Stopping a lensagent run: one guarded transaction doing what lensagent's interruptCall does, only with
--allow-writes; pause and resume are refused (lensagent has no paused state); a terminal run is refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.control.commands import RunFinished
from agentdesk.store.errors import ReadOnlyStore, Unsupported
from agentdesk.store.persistence.bus import Change
from agentdesk.store.readmodel import ControlState
from agentdesk.store.source import Capability, require_run_controller, run_action_why_not
from agentdesk.store.sources import open_source
from agentdesk.store.sources.lensagent.source import LensagentSource
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture

RUNNING_CALL = (
    "INSERT INTO calls (id, project_id, workspace_id, agent_id, step_id, attempt_id, partition_id, parent_call_id, "
    "source, capability_id, provider_call_id, call_ordinal, input_json, continuation_json, effect, policy, state, "
    "wait_reason, outcome, outcome_unknown, auto_review_passed, auto_review_json, revision, created_at, updated_at) "
    "VALUES ('cal_run', 'prj_demo', 'wsp_main', 'agt_main', 'stp_1', 'att_1', 'par_1', NULL, 'llm', 'read_file', "
    "NULL, 1, '{\"path\":\"a.ts\"}', NULL, 'read_only', 'auto_approve', 'RUNNING', NULL, NULL, 0, NULL, NULL, 2, "
    "'2026-11-30T09:03:21.000Z', '2026-11-30T09:03:22.000Z')")
SUB_CALL = RUNNING_CALL.replace("'cal_run'", "'cal_child'").replace("'stp_1', 'att_1', 'par_1', NULL", "NULL, NULL, "
                                "NULL, 'cal_run'").replace("'RUNNING'", "'QUEUED'").replace("NULL, 1, ", "NULL, NULL, ")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    found = tmp_path / "lensagent.sqlite"
    build_lensagent_fixture(found, "0.1.2")
    with sqlite3.connect(found) as conn:  # run_1 holds a call in policy review; add one that is running
        conn.execute(RUNNING_CALL)
        conn.execute(SUB_CALL)  # a sub-call of the running one, with no step of its own
    return found


def _revision(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT state_revision FROM instance").fetchone()[0])


def test_stopping_a_run_interrupts_its_calls_and_frees_its_agent(path: Path) -> None:
    before = _revision(path)
    source = open_source(str(path), allow_writes=True)
    seen: list[Change] = []
    source.bus.subscribe(seen.extend)
    try:
        assert isinstance(source, LensagentSource)
        assert Capability.CONTROL_RUN in source.capabilities
        assert run_action_why_not(source, "pause") == "lensagent has no paused state: a run can only be stopped."
        assert run_action_why_not(source, "stop") == ""
        done = require_run_controller(source).stop_run("run_1", "alice", "wrong branch")
        assert (done.state, done.set_by, done.reason) == (ControlState.STOPPED, "alice", "wrong branch")
        assert source.run_control("run_1").describe().startswith("stopped by alice")
        assert source.run("run_1").status == "cancelled"
        [listed] = [r for r in source.runs("agt_main").items if r.id == "run_1"]
        assert (listed.control, listed.control_note.split(" at ")[0]) == ("stopped", "stopped by alice")
        assert source.approval("cal_1").status != "pending"
        with pytest.raises(RunFinished, match="already finished \\(cancelled\\); there is nothing to stop"):
            source.stop_run("run_1", "bob")
        with pytest.raises(Unsupported, match="no paused state"):
            source.pause_run("run_d", "bob")
    finally:
        source.close()
    assert {(c.entity.value, c.id) for c in seen} >= {("run", "run_1"), ("agent", "agt_main"),
                                                      ("span", "call:cal_run"), ("approval", "cal_1")}
    with sqlite3.connect(path) as conn:
        calls = conn.execute("SELECT id, state, wait_reason, outcome, outcome_unknown FROM calls "
                             "WHERE id IN ('cal_1', 'cal_child', 'cal_run') ORDER BY id").fetchall()
        results = dict(conn.execute("SELECT call_id, outcome || '/' || error_code || '/' || error_message FROM "
                                    "results WHERE call_id IN ('cal_1', 'cal_run')").fetchall())
        run = conn.execute("SELECT state, outcome, error_code, revision FROM runs WHERE id = 'run_1'").fetchone()
        step = conn.execute("SELECT state, outcome FROM steps WHERE id = 'stp_1'").fetchone()
        agent = conn.execute("SELECT state, revision FROM agents WHERE id = 'agt_main'").fetchone()
        record = conn.execute("SELECT response_json FROM ingress_requests WHERE client_id = 'agentdesk'").fetchone()
        # the unique live-run index still holds, and the agent may start a new run
        conn.execute("INSERT INTO runs (id, agent_id, goal_message_ids_json, initial_step_pending, state, outcome, "
                     "error_code, revision, created_at, updated_at) VALUES ('run_next', 'agt_main', '[]', 1, "
                     "'READY', NULL, NULL, 0, '2026-12-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z')")
        live = conn.execute("SELECT agent_id, count(*) FROM runs WHERE state != 'TERMINAL' GROUP BY 1 "
                            "HAVING count(*) > 1").fetchall()
    assert calls == [("cal_1", "TERMINAL", None, "interrupted", 0), ("cal_child", "TERMINAL", None, "interrupted", 0),
                     ("cal_run", "TERMINAL", None, "interrupted", 1)]
    assert results == {c: "interrupted/operator_stopped/Stopped by operator alice: wrong branch"
                       for c in ("cal_1", "cal_run")}
    assert run == ("TERMINAL", "cancelled", "operator_stopped", 7)
    assert step == ("TERMINAL", "interrupted")
    assert agent == ("IDLE", 10)
    assert json.loads(record[0])["stopped_by"] == "alice"
    assert live == []
    assert _revision(path) == before + 1


def test_refused_without_allow_writes_and_nothing_written(path: Path) -> None:
    before = _revision(path)
    source = open_source(str(path))
    try:
        assert isinstance(source, LensagentSource)
        with pytest.raises(ReadOnlyStore, match="--allow-writes"):
            source.stop_run("run_1", "alice")
    finally:
        source.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT state FROM runs WHERE id = 'run_1'").fetchone() == ("WAITING",)
    assert _revision(path) == before


def test_the_cli_stops_a_lensagent_run(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(path), "stop", "run_1", "--actor", "alice"]) == 2  # read-only: one sentence
    assert "--allow-writes" in capsys.readouterr().err
    assert main(["--store", str(path), "--allow-writes", "pause", "run_1", "--actor", "alice"]) == 2
    assert "no paused state" in capsys.readouterr().err
    assert main(["--store", str(path), "--allow-writes", "stop", "run_1", "--actor", "alice",
                 "--reason", "wrong branch"]) == 0
    assert "Stopped run run_1 as alice (wrong branch)" in capsys.readouterr().out
    assert main(["--store", str(path), "--allow-writes", "stop", "run_1", "--actor", "alice"]) == 3
    assert "already finished" in capsys.readouterr().err
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT state, outcome FROM runs WHERE id = 'run_1'").fetchone() == (
            "TERMINAL", "cancelled")


@pytest.mark.parametrize("version", ["0.1.0", "0.1.2", "0.1.2-upgraded"])
def test_every_open_run_of_every_layout_stops_cleanly(tmp_path: Path, version: str) -> None:
    """Whatever the layout (0.1.0 has no results.capture), a stopped run leaves nothing open under it; a question
    it held leaves the queue; a READY run of an IDLE agent ends without touching the agent."""
    path = tmp_path / "lensagent.sqlite"
    build_lensagent_fixture(path, version)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO runs (id, agent_id, goal_message_ids_json, initial_step_pending, state, outcome, "
                     "error_code, revision, created_at, updated_at) VALUES ('run_ready', 'agt_sub', '[]', 1, "
                     "'READY', NULL, NULL, 0, '2026-12-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z')")
        idle = conn.execute("SELECT state, revision FROM agents WHERE id = 'agt_sub'").fetchone()
        open_runs = [r[0] for r in conn.execute("SELECT id FROM runs WHERE state != 'TERMINAL' ORDER BY id")]
    source = open_source(str(path), allow_writes=True)
    try:
        assert isinstance(source, LensagentSource)
        for run_id in open_runs:
            assert source.stop_run(run_id, "alice").state is ControlState.STOPPED
            assert source.run_control(run_id).set_by == "alice"
        assert source.asks() == []
    finally:
        source.close()
    with sqlite3.connect(path) as conn:
        left = conn.execute("SELECT count(*) FROM runs r JOIN steps s ON s.run_id = r.id LEFT JOIN calls c ON "
                            "c.step_id = s.id WHERE s.state != 'TERMINAL' OR c.state != 'TERMINAL' OR "
                            "r.state != 'TERMINAL'").fetchone()[0]
        agents = conn.execute("SELECT id, state FROM agents WHERE id IN (SELECT agent_id FROM runs) "
                              "ORDER BY id").fetchall()
        orphan = conn.execute("SELECT count(*) FROM calls c LEFT JOIN results r ON r.call_id = c.id "
                              "WHERE c.state = 'TERMINAL' AND c.outcome = 'interrupted' AND r.id IS NULL").fetchone()
        assert conn.execute("SELECT state, revision FROM agents WHERE id = 'agt_sub'").fetchone() == idle
    assert left == 0 and orphan == (0,)
    assert all(state in ("IDLE", "STOPPED") for _, state in agents)
