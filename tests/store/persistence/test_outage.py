"""A lost server, without a server: what counts as lost, the one line, the back-off, and runs left waiting."""

from __future__ import annotations

import logging
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentdesk.store.errors import ServerUnreachable
from agentdesk.store.persistence.database import open_store
from agentdesk.store.persistence.outage import (
    MAX_PAUSE_S,
    Outage,
    Pauses,
    RideOut,
    is_connection_lost,
    outage_line,
    server_name,
)
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.sim.leftovers import GONE_REASON, close_gone_runs
from tests.conftest import prebuilt


class DriverError(Exception):
    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(("message", "sqlstate", "lost"), [
    ("terminating connection due to administrator command", "57P01", True),
    ("the database system is starting up", "57P03", True),
    ("connection failure", "08006", True),
    ("server closed the connection unexpectedly", None, True),
    ('connection failed: connection to server on socket "/tmp/x/.s.PGSQL.5432" failed: No such file', None, True),
    ("permission denied for table runs", "42501", False),
    ("canceling statement due to lock timeout", "55P03", False),
    ("duplicate key value violates unique constraint", "23505", False),
])
def test_what_counts_as_a_lost_server(message: str, sqlstate: str | None, lost: bool) -> None:
    assert is_connection_lost(DriverError(message, sqlstate)) is lost


def test_the_server_is_named_by_host_or_socket_folder() -> None:
    assert server_name("postgresql://u:secret@db.example:5433/agentdesk") == "db.example:5433"
    assert server_name("postgresql://postgres@/postgres?host=/tmp/pg-1") == "/tmp/pg-1"
    assert "secret" not in outage_line(server_name("postgresql://u:secret@db/x"), 0.0)


def test_one_line_per_outage_and_one_when_it_is_back(caplog: pytest.LogCaptureFixture) -> None:
    said: list[str] = []
    outage = Outage("db:5432", notice=said.append)
    outage.lost()
    assert said == [] and outage.line is not None  # one failure is often a session ended, over at the retry
    outage.lost()
    outage.lost()
    assert len(said) == 1 and said[0].startswith("PostgreSQL at db:5432 unreachable since ")
    assert said[0].endswith(", retrying") and said[0] == outage.line
    with caplog.at_level(logging.WARNING, logger="agentdesk.outage"):
        outage.back()
        outage.back()
    assert [r.getMessage().split(" is back")[0] for r in caplog.records] == ["PostgreSQL at db:5432"]
    assert outage.line is None
    outage.lost()
    outage.lost()  # moments later: the same outage (a server starting up refuses some connections)
    assert len(said) == 1


@given(st.lists(st.booleans(), max_size=40))
def test_notices_and_recoveries_alternate(events: list[bool]) -> None:
    """However failures (True) and successes (False) interleave, "unreachable" and "back" lines alternate."""
    lines: list[str] = []
    outage = Outage("db", notice=lines.append)
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("agentdesk.outage")
    logger.addHandler(handler)
    try:
        for failed in events:
            outage.lost() if failed else outage.back()
    finally:
        logger.removeHandler(handler)
    kinds = ["down" if "unreachable" in line else "up" for line in lines]
    assert all(a != b for a, b in pairwise(kinds)) and kinds[:1] in ([], ["down"])


def test_pauses_double_from_a_tenth_to_two_seconds() -> None:
    pauses = Pauses()
    seen = [pauses.next() for _ in range(12)]
    assert 0.08 <= seen[0] <= 0.12 and max(seen) <= MAX_PAUSE_S and seen[-1] >= 0.8 * MAX_PAUSE_S


def test_ride_out_retries_until_the_server_answers_and_gives_up_when_told() -> None:
    outage, tries, pauses = Outage("db", notice=lambda _line: None), [], []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 4:
            raise ServerUnreachable("gone")
        return "done"

    assert outage.ride_out(flaky, RideOut(60.0, lambda s: bool(pauses.append(s)))) == "done"
    assert len(tries) == 4 and len(pauses) == 3 and outage.line is None
    with pytest.raises(ServerUnreachable):
        outage.ride_out(lambda: (_ for _ in ()).throw(ServerUnreachable("gone")), RideOut(60.0, lambda s: True))
    with pytest.raises(ServerUnreachable):  # no ride-out: a person's command hears it at once
        outage.ride_out(lambda: (_ for _ in ()).throw(ServerUnreachable("gone")), RideOut(0.0))


def test_a_waiting_run_whose_agent_is_gone_is_closed_and_a_live_one_is_not(tmp_path: Path) -> None:
    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    try:
        rt = AgentRuntime(store, actor="simulator")
        sid = rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s")
        runs = [rt.start_run(rt.create_agent(sid, name, "m"), name) for name in ("gone", "alive", "silent")]
        approvals = [rt.request_approval(run, "shell", {"cmd": "ls"}) for run in runs]
        for run in runs:
            rt.set_run_status(run, "waiting")
        rt.set_session_status(sid, "waiting")
        rt.heartbeat(approvals[0]).tick()  # beat once, then never again: gone once the beat is old enough
        rt.heartbeat(approvals[1]).tick()
        assert close_gone_runs(rt, gone_after_s=3600) == []  # nobody is gone yet
        with store.reading() as s:  # the first requester's last beat is long ago
            from sqlalchemy import update

            from agentdesk.store.persistence import schema as sc
            s.execute(update(sc.ApprovalRow).where(sc.ApprovalRow.id == approvals[0])
                      .values(requester_heartbeat_at=sc.ApprovalRow.requester_heartbeat_at - 7200))
        assert close_gone_runs(rt, gone_after_s=3600) == [runs[0]]
        assert close_gone_runs(rt, gone_after_s=3600) == []  # once
        with store.reading() as s:
            from agentdesk.store.persistence import schema as sc
            statuses = {r.id: (r.status, r.error) for r in s.query(sc.RunRow)}
            approval = s.get(sc.ApprovalRow, approvals[0])
            assert approval is not None and approval.status == "withdrawn"
        assert statuses[runs[0]] == ("cancelled", GONE_REASON)
        assert statuses[runs[1]][0] == statuses[runs[2]][0] == "waiting"  # beating, or never beaten: left alone
    finally:
        store.close()


def test_the_agent_api_says_503_only_when_nothing_of_the_request_was_applied(tmp_path: Path) -> None:
    from agentdesk.store.errors import CommitUnknown
    from agentdesk.store.server.agent_api import answered_once, status_of

    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    try:
        rt = AgentRuntime(store)

        def lost_before_writing() -> None:
            raise ServerUnreachable("gone")

        def lost_after_writing() -> None:
            rt.create_project("half a registration")
            raise ServerUnreachable("gone")

        with pytest.raises(ServerUnreachable) as nothing:
            answered_once(lost_before_writing)
        assert status_of(nothing.value) == 503  # the client sends it again
        with pytest.raises(CommitUnknown) as part:
            answered_once(lost_after_writing)
        assert status_of(part.value) == 500  # it must not: that would write the first part twice
    finally:
        store.close()
