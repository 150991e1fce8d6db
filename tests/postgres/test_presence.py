"""Presence on a real PostgreSQL server: who else looks at an approval, each login writing only its own row."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import psycopg
import pytest

from agentdesk.store.approvals.presence import LIVE_S, Presence, PresenceUnavailable, presence_for
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import prebuilt

MakeLogin = Callable[[str | None], tuple[str, str]]
SHOTS = os.environ.get("AGENTDESK_SHOTS")


@pytest.fixture
def approvals(pg_rt: AgentRuntime) -> list[str]:
    pid = pg_rt.create_project("p")
    aid = pg_rt.create_agent(pg_rt.create_session(pg_rt.create_task(pid, "t"), "s"), "a", "m")
    run = pg_rt.start_run(aid, "r")
    return [pg_rt.request_approval(run, "shell", {"cmd": f"ls {n}"}, timeout_s=600) for n in range(2)]


@pytest.fixture
def logins(make_login: MakeLogin) -> Iterator[Callable[[str], tuple[str, Presence]]]:
    """logins(level) -> (login name, Presence on a store opened as that login)."""
    opened: list[Store] = []

    def make(level: str) -> tuple[str, Presence]:
        name, url = make_login(level)
        store = open_store(url)
        opened.append(store)
        presence = presence_for(NativeSource(store))
        assert presence is not None
        return name, presence

    yield make
    for store in opened:
        store.close()


def age(pg_store: Store, login: str, seconds: float) -> None:
    """As the table's owner (no row-level security applies to it): make a row look `seconds` old."""
    with pg_store.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE presence SET seen_at = now() - interval '{seconds} seconds' "
                             f"WHERE login = '{login}'")


def test_two_logins_see_each_other_and_not_themselves(approvals: list[str], logins: Any) -> None:
    alice_name, alice = logins("operator")
    bob_name, bob = logins("operator")
    assert alice.look(approvals[0]) == []
    assert bob.look(approvals[0]) == [alice_name]
    assert alice.look(approvals[0]) == [bob_name]
    assert alice.others(approvals[1]) == []
    assert bob.look(approvals[1]) == []  # bob moved on: one row per login
    assert alice.others(approvals[0]) == [] and alice.others(approvals[1]) == [bob_name]
    bob.leave()
    assert alice.others(approvals[1]) == []


def test_a_viewer_is_seen_looking_too(approvals: list[str], logins: Any) -> None:
    viewer_name, viewer = logins("viewer")
    _, operator = logins("operator")
    viewer.look(approvals[0])
    assert operator.look(approvals[0]) == [viewer_name]


