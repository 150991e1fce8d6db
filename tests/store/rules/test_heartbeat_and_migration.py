"""The simulator renews the requester heartbeat while it waits; migration 0003 goes down and up cleanly."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import select

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, alembic_config, head_revision, open_store
from agentdesk.store.rules.commands import add_rule, list_rules
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.sim.player import Simulator
from tests.waiting import eventually


def test_the_simulator_beats_while_it_waits_and_stops_when_stopped(store: Store) -> None:
    sim = Simulator(store, agents=2, seed=3, speed=40, approval_timeout_s=30, approval_rate=1.0)
    sim.start()
    try:
        def beating() -> list[sc.ApprovalRow]:
            with store.reading() as s:
                return list(s.execute(select(sc.ApprovalRow).where(
                    sc.ApprovalRow.status == "pending", sc.ApprovalRow.requester_heartbeat_at.is_not(None))
                ).scalars())

        assert eventually(beating, poll_s=0.1, what="a waiting simulated agent renewing its heartbeat")
    finally:
        sim.stop()
    assert sim.failures == []
    with store.reading() as s:
        beats = s.execute(select(sc.ChangeRow).where(sc.ChangeRow.op == "heartbeat")).scalars().all()
        audits = s.execute(select(sc.AuditRow).where(sc.AuditRow.action.like("%heartbeat%"))).scalars().all()
    assert beats and not audits


def test_migration_0003_goes_down_and_up_keeping_approvals(store_path: Path) -> None:
    store = open_store(str(store_path))
    rt = AgentRuntime(store)
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                       "a", "m"), "r")
    add_rule(store, "allow", "read_file", {"kind": "any"}, "alice")
    decided = rt.request_approval(run, "read_file", {"path": "a"})
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0001")
    store.close()
    reopened = open_store(str(store_path))
    try:
        assert reopened.schema_version == head_revision()
        approval = NativeSource(reopened).approval(decided)
        assert approval.status == "approved" and approval.decided_by_rule is None  # the column came back empty
        assert list_rules(reopened) == []
    finally:
        reopened.close()
