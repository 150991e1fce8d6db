"""The `agentdesk` command line on good input: what each command prints and writes.

Most cases call `main()` in-process (fast, and the same code path the console
script runs); the ones about processes (no Qt at import, cross-process watch,
Ctrl-C) use a real subprocess.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import cast

import pytest
from sqlalchemy import text

import agentdesk.cli.main as cli
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, head_revision, open_store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.sim.player import Simulator
from tests.conftest import World, dump
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
APPROVAL_KEYS = {"id", "status", "tool", "arguments", "agent_id", "agent", "project_id", "project", "run_id",
                 "span_id", "created_at", "expires_at", "decided_at", "decided_by", "reason",
                 "edited_arguments", "payload_hash", "edited_hash", "arguments_bytes", "arguments_hash", "hidden",
                 "decided_login", "requested_login"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def mixed(store: Store, world: World, rt: AgentRuntime) -> dict[str, str]:
    """Approvals in every state: pending, overdue (still 'pending' in the table), approved, denied."""
    overdue = rt.request_approval(world.run, "run_shell", {"command": "make deploy"}, timeout_s=0.01)
    approved = rt.request_approval(world.run, "write_file", {"path": "a.txt", "content": "é <b>x</b>"})
    denied = rt.request_approval(world.run, "send_email", {"to": ["cto@example.com"]})
    source = NativeSource(store)
    source.decide(approved, True, "alice")
    source.decide(denied, False, "bob", "not today")
    expires_at = source.approval(overdue).expires_at
    assert expires_at is not None
    wait_until(lambda: datetime.now(expires_at.tzinfo) > expires_at, what="the overdue deadline to pass")
    return {"pending": world.approval, "overdue": overdue, "approved": approved, "denied": denied}


def test_importing_the_cli_imports_no_qt() -> None:
    code = ("import sys, agentdesk.cli.main; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('PySide6', 'shiboken6', 'qasync', 'pyqtgraph') or m.startswith('agentdesk.model')]; print(bad)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def test_init_creates_then_reports_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep" / "agentdesk.sqlite"
    code, _, err = run(capsys, "--store", str(path), "init")  # a missing folder is not made silently
    assert code == 2 and not path.parent.exists() and "--parents" in err
    code, out, _ = run(capsys, "--store", str(path), "init", "--parents")
    assert code == 0 and path.exists() and f"schema {head_revision()}" in out
    code, out, _ = run(capsys, "info", "--store", str(path), "--json")  # global options after the command too
    facts = json.loads(out)
    assert code == 0 and facts["kind"] == "agentdesk" and facts["schema_version"] == head_revision()
    assert facts["counts"]["runs"] == 0 and facts["size_bytes"] == path.stat().st_size


def test_info_for_humans(store_path: Path, store: Store, world: World,
                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", str(store_path), "info")
    assert code == 0
    assert out.splitlines()[0] == f"agentdesk store at {store_path}"
    assert any(line.split() == ["agents", "2"] for line in out.splitlines())
    assert any(line.split() == ["pending", "approvals", "1"] for line in out.splitlines())


def test_approvals_json_has_stable_keys_and_shows_overdue_as_expired(
        store_path: Path, mixed: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    before = dump(store_path)
    code, out, _ = run(capsys, "--store", str(store_path), "approvals", "--status", "all", "--json")
    rows = {row["id"]: row for row in json.loads(out)}
    assert code == 0 and set(rows) == set(mixed.values())
    assert all(set(row) == APPROVAL_KEYS for row in rows.values())
    assert {name: rows[i]["status"] for name, i in mixed.items()} == {
        "pending": "pending", "overdue": "expired", "approved": "approved", "denied": "denied"}
    approved = rows[mixed["approved"]]
    assert approved["arguments"] == {"path": "a.txt", "content": "é <b>x</b>"}
    assert approved["decided_by"] == "alice" and approved["payload_hash"].startswith("sha256:")
    assert rows[mixed["denied"]]["reason"] == "not today"
    for stamp in ("created_at", "decided_at"):
        assert datetime.fromisoformat(approved[stamp]).utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert dump(store_path) == before, "listing wrote to the store (it must not even sweep expiries)"


def test_approvals_filters_by_the_status_an_operator_sees(
        store_path: Path, mixed: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    def ids(status: str) -> set[str]:
        code, out, _ = run(capsys, "--store", str(store_path), "approvals", "--status", status, "--json")
        assert code == 0
        return {row["id"] for row in json.loads(out)}

    assert ids("pending") == {mixed["pending"]}
    assert ids("expired") == {mixed["overdue"]}
    assert ids("approved") == {mixed["approved"]}
    assert ids("denied") == {mixed["denied"]}


def test_approvals_table_for_humans(store_path: Path, mixed: dict[str, str],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", str(store_path), "approvals", "--status", "all")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["ID", "TOOL", "AGENT", "PROJECT", "AGE", "EXPIRES", "IN",
                                              "STATUS",
                                              "DECIDED", "BY", "ARGS", "HASH"]
    by_id = {line.split()[0]: line for line in lines[1:]}
    assert "expired" in by_id[mixed["overdue"]] and "alice" in by_id[mixed["approved"]]
    assert "Payments" in by_id[mixed["pending"]] and "planner" in by_id[mixed["pending"]]
    code, out, _ = run(capsys, "--store", str(store_path), "approvals", "--status", "denied", "--limit", "5")
    assert len(out.splitlines()) == 2


def test_approve_with_edited_arguments_then_conflict(store_path: Path, world: World, store: Store,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--store", str(store_path), "approve", world.approval, "--actor", "alice",
                         "--reason", "looks fine", "--args", '{"cmd": "ls -la"}')
    assert (code, err) == (0, "")
    who = "alice" if store.login is None else f"{store.login.name} (typed: alice)"  # PostgreSQL: the signed login
    assert out.strip() == f"Approved {world.approval} (shell) as {who} with edited arguments: looks fine."
    decided = NativeSource(store).approval(world.approval)
    assert (decided.status, decided.decided_by, decided.edited_arguments) == ("approved", "alice",
                                                                             '{"cmd":"ls -la"}')
    assert decided.edited_hash and decided.edited_hash != decided.payload_hash
    code, out, err = run(capsys, "--store", str(store_path), "deny", world.approval, "--actor", "bob",
                         "--reason", "too late")
    assert code == 3 and out == ""
    assert err.startswith(f"agentdesk: Approval {world.approval} was already approved by alice at ")


def test_deciding_an_overdue_approval_is_a_conflict(store_path: Path, mixed: dict[str, str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--store", str(store_path), "approve", mixed["overdue"], "--actor", "alice")
    assert code == 3 and "expired" in err


def test_deny_needs_a_reason(store_path: Path, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--store", str(store_path), "deny", world.approval, "--actor", "bob")
    assert code == 2 and "--reason" in err


def test_watch_replays_changes_as_json_lines(store_path: Path, world: World,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", str(store_path), "watch", "--since", "0", "--count", "4", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [line["seq"] for line in lines] == [1, 2, 3, 4]
    assert [(line["entity"], line["op"]) for line in lines] == [("project", "insert"), ("task", "insert"),
                                                               ("session", "insert"), ("agent", "insert")]
    assert lines[0]["id"] == world.project and lines[1]["parents"] == {"project": world.project}
    assert {"seq", "entity", "op", "id", "parents", "revision", "at"} <= set(lines[0])
    code, out, _ = run(capsys, "--store", str(store_path), "watch", "--since", "0", "--count", "2")
    assert out.splitlines()[1].split()[:4] == ["#2", out.splitlines()[1].split()[1], "task", "insert"]


def test_watch_stops_at_its_timeout_when_nothing_happens(store_path: Path, world: World,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", str(store_path), "watch", "--timeout", "0.3")
    assert (code, out) == (0, "")  # it returned by itself; how soon is bench/'s business


def test_watch_follows_another_process_and_stops_on_ctrl_c(store_path: Path, store: Store,
                                                           world: World) -> None:
    """A second process prints our commits as they land; Ctrl-C ends it with exit 130 (README)."""
    with store.reading() as session:
        start = int(session.execute(text("SELECT max(seq) FROM change_log")).scalar_one())
    proc = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", str(store_path), "watch", "--json",
                             "--since", str(start)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        rt = AgentRuntime(store)
        pid = rt.create_project("Live")
        tid = rt.create_task(pid, "Follow me")
        assert proc.stdout is not None
        seen = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert [(c["entity"], c["id"]) for c in seen] == [("project", pid), ("task", tid)]
        assert seen[1]["parents"] == {"project": pid} and seen[1]["seq"] == start + 2
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    finally:
        proc.kill()
        proc.wait()


def test_verify_reports_an_intact_chain(store_path: Path, world: World,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", str(store_path), "verify")
    assert code == 0 and out.startswith("Audit chain intact:")
    code, out, _ = run(capsys, "--store", str(store_path), "verify", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["records"] >= 6


def test_simulate_writes_live_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sim.sqlite"
    code, out, err = run(capsys, "--store", str(path), "simulate", "--agents", "2", "--seed", "3",
                         "--duration", "1.2", "--speed", "60", "--approval-timeout", "0.3")
    assert (code, err) == (0, "")
    assert "run started" in out and "planner-" in out
    store = open_store(str(path), create=False, read_only=True)
    try:
        counts = store.info().counts
    finally:
        store.close()
    assert counts["runs"] >= 2 and counts["spans"] >= 4 and counts["agents"] >= 2


def open_spans(path: Path) -> int:
    if not path.exists():
        return 0
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM spans WHERE status = 'running'").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is still being created
        return 0
    finally:
        conn.close()


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_simulate_stops_cleanly_on_ctrl_c_or_sigterm(tmp_path: Path, stop_signal: int) -> None:
    """Interrupted mid-run, the agents still close what they had open: nothing is left looking live."""
    path = tmp_path / "sim.sqlite"
    command = [sys.executable, "-m", "agentdesk.cli", "--store", str(path), "simulate", "--agents", "1",
               "--speed", "2"]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        while "run started" not in proc.stdout.readline():
            pass
        wait_until(lambda: open_spans(path) > 0, what="a span the signal interrupts")
        proc.send_signal(stop_signal)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 128 + stop_signal and "Traceback" not in err, err  # 130 Ctrl-C, 143 SIGTERM
    assert "Simulation over:" in out
    conn = sqlite3.connect(path)
    try:
        live = conn.execute("SELECT (SELECT count(*) FROM spans WHERE status = 'running') + (SELECT count(*) "
                            "FROM runs WHERE status IN ('running', 'waiting'))").fetchone()[0]
        cancelled = conn.execute("SELECT count(*) FROM runs WHERE status = 'cancelled'").fetchone()[0]
    finally:
        conn.close()
    assert live == 0 and cancelled >= 1


def test_demo_starts_the_simulator_and_hands_it_to_the_window(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, object] = {}

    def fake_run_gui(location: str, **kwargs: object) -> int:
        simulator = kwargs["simulator"]
        seen.update(kwargs, location=location, running=getattr(simulator, "running", False),
                    existed=Path(location).exists())
        wait_until(lambda: len(getattr(simulator, "events", ())) > 1,
                   what="the simulator to work while the window is open")
        return 0

    from agentdesk.gui.window import app

    monkeypatch.setattr(app, "run_gui", fake_run_gui)
    code, out, _ = run(capsys, "demo", "--agents", "1", "--speed", "50")
    assert code == 0 and seen["running"] is True and seen["allow_writes"] is True
    assert out.startswith("Demo store: ") and seen["existed"] is True
    assert not cast(Simulator, seen["simulator"]).running  # stopped when the window closed
    assert not Path(str(seen["location"])).parent.exists()  # the throwaway store went with the window
    # It opens on a run the agents are working in, not on whatever finished first.
    selected = str(seen["select"])
    assert selected.startswith("run_")
    started = [e for e in cast(Simulator, seen["simulator"]).events if e.entity_id == selected]
    assert started and started[0].kind == "run_started"

    code, out, _ = run(capsys, "demo", "--agents", "1", "--speed", "50", "--keep")
    kept = Path(str(seen["location"]))
    assert code == 0 and kept.exists() and f"Kept the demo store: {kept}" in out
    shutil.rmtree(kept.parent)


def test_gui_on_a_missing_store_fails_cleanly_without_creating_it(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    missing = tmp_path / "nothing-here.sqlite"
    code, _, err = run(capsys, "--store", str(missing), "gui", "--screenshot", str(tmp_path / "x.png"))
    assert code == 5 and "no store" in err and not missing.exists()


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "frobnicate")[0] == 2
    assert run(capsys, "approvals", "--status", "maybe")[0] == 2
    assert run(capsys, "simulate", "--agents", "0")[0] == 2
    assert run(capsys, "--help")[0] == 0


def test_init_and_simulate_refuse_another_runtimes_database(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Only agentdesk's own schema can be initialised or simulated in; the foreign file stays untouched."""
    from tests.store.sources.fixtures_vgxness import build_vgxness_fixture

    path = tmp_path / "vgxness.sqlite"
    build_vgxness_fixture(path)
    before = path.read_bytes()
    for command in (["init"], ["simulate", "--agents", "1", "--duration", "0.1"]):
        code, out, err = run(capsys, "--store", str(path), *command)
        assert code == 5 and out == ""
        assert "is a vgxness database, not an agentdesk store" in err and "Traceback" not in err
    assert path.read_bytes() == before