def test_one_login_cannot_write_anothers_row_even_with_raw_sql(approvals: list[str], logins: Any,
                                                               make_login: MakeLogin, pg_store: Store) -> None:
    bob_name, bob = logins("operator")
    bob.look(approvals[0])
    _alice_name, alice_url = make_login("operator")
    with psycopg.connect(libpq_url(alice_url), autocommit=True) as conn:
        for sql in (f"INSERT INTO presence (login, approval_id) VALUES ('{bob_name}', '{approvals[1]}')",
                    f"INSERT INTO presence (login, approval_id) VALUES ('{bob_name}', '{approvals[1]}') "
                    "ON CONFLICT (login) DO UPDATE SET approval_id = EXCLUDED.approval_id"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
                conn.execute(sql)
        assert conn.execute(f"UPDATE presence SET approval_id = '{approvals[1]}', seen_at = now() "
                            f"WHERE login = '{bob_name}'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # leaving is agentdesk_presence_leave's (0012)
            conn.execute(f"DELETE FROM presence WHERE login = '{bob_name}'")
        conn.execute("SELECT agentdesk_presence_leave()")  # her own row only (she has none yet)
        conn.execute(f"INSERT INTO presence (approval_id) VALUES ('{approvals[0]}')")  # her own row: fine
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # renaming it: no grant on the column (0012)
            conn.execute(f"UPDATE presence SET login = '{bob_name}' WHERE login = session_user")
        assert conn.execute("SELECT login FROM presence ORDER BY login").fetchall() != []  # reading is allowed
    with pg_store.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT login, approval_id FROM presence WHERE login = %(l)s",
                                    {"l": bob_name}).all()
    assert rows == [(bob_name, approvals[0])]  # untouched


def test_expired_rows_disappear(approvals: list[str], logins: Any, pg_store: Store) -> None:
    alice_name, alice = logins("operator")
    bob_name, bob = logins("operator")
    bob.look(approvals[0])
    age(pg_store, bob_name, LIVE_S - 5)
    assert alice.look(approvals[0]) == [bob_name]
    age(pg_store, bob_name, LIVE_S + 1)
    assert alice.look(approvals[0]) == []
    assert bob.look(approvals[0]) == [alice_name]  # a heartbeat brings bob back


def test_notify_names_approvals_on_arrival_move_and_leave_not_on_every_heartbeat(approvals: list[str],
                                                                                   logins: Any) -> None:
    _, alice = logins("operator")
    _, bob = logins("operator")
    heard: list[set[str] | None] = []
    woke = threading.Event()

    def on_ids(ids: set[str] | None) -> None:
        heard.append(ids)
        woke.set()

    listener = alice.listen(on_ids)
    try:
        def expect(ids: set[str]) -> None:
            assert woke.wait(5), "no notification"
            assert heard[-1] == ids
            woke.clear()

        bob.look(approvals[0])
        expect({approvals[0]})
        bob.look(approvals[0])  # a heartbeat on the same approval: no one needs to re-read
        assert not woke.wait(1.2)
        bob.look(approvals[1])
        expect({approvals[0], approvals[1]})
        bob.leave()
        expect({approvals[1]})
    finally:
        listener.stop()


def test_a_refused_write_makes_presence_say_so(approvals: list[str], logins: Any, pg_store: Store) -> None:
    _, viewer = logins("viewer")
    with pg_store.engine.begin() as conn:  # an admin took presence away from viewers in this database
        conn.exec_driver_sql("REVOKE INSERT, UPDATE, DELETE ON presence FROM agentdesk_viewer")
    with pytest.raises(PresenceUnavailable, match="permission denied"):
        viewer.look(approvals[0])
    assert viewer.others(approvals[0]) == []  # reading still works


def test_sqlite_has_no_presence(tmp_path: Path) -> None:
    source = NativeSource.open(str(prebuilt(tmp_path / "s.sqlite")))
    try:
        assert presence_for(source) is None
    finally:
        source.close()


# -- the approvals pane ---------------------------------------------------------------------------------
def test_the_pane_says_who_else_is_looking(approvals: list[str], logins: Any, make_login: MakeLogin,
                                           qtbot: Any) -> None:
    from agentdesk.gui.approvals.queue import ApprovalQueue
    from agentdesk.gui.approvals.tables import select_row
    from agentdesk.model.services import Services

    bob_name, bob = logins("operator")
    carol_name, carol = logins("viewer")
    _, alice_url = make_login("operator")
    source = NativeSource.open(alice_url)
    services = Services.create(source, actor="alice", coalesce_ms=10)
    queue = ApprovalQueue(services)
    qtbot.addWidget(queue)
    queue.resize(700, 700)
    queue.show()
    try:
        qtbot.waitUntil(lambda: queue.pending_model.rowCount() == 2 and queue.presence.active, timeout=10_000)
        bob.look(approvals[0])
        carol.look(approvals[0])
        select_row(queue.pending_table, queue.pending_model.row_of(approvals[0]))
        expected = f"also looking: {', '.join(sorted([bob_name, carol_name]))}"
        qtbot.waitUntil(lambda: queue.presence_line.isVisible() and queue.presence_line.text() == expected,
                        timeout=5000)
        assert alice_sees(bob, approvals[0])  # alice's heartbeat was written when she selected it
        if SHOTS:
            queue.grab().save(str(Path(SHOTS) / "approvals-presence.png"))
        bob.leave()  # the NOTIFY makes alice's window re-read at once, long before a heartbeat
        qtbot.waitUntil(lambda: queue.presence_line.text() == f"also looking: {carol_name}", timeout=3000)
        select_row(queue.pending_table, queue.pending_model.row_of(approvals[1]))
        qtbot.waitUntil(lambda: not queue.presence_line.isVisible(), timeout=3000)
        # alice's heartbeat for the new selection is written off the GUI thread: wait for it
        qtbot.waitUntil(lambda: carol.others(approvals[1]) != [], timeout=3000)
        assert carol.others(approvals[0]) == []
    finally:
        queue.presence.close()
        services.close()
        source.close()


def alice_sees(other: Presence, approval_id: str) -> bool:
    return len(other.others(approval_id)) >= 1


def test_on_sqlite_the_pane_shows_nothing(tmp_path: Path, qtbot: Any) -> None:
    from agentdesk.gui.approvals.queue import ApprovalQueue
    from agentdesk.gui.approvals.tables import select_row
    from agentdesk.model.services import Services

    source = NativeSource.open(str(prebuilt(tmp_path / "s.sqlite")))
    rt = AgentRuntime(source.store)
    pid = rt.create_project("p")
    aid = rt.create_agent(rt.create_session(rt.create_task(pid, "t"), "s"), "a", "m")
    approval = rt.request_approval(rt.start_run(aid, "r"), "shell", {"cmd": "ls"}, timeout_s=600)
    services = Services.create(source, actor="solo", coalesce_ms=10)
    queue = ApprovalQueue(services)
    qtbot.addWidget(queue)
    queue.show()
    try:
        qtbot.waitUntil(lambda: queue.pending_model.rowCount() == 1, timeout=5000)
        select_row(queue.pending_table, queue.pending_model.row_of(approval))
        qtbot.waitUntil(lambda: queue.presence.ready, timeout=5000)  # the store answered: it has no presence
        assert queue.presence.shown == (approval, [])  # the selection reached the model, which shows no one
        assert not queue.presence.active and not queue.presence_line.isVisible()
    finally:
        services.close()
        source.close()


def test_the_model_beats_while_selected_and_leaves_when_nothing_is(approvals: list[str], make_login: MakeLogin,
                                                                   pg_store: Store, qtbot: Any) -> None:
    from agentdesk.model.approvals.presence import PresenceModel
    from agentdesk.model.services import Services

    name, url = make_login("operator")
    source = NativeSource.open(url)
    services = Services.create(source, actor=name, coalesce_ms=10)
    model = PresenceModel(services, heartbeat_s=0.2)

    def seen_at() -> object:
        with pg_store.engine.connect() as conn:
            return conn.exec_driver_sql("SELECT seen_at FROM presence WHERE login = %(l)s AND approval_id = %(a)s",
                                        {"l": name, "a": approvals[0]}).scalar()

    try:
        qtbot.waitUntil(lambda: model.active, timeout=10_000)
        model.look_at(approvals[0])
        qtbot.waitUntil(lambda: seen_at() is not None, timeout=3000)
        first = seen_at()
        qtbot.waitUntil(lambda: seen_at() != first, timeout=3000)  # the heartbeat refreshed the row
        model.look_at(None)
        qtbot.waitUntil(lambda: seen_at() is None, timeout=3000)
    finally:
        model.close()
        services.close()
        source.close()
