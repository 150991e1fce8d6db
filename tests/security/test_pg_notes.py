"""Red team on notes and labels (PostgreSQL): each level, with a raw SQL client, tries to write them.

An agent may not annotate anything (not even its own run: a note is a person's word about the agent), a viewer
reads only, an operator writes only through the functions of migration 0018_notes, never the tables.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from agentdesk.store.errors import PermissionRefused
from agentdesk.store.ingest.export import export
from agentdesk.store.notes import commands, reads
from agentdesk.store.notes.labels import label_problem
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import PgCluster
from tests.security.logins import login_at_level

LEVELS = ("agent", "viewer", "operator", "admin")


@dataclass
class Bench:
    url: str
    owner: Store
    logins: dict[str, tuple[str, str]]
    run: str
    note: str


def _login(cluster: PgCluster, url: str, level: str) -> tuple[str, str]:
    return login_at_level(cluster, url, level, "nt")


@pytest.fixture(scope="module")
def bench(pg_cluster: PgCluster) -> Iterator[Bench]:
    url = pg_cluster.fresh_database()
    owner = open_store(url)
    logins = {level: _login(pg_cluster, url, level) for level in LEVELS}
    agent = open_store(logins["agent"][1])
    try:
        rt = AgentRuntime(agent)
        run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                           "a", "m"), "r")
        note = commands.add_note(owner, "run", run, "kept", "alice").id
        commands.add_label(owner, "run", run, "regression", "alice")
        yield Bench(url, owner, logins, run, note)
    finally:
        agent.close()
        owner.close()
        pg_cluster.drop(url)
        with pg_cluster.admin() as admin:  # type: ignore[attr-defined]
            for name, _ in logins.values():
                admin.execute(f"DROP ROLE IF EXISTS {name}")


def raw(bench: Bench, level: str) -> psycopg.Connection[Any]:
    return psycopg.connect(libpq_url(bench.logins[level][1]))


def direct_writes(b: Bench) -> list[str]:
    return [f"INSERT INTO notes VALUES ('n2', 'run', '{b.run}', '{b.run}', 'x', 'mallory', NULL, 1, 1, 'm', NULL, 1)",
            f"UPDATE notes SET body = 'rewritten' WHERE id = '{b.note}'",
            f"DELETE FROM notes WHERE id = '{b.note}'",
            f"INSERT INTO labels VALUES ('run', '{b.run}', 'fine', '{b.run}', 'mallory', NULL, 1)",
            "DELETE FROM labels", "TRUNCATE notes", "LOCK TABLE labels IN EXCLUSIVE MODE NOWAIT"]


def calls(b: Bench) -> list[str]:
    return [f"SELECT * FROM agentdesk_note_add('n3', 'run', '{b.run}', 'x', 'mallory', NULL, NULL)",
            f"SELECT * FROM agentdesk_note_edit('{b.note}', 'rewritten', 1, 'mallory', NULL)",
            f"SELECT * FROM agentdesk_note_remove('{b.note}', 1, 'mallory', NULL)",
            f"SELECT * FROM agentdesk_label_add('run', '{b.run}', 'fine', 'mallory', NULL, NULL)",
            f"SELECT * FROM agentdesk_label_remove('run', '{b.run}', 'regression', 'mallory', NULL)",
            f"SELECT agentdesk_note_target_run('run', '{b.run}')",
            "SELECT agentdesk_note_check('x', 'run', 'y', 'z')"]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("index", range(7))
def test_no_level_writes_the_tables_directly(bench: Bench, level: str, index: int) -> None:
    with raw(bench, level) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(direct_writes(bench)[index])


@pytest.mark.parametrize("level", ["agent", "viewer"])
@pytest.mark.parametrize("index", range(7))
def test_agents_and_viewers_cannot_call_the_writers(bench: Bench, level: str, index: int) -> None:
    with raw(bench, level) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(calls(bench)[index])


@pytest.mark.parametrize("level", ["viewer", "operator", "admin"])
def test_viewers_and_above_read_them_and_agents_do_not(bench: Bench, level: str) -> None:
    with raw(bench, level) as conn:
        assert conn.execute("SELECT body FROM notes").fetchall() == [("kept",)]
        assert conn.execute("SELECT label FROM labels").fetchall() == [("regression",)]
    with raw(bench, "agent") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT body FROM notes")


def test_an_operator_writes_through_the_functions_under_its_login(bench: Bench) -> None:
    operator = open_store(bench.logins["operator"][1])
    try:
        note = commands.add_note(operator, "run", bench.run, "from the night shift", "bob")
        assert note.author_login == bench.logins["operator"][0]
        commands.add_label(operator, "run", bench.run, "needs-review", "bob")
        # the internal helpers stay internal even for an operator
        with raw(bench, "operator") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT agentdesk_note_check('x', 'run', 'y', 'z')")
        commands.remove_label(operator, "run", bench.run, "needs-review", "bob")
        commands.remove_note(operator, note.id, 1, "bob")
    finally:
        operator.close()


@pytest.mark.parametrize("level", ["agent", "viewer"])
def test_the_store_refuses_them_in_one_sentence(bench: Bench, level: str) -> None:
    store = open_store(bench.logins[level][1])
    try:
        with pytest.raises(PermissionRefused, match="needs operator"):
            commands.add_note(store, "run", bench.run, "mine", "mallory")
        with pytest.raises(PermissionRefused, match="needs operator"):
            commands.add_label(store, "run", bench.run, "fine", "mallory")
    finally:
        store.close()
    assert [n.text for n in reads.marks_for(bench.owner, "run", bench.run).notes] == ["kept"]


def test_the_server_refuses_oversize_notes_and_hidden_labels_from_a_hand_written_client(bench: Bench) -> None:
    with raw(bench, "operator") as conn:
        with pytest.raises(psycopg.errors.ProgramLimitExceeded):
            conn.execute("SELECT * FROM agentdesk_note_add('n4', 'run', %s, repeat('x', 1000001), 'bob', NULL, "
                         "NULL)", (bench.run,))
        conn.rollback()
        for label in ("needs\u200breview", "a\u202eb", "", " x", "x" * 65, "tab\there"):
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute("SELECT * FROM agentdesk_label_add('run', %s, %s, 'bob', NULL, NULL)",
                             (bench.run, label))
            conn.rollback()
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("SELECT * FROM agentdesk_note_add('n5', 'run', %s, 'from the future', 'bob', "
                         "extract(epoch from now()) + 86400, NULL)", (bench.run,))


def test_an_agent_login_exports_its_run_without_the_notes(bench: Bench) -> None:
    agent = open_store(bench.logins["agent"][1])
    try:
        out = io.StringIO()
        export(agent, out, fmt="otlp-json", run_id=bench.run)
    finally:
        agent.close()
    assert "resourceSpans" in out.getvalue() and "agentdesk.note" not in out.getvalue()
    owner = io.StringIO()
    export(bench.owner, owner, fmt="otlp-json", run_id=bench.run)
    assert "agentdesk.note" in owner.getvalue() and "kept" in owner.getvalue()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(label=st.text(min_size=0, max_size=70))
def test_every_label_the_client_accepts_the_server_accepts(bench: Bench, label: str) -> None:
    """The server's floor never refuses what the client's stricter check let through (no surprise refusals);
    what it refuses, the client refused first."""
    if "\x00" in label:
        return  # PostgreSQL text cannot hold NUL at all; the client refuses it as a control character
    with bench.owner.engine.connect() as conn:
        try:
            conn.execute(text("SELECT agentdesk_note_check('x', 'run', NULL, :label)"), {"label": label})
            server_ok = True
        except DBAPIError:
            server_ok = False
    if label_problem(label) is None:
        assert server_ok, f"the server refused {label!r}"
