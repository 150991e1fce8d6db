"""docs/postgres.md, run as written: the team's set-up, logins, monitoring queries, backup and restore.

Every block after a `<!-- docs-test: KIND -->` comment runs here, on a fresh database of the shared server:
`server` SQL as the superuser, `logins` SQL as the owner, `query` SQL as the viewer login, and the
`init`, `grants`, `backup` and `restore` command lines through the CLI in this process. The doc's names are
made unique (roles belong to the whole server) and its URL `postgresql://LOGIN@db.example.com/agentdesk?
sslmode=verify-full` becomes the test server's socket with the login's password from the doc (the test
server has no TLS; the TLS check query still runs). If a block stops working, this test names it.
"""

from __future__ import annotations

import re
import shlex
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from agentdesk.cli.main import main
from agentdesk.store.persistence.database import open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import PgCluster

DOC = Path(__file__).resolve().parents[2] / "docs" / "postgres.md"
BLOCK = re.compile(r"<!-- docs-test: (\w+) -->\n```[a-z]*\n(.*?)```", re.S)
LOGINS = ("team_owner", "alice", "bob", "carol", "runner1")
URL = re.compile(r"postgresql://(\w+)@db\.example\.com/agentdesk\?sslmode=verify-full")


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text())


@dataclass
class Team:
    cluster: PgCluster
    database: str
    names: dict[str, str]
    passwords: dict[str, str]
    folder: Path

    def sql(self, text: str) -> str:
        text = re.sub(r"\bDATABASE agentdesk\b", f"DATABASE {self.database}", text)
        for name, unique in self.names.items():
            text = re.sub(rf"(?<![-\w]){name}\b", unique, text)  # not inside the passwords (change-me-bob)
        return text

    def url(self, login: str) -> str:
        socket = self.cluster.url.split("host=", 1)[1].split("&", 1)[0]
        return f"postgresql://{self.names[login]}:{self.passwords[login]}@/{self.database}?host={socket}"

    def connect(self, login: str) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(libpq_url(self.url(login)), autocommit=True)

    def command(self, line: str) -> list[str]:
        line = URL.sub(lambda m: self.url(m.group(1)), line)
        line = line.replace("/backups/", f"{self.folder}/")
        argv = [self.names.get(word, word) for word in shlex.split(line)]  # `admin role grant alice admin`
        assert argv[0] == "agentdesk", line
        return argv[1:]


@pytest.fixture
def team(pg_cluster: PgCluster, tmp_path: Path) -> Iterator[Team]:
    tag = uuid.uuid4().hex[:8]
    names = {login: f"d{tag}_{login}" for login in LOGINS}
    passwords = dict(re.findall(r"CREATE ROLE (\w+) LOGIN\b.*?PASSWORD '([^']+)'", DOC.read_text()))
    assert set(passwords) == set(LOGINS), passwords
    made = Team(pg_cluster, f"d{tag}_agentdesk", names, passwords, tmp_path)
    yield made
    with pg_cluster.admin() as conn:  # type: ignore[attr-defined]
        conn.execute(f'DROP DATABASE IF EXISTS "{made.database}" WITH (FORCE)')
        for unique in names.values():
            conn.execute(f"DROP ROLE IF EXISTS {unique}")


def statements(body: str) -> list[str]:
    """The block's statements, its `--` comment lines left out (psql would skip them too)."""
    code = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("--"))
    return [s for s in code.split(";") if s.strip()]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    said = capsys.readouterr()
    assert code == 0, f"`agentdesk {' '.join(argv)}` exited {code}: {said.err}"
    return said.out


def test_the_doc_blocks_are_the_ones_this_test_runs() -> None:
    kinds = [kind for kind, _ in blocks()]
    assert kinds[:4] == ["server", "init", "logins", "grants"]
    assert {"query", "backup", "restore"} <= set(kinds)


def test_a_team_sets_up_monitors_backs_up_and_restores_from_the_doc(team: Team,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for kind, body in blocks():
        if kind == "server":
            with team.cluster.admin() as conn:  # type: ignore[attr-defined]
                for statement in statements(team.sql(body)):
                    conn.execute(statement)
        elif kind == "logins":
            with team.connect("team_owner") as conn:
                for statement in statements(team.sql(body)):
                    conn.execute(statement)
        elif kind == "query":
            with team.connect("carol") as conn:  # a viewer may run every monitoring query
                conn.execute(body).fetchall()
        else:
            outputs = [run_cli(team.command(line), capsys) for line in body.strip().splitlines()]
            if kind == "grants":
                listed = outputs[-1]
                for login, level in (("alice", "admin"), ("bob", "operator"), ("carol", "viewer"),
                                     ("runner1", "agent")):
                    assert re.search(rf"{team.names[login]}\s+{level}", listed), listed
            elif kind == "backup":
                _work(team.url("runner1"))  # written after the backup: the restore takes it away
            elif kind == "restore":
                assert outputs[1].startswith("Restored from a backup taken at "), outputs[1]
                assert "Moved" in outputs[2]
    assert "Restored from" not in run_cli(["--store", team.url("carol"), "verify"], capsys)


def _work(url: str) -> None:
    store = open_store(url)
    try:
        rt = AgentRuntime(store)
        agent = rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"), "a", "m")
        rt.start_run(agent, "after the backup")
    finally:
        store.close()
