"""`approval_commands.withdraw`: the requesting agent takes back a pending approval, once, audited and change-logged."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from agentdesk.gui.approvals.report import left_text
from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.errors import AlreadyDecided, NotFound
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.readmodel import ApprovalStatus
from tests.conftest import World


def test_withdraw_leaves_the_queue_with_an_audit_record_and_a_change(store: Store, world: World) -> None:
    source = NativeSource(store)
    assert [a.id for a in source.approvals("pending")] == [world.approval]
    withdrawn = approval_commands.withdraw(store, world.approval, "deploy-bot", "the agent stopped waiting after 5 s")
    assert withdrawn.status == ApprovalStatus.WITHDRAWN and withdrawn.decided_by == "deploy-bot"
    assert source.approvals("pending") == []
    assert [a.id for a in source.approvals("withdrawn")] == [world.approval]
    assert left_text(world.approval, withdrawn).endswith("was withdrawn by the agent")
    with store.reading() as s:
        audit = s.execute(select(sc.AuditRow.actor, sc.AuditRow.payload)
                          .where(sc.AuditRow.action == "approval.withdrawn")).all()
        change = s.execute(select(sc.ChangeRow.op, sc.ChangeRow.revision).where(
            sc.ChangeRow.entity == "approval", sc.ChangeRow.entity_id == world.approval)
            .order_by(sc.ChangeRow.seq.desc())).first()
    assert len(audit) == 1 and audit[0].actor == "deploy-bot"
    assert json.loads(audit[0].payload)["reason"] == "the agent stopped waiting after 5 s"
    assert change is not None and change.op == "update" and change.revision == 2


def test_a_decision_that_came_first_wins(store: Store, world: World) -> None:
    approval_commands.decide(store, world.approval, True, "carol")
    with pytest.raises(AlreadyDecided):
        approval_commands.withdraw(store, world.approval, "deploy-bot")
    assert NativeSource(store).approval(world.approval).status == "approved"


def test_withdrawn_cannot_be_decided_or_withdrawn_again(store: Store, world: World) -> None:
    approval_commands.withdraw(store, world.approval, "deploy-bot")
    with pytest.raises(AlreadyDecided):
        approval_commands.decide(store, world.approval, True, "carol")
    with pytest.raises(AlreadyDecided):
        approval_commands.withdraw(store, world.approval, "deploy-bot")
    with store.reading() as s:
        assert len(s.execute(select(sc.AuditRow.seq).where(sc.AuditRow.action == "approval.withdrawn")).all()) == 1


def test_unknown_approval(store: Store) -> None:
    with pytest.raises(NotFound):
        approval_commands.withdraw(store, "apr_nope", "deploy-bot")
