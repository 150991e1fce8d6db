"""Bad input and faults on a PostgreSQL store: one sentence and exit 5, never a traceback, nothing half-written."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agentdesk.cli.main import main
from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.persistence.database import head_revision, open_store
from tests.conftest import PgCluster
from tests.postgres.conftest import login_url


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_sentence(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_wrong_password_is_one_sentence(pg_url: str, make_login: object,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    name, _ = make_login("viewer")  # type: ignore[operator]
    code, _, err = cli(capsys, "--store", login_url(pg_url, name, "wrong"), "info")
    assert code == 5
    line = one_sentence(err)
    assert "wrong user name or password" in line and "wrong@" not in line and ":***@" in line


def test_unknown_host_is_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "--store", "postgresql://u:p@no-such-host.invalid/agentdesk", "approvals")
    assert code == 5 and "unknown host" in one_sentence(err)


def test_server_down_is_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "--store", "postgresql://u@/agentdesk?host=/nonexistent-dir", "info")
    assert code == 5 and "not answering" in one_sentence(err)


def test_environment_variable_names_the_store(pg_url: str, pg_store: object,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_STORE", pg_url)
    code, out, _ = cli(capsys, "info", "--json")
    assert code == 0 and '"agentdesk"' in out and head_revision() in out


def test_missing_driver_says_what_to_install(pg_url: str) -> None:
    script = textwrap.dedent(f"""
        import sys
        sys.modules["psycopg"] = None  # as if the extra was not installed
        from agentdesk.cli.main import main
        sys.exit(main(["--store", {pg_url!r}, "info"]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 5, proc.stderr
    assert "pip install 'agentdesk[postgres]'" in one_sentence(proc.stderr)


def test_a_newer_schema_is_refused_untouched(pg_cluster: PgCluster, pg_url: str, pg_store: object) -> None:
    import psycopg

    from agentdesk.store.persistence.postgres.engine import libpq_url
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(StoreUnavailable, match="newer agentdesk"):
        open_store(pg_url)
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("9999_future",)


def test_migrations_run_on_a_blank_database(pg_cluster: PgCluster) -> None:
    name = "blank_" + pg_cluster.template[-8:]
    with pg_cluster.admin() as conn:  # type: ignore[attr-defined]
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = pg_cluster.database_url(name)
    try:
        with pytest.raises(StoreUnavailable, match="no agentdesk schema"):
            open_store(url, read_only=True)
        store = open_store(url)
        assert store.schema_version == head_revision()
        store.close()
    finally:
        pg_cluster.drop(url)
