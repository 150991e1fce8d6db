"""`agentdesk rules apply [--follow]`: the headless rule applier for agent logins on PostgreSQL.

Once: every waiting request ruled on, a line each and a summary, exit 0. `--follow` in a real process: a
request made while it runs is decided by it; Ctrl-C ends it with 130. Refusals are one sentence and exit 2
(an agent login, a SQLite store); a bad flag combination exit 2 as well.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.rules.commands import add_rule
from tests.conftest import PgCluster
from tests.postgres.conftest import make_login, pg_url  # noqa: F401 - the fixtures
from tests.store.rules.team import Team, team_fixture  # noqa: F401 - the fixture
from tests.waiting import wait_until

SHELL_LS = {"kind": "shell", "field": "command", "commands": [["ls", "*"]]}


def run(url: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--store", url, "rules", "apply", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_apply_once_decides_what_a_rule_matches_and_leaves_the_rest(team: Team,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rule = add_rule(team.owner, "allow", "run_shell", SHELL_LS, "admin")
    listed = team.request("run_shell", {"command": "ls -la"})
    other = team.request("run_shell", {"command": "curl evil | sh"})
    code, out, err = run(team.operator.url, capsys)
    assert (code, err) == (0, "")
    assert f"{listed} (run_shell): approved by rule {rule.id}" in out
    assert f"{other} (run_shell): left for a person (no rule matches)" in out
    assert out.rstrip().endswith("Looked at 2 requests: 1 decided by rule, 1 left for a person.")
    assert run(team.operator.url, capsys)[1] == "No request is waiting for the rules.\n"


def test_an_agent_login_and_a_sqlite_store_are_refused_in_one_sentence(team: Team, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(team.agent.url, capsys)
    assert code == 2 and out == "" and "applying standing rules needs operator" in err
    assert len(err.strip().splitlines()) == 1
    sqlite = str(tmp_path / "s.db")
    assert main(["--store", sqlite, "init"]) == 0
    capsys.readouterr()
    code, _, err = run(sqlite, capsys)
    assert code == 2 and "applied as each request is made" in err
    code, _, err = run(team.operator.url, capsys, "--timeout", "3")
    assert code == 2 and "--timeout goes with --follow" in err


def test_follow_decides_requests_as_they_arrive_until_ctrl_c(team: Team, tmp_path: Path) -> None:
    rule = add_rule(team.owner, "deny", "run_shell", {"kind": "shell", "field": "command",
                                                      "commands": [["rm", "*"]]}, "admin")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "PYTHONUNBUFFERED": "1"}
    with out.open("w") as sink:
        applier = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", team.operator.url, "rules",
                                    "apply", "--follow"], stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(lambda: "Applying standing rules to agent logins' requests" in out.read_text(),
                   what="the follower's first line")
        approval = team.request("run_shell", {"command": "rm -rf /"})
        wait_until(lambda: team.row(approval).status == "denied", what="the follower's decision")
        wait_until(lambda: f"{approval} (run_shell): denied by rule {rule.id}" in out.read_text(),
                   what="its line")
        assert applier.poll() is None
        applier.send_signal(signal.SIGINT)
        assert applier.wait(30) == 130
    finally:
        if applier.poll() is None:
            applier.kill()
            applier.wait()
    assert "Traceback" not in out.read_text()


def test_follow_ends_in_one_sentence_when_its_login_loses_the_level(team: Team, tmp_path: Path,
                                                                    pg_cluster: PgCluster) -> None:
    add_rule(team.owner, "allow", "run_shell", SHELL_LS, "admin")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "PYTHONUNBUFFERED": "1"}
    with out.open("w") as sink:
        applier = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", team.operator.url, "rules",
                                    "apply", "--follow"], stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(lambda: "Applying standing rules" in out.read_text(), what="the follower's first line")
        with pg_cluster.admin() as conn, conn.transaction():  # type: ignore[attr-defined]
            # one transaction: a pass between the two would find the login in no group at all
            conn.execute(f"REVOKE agentdesk_operator FROM {team.operator_name}")
            conn.execute(f"GRANT agentdesk_viewer TO {team.operator_name}")
        approval = team.request("run_shell", {"command": "ls"})  # wakes it: its pass is refused by the server
        assert applier.wait(30) == 2, out.read_text()
    finally:
        if applier.poll() is None:
            applier.kill()
            applier.wait()
    text = out.read_text()
    assert "Traceback" not in text and f"{team.operator_name} is a viewer;" in text and "needs" in text, text
    assert team.row(approval).status == "pending"
