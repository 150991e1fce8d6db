"""The commands a team runs, on the shared PostgreSQL server: backup, restore, verify, rebase-anchors, info.

pg_dump and pg_restore run as the store's owner (the test server's superuser, over its socket); a login of
the admin level is refused in one sentence, as is a missing pg_dump.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime


def _work(url: str, runs: int) -> None:
    store = open_store(url)
    try:
        rt = AgentRuntime(store)
        agent = rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"), "a", "m")
        for n in range(runs):
            rt.start_run(agent, f"run {n}")
    finally:
        store.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_backup_restore_verify_rebase_from_the_command_line(pg_url: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _work(pg_url, 2)
    dump = tmp_path / "team.backup"
    code, said, _ = run(capsys, "--store", pg_url, "admin", "backup", str(dump))
    assert code == 0 and "Backed up to" in said and f"{dump}.key" in said
    for made in (dump, Path(f"{dump}.key")):
        assert stat.S_IMODE(made.stat().st_mode) == 0o600
    _work(pg_url, 3)

    code, _, err = run(capsys, "--store", pg_url, "admin", "restore", str(dump))
    assert code == 2 and "add --force" in err
    code, said, _ = run(capsys, "--store", pg_url, "admin", "restore", str(dump), "--force")
    assert code == 0 and "Restored the backup taken at" in said

    code, said, _ = run(capsys, "--store", pg_url, "verify")
    assert code == 0
    first = said.splitlines()[0]
    assert first.startswith("Restored from a backup taken at ") and "anchored records after it are gone" in first
    assert said.count("Restored from") == 1
    code, said, _ = run(capsys, "--store", pg_url, "verify", "--json")
    assert code == 0 and len(json.loads(said)["restored"]) == 1

    code, said, _ = run(capsys, "--store", pg_url, "admin", "rebase-anchors")
    assert code == 0 and "Moved" in said
    code, said, _ = run(capsys, "--store", pg_url, "verify")
    assert code == 0 and "Restored from" not in said and said.startswith("Audit chain intact")


def test_restore_needs_the_key_file(pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _work(pg_url, 1)
    dump = tmp_path / "team.backup"
    assert run(capsys, "--store", pg_url, "admin", "backup", str(dump))[0] == 0
    Path(f"{dump}.key").unlink()
    code, _, err = run(capsys, "--store", pg_url, "admin", "restore", str(dump), "--force")
    assert code == 2 and "audit key file" in err and "Traceback" not in err


def test_an_admin_login_may_not_back_up(pg_url: str, make_login: Callable[[str | None], tuple[str, str]],
                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, url = make_login("admin")
    code, _, err = run(capsys, "--store", url, "admin", "backup", str(tmp_path / "b"))
    assert code == 2 and f"{name} is not the store's owner" in err
    assert not (tmp_path / "b").exists()


def test_a_missing_pg_dump_is_one_sentence(pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PG_BIN", str(tmp_path))
    code, _, err = run(capsys, "--store", pg_url, "admin", "backup", str(tmp_path / "b"))
    assert code == 5 and "pg_dump was not found" in err and "Traceback" not in err


def test_info_says_the_connection_is_unencrypted(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, said, _ = run(capsys, "--store", pg_url, "info")
    assert code == 0 and "connection: unencrypted" in said
    code, said, _ = run(capsys, "--store", pg_url, "info", "--json")
    assert json.loads(said)["connection"]["encrypted"] is False


def test_the_password_goes_to_pg_dump_in_its_environment_not_its_arguments() -> None:
    from agentdesk.store.backup.pg_copy import conninfo

    shown, env = conninfo("postgresql://bob:s3cret@db.example.com/agentdesk?sslmode=verify-full")
    assert "s3cret" not in shown and shown.startswith("postgresql://bob@db.example.com/agentdesk")
    assert "sslmode=verify-full" in shown and env["PGPASSWORD"] == "s3cret"
