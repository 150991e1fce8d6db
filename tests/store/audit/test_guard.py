"""The runtime's guard (store/audit/guard.py) keeps up with genuine rule changes: no false refusals.

The rule records are read once per process and then only from where the last read stopped;
these tests change rules between requests (from another Store on the same file, and
after a rolled-back transaction whose audit seq SQLite hands out again) and check
that genuine rules still decide and a hand-made change is still refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.rules import commands as rules
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World
from tests.store.audit.helpers import rows, sql

STAGING = {"kind": "fields", "fields": {"env": {"equals": "staging"}}}


def _decided_by(rt: AgentRuntime, world: World, env: str) -> str | None:
    decision = rt.poll_decision(rt.request_approval(world.run, "deploy", {"env": env}))
    return None if decision is None else decision.actor


def test_rules_changed_after_the_first_read_are_followed(store: Store, store_path: Path, world: World,
                                                         rt: AgentRuntime) -> None:
    first = rules.add_rule(store, "allow", "deploy", STAGING, "admin")
    assert _decided_by(rt, world, "staging") == f"rule:{first.id}"  # the records are read here
    other = open_store(str(store_path))
    try:  # another Store (as another process would) adds a rule after that read
        second = rules.add_rule(other, "allow", "deploy", {"kind": "fields", "fields": {"env": {"equals": "qa"}}},
                                "admin")
    finally:
        other.close()
    assert _decided_by(rt, world, "qa") == f"rule:{second.id}"
    rules.update_rule(store, first.id, first.revision, "admin", enabled=False)
    assert _decided_by(rt, world, "staging") is None
    sql(store_path, "UPDATE approval_rules SET enabled = 1 WHERE id = ?", first.id)  # by hand: refused
    assert _decided_by(rt, world, "staging") is None
    assert rows(store_path, "SELECT count(*) FROM audit_log WHERE action = 'rule.refused' AND entity_id = ?",
                first.id) == [(1,)]


def test_a_rolled_back_append_whose_seq_is_reused_does_not_hide_a_new_rule(store: Store, world: World,
                                                                           rt: AgentRuntime) -> None:
    """SQLite reuses the seq of a rolled-back record: the guard notices and reads again, so no false refusal."""
    rules.add_rule(store, "deny", "deploy", {"kind": "fields", "fields": {"env": {"equals": "prod"}}}, "admin")
    with pytest.raises(RuntimeError), rt.batch():
        rt.request_approval(world.run, "deploy", {"env": "prod"})  # reads the rule records up to its own record
        raise RuntimeError("the batch fails after the guard read")
    later = rules.add_rule(store, "allow", "deploy", STAGING, "admin")  # its record takes the freed seq
    assert _decided_by(rt, world, "staging") == f"rule:{later.id}"
