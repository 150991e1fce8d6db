"""Agents, the simulator and the change watcher ride out a PostgreSQL server that stops, restarts and comes back.

Each test stops or restarts a throwaway server of this module's own (never the session's: other tests
use that one), waits for the *state* that proves the outage was seen (the one stderr line, the
watcher reconnecting), brings the server back, and checks that nothing was lost, doubled or stuck.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from agentdesk.store.approvals import commands
from agentdesk.store.errors import ServerUnreachable
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.outage import RideOut, server_name
from agentdesk.store.runtime import AgentRuntime
from tests.postgres.own_server import OwnServer, own_server_fixture  # noqa: F401 - the fixture
from tests.waiting import eventually, wait_until

UNREACHABLE = "unreachable since"


@pytest.fixture
def store(own_server: OwnServer) -> Iterator[Store]:
    opened = open_store(own_server.url)
    yield opened
    opened.close()


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PYTHONUNBUFFERED": "1"}


def said(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(errors="replace")


AGENT = textwrap.dedent("""
    import json, sys
    from agentdesk.client import AgentDesk
    with AgentDesk.connect(sys.argv[1]) as desk:
        agent = desk.register(project="outage", agent="refunder", model="m")
        with agent.run("refund order 1042") as run:
            result = run.request_approval("issue_refund", {"order": 1042}, expires_in=None)
            print(json.dumps({"outcome": result.outcome.value, "arguments": result.arguments}), flush=True)
        agent.finish()
