"""The decision records the arguments hash the operator was shown, and refuses stale ones."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import update

from agentdesk.store.errors import InvalidInput, StaleRevision
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.text.arguments import arguments_hash, short_hash
from tests.conftest import World
from tests.store.text.hostile import nested


def stored_arguments(source: NativeSource, approval_id: str) -> str:
    return source.approval(approval_id).arguments


def test_approving_records_the_hash_shown(source: NativeSource, store: Store, world: World) -> None:
    shown = arguments_hash(stored_arguments(source, world.approval))
    source.decide(world.approval, True, "alice", expected_arguments_hash=short_hash(shown))
    with store.reading() as s:
        assert s.get(sc.ApprovalRow, world.approval).approved_hash == shown  # type: ignore[union-attr]
    assert json.loads(source.audit_records(limit=1)[0].payload)["shown_arguments_hash"] == shown


def test_changed_arguments_are_refused_as_stale(source: NativeSource, store: Store, world: World) -> None:
    shown = arguments_hash(stored_arguments(source, world.approval))
    with store.writing_session() as s, s.begin():  # a foreign runtime rewrites the row behind our back
        s.execute(update(sc.ApprovalRow).where(sc.ApprovalRow.id == world.approval)
                  .values(arguments='{"cmd":"rm -rf ~"}'))
    with pytest.raises(StaleRevision, match="changed since they were shown"):
        source.decide(world.approval, True, "alice", expected_arguments_hash=shown)
    assert source.approval(world.approval).status == "pending"
    with pytest.raises(InvalidInput, match="not an arguments hash"):
        source.decide(world.approval, True, "alice", expected_arguments_hash="abc")


def test_request_approval_refuses_arguments_past_the_limits(rt: AgentRuntime, world: World) -> None:
    with pytest.raises(InvalidInput, match="nested 990 levels deep; the limit is 64"):
        rt.request_approval(world.run, "shell", nested(990))
    deep: dict[str, object] = {}
    for _ in range(5000):
        deep = {"k": deep}
    with pytest.raises(InvalidInput, match=r"nested too deeply|nested 5,00"):
        rt.request_approval(world.run, "shell", deep)
    with pytest.raises(InvalidInput, match="limit is 1,000,000 bytes"):
        rt.request_approval(world.run, "shell", {"c": "x" * 1_000_001})
    assert rt.request_approval(world.run, "shell", nested(63))