""")


def pending_ids(store: Store) -> list[str]:
    with store.reading() as s:
        return list(s.execute(select(sc.ApprovalRow.id).where(sc.ApprovalRow.status == "pending")).scalars())


def test_an_agent_waiting_for_a_decision_gets_it_after_the_server_stopped_and_came_back(
        own_server: OwnServer, store: Store, tmp_path: Path) -> None:
    err = tmp_path / "agent.err"
    with err.open("w") as err_file:
        agent = subprocess.Popen([sys.executable, "-c", AGENT, own_server.url], stdout=subprocess.PIPE,
                                 stderr=err_file, text=True, env=child_env())
    try:
        approval = eventually(lambda: pending_ids(store), what="the agent's request")[0]
        own_server.stop()
        try:
            wait_until(lambda: said(err, UNREACHABLE), what="the agent's one line about the lost server")
        finally:
            own_server.start()
        assert agent.poll() is None, err.read_text()  # still waiting, not crashed
        eventually(lambda: _decide(store, approval), what="the decision, once the server is back")
        out, _ = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 0, err.read_text()
    assert '"outcome": "approved"' in out
    lines = [line for line in err.read_text().splitlines() if line.strip()]
    assert sum(UNREACHABLE in line for line in lines) == 1 and "Traceback" not in err.read_text(), lines
    assert f"PostgreSQL at {server_name(own_server.url)} unreachable since" in lines[0]
    with store.reading() as s:  # nothing doubled, nothing left waiting
        run = s.execute(select(sc.RunRow).where(sc.RunRow.title == "refund order 1042")).scalar_one()
        assert run.status == "done"
        assert s.execute(select(func.count()).select_from(sc.ApprovalRow)
                         .where(sc.ApprovalRow.run_id == run.id)).scalar() == 1
        assert s.execute(select(func.count()).select_from(sc.SpanRow)
                         .where(sc.SpanRow.run_id == run.id, sc.SpanRow.kind == "gate")).scalar() == 1


def _decide(store: Store, approval_id: str) -> bool:
    try:
        commands.decide(store, approval_id, True, "operator")
    except ServerUnreachable:
        return False  # the pool's connections died with the server; the next one is fresh
    return True


def run_counts(store: Store) -> dict[str, int]:
    with store.reading() as s:
        rows = s.execute(select(sc.RunRow.status, func.count()).group_by(sc.RunRow.status)).all()
    return {str(status): int(count) for status, count in rows}


def test_a_simulator_keeps_going_across_a_stop_and_leaves_no_run_waiting(
        own_server: OwnServer, store: Store, tmp_path: Path) -> None:
    err = tmp_path / "sim.err"
    with err.open("w") as err_file:
        sim = subprocess.Popen(
            [sys.executable, "-m", "agentdesk.cli", "--store", own_server.url, "simulate", "--agents", "3",
             "--speed", "20", "--approval-timeout", "0.5", "--seed", "3"],
            stdout=subprocess.PIPE, stderr=err_file, text=True, env=child_env())
    try:
        wait_until(lambda: sum(run_counts(store).values()) >= 3, what="the simulator's first runs")
        own_server.stop()
        try:
            wait_until(lambda: said(err, UNREACHABLE), what="the simulator's one line about the lost server")
        finally:
            own_server.start()
        before = sum(eventually(lambda: _counts_or_none(store), what="the server back").values())
        wait_until(lambda: sum(run_counts(store).values()) >= before + 3, what="new runs after the outage")
        own_server.restart()  # and a restart: over in a moment, perhaps before anyone notices
        before = sum(eventually(lambda: _counts_or_none(store), what="the server back").values())
        wait_until(lambda: sum(run_counts(store).values()) >= before + 3, what="new runs after the restart")
        assert sim.poll() is None, err.read_text()
        sim.send_signal(signal.SIGTERM)
        out, _ = sim.communicate(timeout=30)
    finally:
        if sim.poll() is None:
            sim.kill()
    assert sim.returncode == 143, (out, err.read_text())  # stopped by us, not by store errors
    assert "Simulation over" in out and "Traceback" not in err.read_text()
    assert 1 <= sum(UNREACHABLE in line for line in err.read_text().splitlines()) <= 2  # the stop; the restart?
    counts = run_counts(store)
    assert counts.get("waiting", 0) == 0 and counts.get("running", 0) == 0, counts
    with store.reading() as s:
        assert s.execute(select(func.count()).select_from(sc.SessionRow)
                         .where(sc.SessionRow.status.in_(("waiting", "running")))).scalar() == 0
        assert s.execute(select(func.count()).select_from(sc.ApprovalRow)  # stopped waiting: taken back
                         .where(sc.ApprovalRow.status == "pending")).scalar() == 0


def _counts_or_none(store: Store) -> dict[str, int] | None:
    try:
        return run_counts(store)
    except ServerUnreachable:
        return None


def test_watch_says_the_server_is_gone_in_one_line_and_goes_on(own_server: OwnServer, store: Store,
                                                               tmp_path: Path) -> None:
    out, err = tmp_path / "watch.out", tmp_path / "watch.err"
    rt = AgentRuntime(store, ride_out=RideOut(30.0))
    with out.open("w") as out_file, err.open("w") as err_file:
        watch = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", own_server.url, "watch", "--since",
                                  "0"],
                                 stdout=out_file, stderr=err_file, text=True, env=child_env())
    try:
        before = rt.create_project("watched before")
        wait_until(lambda: said(out, before), what="the change before the outage")
        own_server.stop()
        try:
            wait_until(lambda: said(err, UNREACHABLE), what="watch's one line about the lost server")
        finally:
            own_server.start()
        after = rt.create_project("watched after")
        wait_until(lambda: said(out, after), what="the change after the outage")
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=30) == 130
    finally:
        if watch.poll() is None:
            watch.kill()
    text = err.read_text()
    assert "Traceback" not in text and sum(UNREACHABLE in line for line in text.splitlines()) == 1, text
    assert out.read_text().count(before) == 1 and out.read_text().count(after) == 1  # nothing twice


def test_an_agent_over_http_waits_through_the_receivers_lost_server(own_server: OwnServer, store: Store) -> None:
    from agentdesk.store.agents import tokens
    from tests.client.gate_processes import ReceiverProcess, requesting

    token = tokens.create(store, "http-refunder", "operator")[1]
    receiver = ReceiverProcess(own_server.url)
    agent = requesting(receiver.url, token, expires_in=None)
    try:
        approval = eventually(lambda: pending_ids(store), what="the agent's request")[0]
        own_server.stop()  # the receiver's connections end with it: its held wait must outlast that
        own_server.start()
        eventually(lambda: _decide(store, approval), what="the decision, once the server is back")
        result = agent.result(timeout_s=20)
    finally:
        agent.kill()
        receiver.proc.send_signal(signal.SIGTERM)
        _out, err = receiver.proc.communicate(timeout=30)
    assert result["outcome"] == "approved" and result["actor"] == "http-refunder"
    assert "Traceback" not in err, err
    with store.reading() as s:  # one request, however the outage fell between its writes and the answer
        run_id = s.execute(select(sc.ApprovalRow.run_id).where(sc.ApprovalRow.id == approval)).scalar_one()
        assert s.execute(select(func.count()).select_from(sc.ApprovalRow)
                         .where(sc.ApprovalRow.run_id == run_id)).scalar() == 1
