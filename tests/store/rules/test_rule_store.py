"""Rules in the store: audited CAS writes, decisions by rule exactly once, dry runs, heartbeats."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from agentdesk.store.approvals.heartbeat import GONE_REASON, beat, dismiss_gone, is_gone
from agentdesk.store.audit import verify_chain
from agentdesk.store.errors import AlreadyDecided, InvalidInput, NotFound, StaleRevision
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.rules.commands import add_rule, get_rule, list_rules, remove_rule, update_rule
from agentdesk.store.rules.dryrun import dry_run, propose_rule, would_settle
from agentdesk.store.rules.model import Effect, Rule, parse_matcher
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World, prebuilt
from tests.waiting import wait_until

NPM = {"kind": "shell", "field": "command", "commands": [["npm", "test"]],
       "fields": {"cwd": {"any": True}}}


def audit_actions(store: Store) -> list[tuple[str, str, str]]:
    with store.reading() as s:
        return [(r.actor, r.action, r.entity_id) for r in s.execute(select(sc.AuditRow)).scalars()]


def change_rows(store: Store, entity: str) -> list[tuple[str, str]]:
    with store.reading() as s:
        return [(r.op, r.entity_id) for r in s.execute(
            select(sc.ChangeRow).where(sc.ChangeRow.entity == entity)).scalars()]


def test_rule_writes_are_audited_cas_and_logged(store: Store) -> None:
    rule = add_rule(store, "allow", "run_shell", NPM, "alice", note="tests are harmless")
    assert (rule.revision, rule.created_by, rule.hit_count, rule.enabled) == (1, "alice", 0, True)
    changed = update_rule(store, rule.id, 1, "bob", enabled=False)
    assert (changed.revision, changed.enabled) == (2, False)
    with pytest.raises(StaleRevision, match="revision 2, you had 1"):
        update_rule(store, rule.id, 1, "carol", note="lost race")
    assert get_rule(store, rule.id).note == "tests are harmless"
    with pytest.raises(StaleRevision):
        remove_rule(store, rule.id, "bob", expected_revision=1)
    remove_rule(store, rule.id, "bob", expected_revision=2)
    with pytest.raises(NotFound):
        get_rule(store, rule.id)
    assert [a for a in audit_actions(store) if a[2] == rule.id] == [
        ("alice", "rule.create", rule.id), ("bob", "rule.update", rule.id), ("bob", "rule.remove", rule.id)]
    assert change_rows(store, "rule") == [("insert", rule.id), ("update", rule.id), ("delete", rule.id)]
    with store.reading() as s:
        assert verify_chain(s).ok


def test_bad_rules_are_refused_and_nothing_is_written(store: Store) -> None:
    for effect, tool, matcher in (("maybe", "run_shell", NPM), ("allow", "", NPM),
                                  ("allow", "run_shell", {"kind": "regex", "pattern": "npm.*"})):
        with pytest.raises(InvalidInput):
            add_rule(store, effect, tool, matcher, "alice")
    assert list_rules(store) == []
    assert audit_actions(store) == []


def test_an_allow_rule_approves_exactly_once_and_counts_the_hit(store: Store, rt: AgentRuntime,
                                                                 world: World, source: NativeSource) -> None:
    rule = add_rule(store, "allow", "run_shell", NPM, "alice", note="safe")
    allowed = rt.request_approval(world.run, "run_shell", {"command": "npm test", "cwd": "/w"})
    chained = rt.request_approval(world.run, "run_shell", {"command": "npm test && rm -rf ~", "cwd": "/w"})
    approval = source.approval(allowed)
    assert (approval.status, approval.decided_by_rule, approval.decided_by) == \
        ("approved", rule.id, f"rule:{rule.id}")
    assert rule.id in (approval.reason or "")
    assert source.approval(chained).status == "pending"
    decision = rt.wait_for_decision(allowed, timeout_s=1)
    assert (decision.status, decision.actor) == ("approved", f"rule:{rule.id}")
    with pytest.raises(AlreadyDecided, match=f"rule:{rule.id}"):
        source.decide(allowed, approve=False, actor="bob", reason="too late")
    hit = get_rule(store, rule.id)
    assert (hit.hit_count, hit.revision) == (1, 1) and hit.last_hit_at is not None
    decided = [a for a in audit_actions(store) if a[2] == allowed]
    assert decided == [("runtime", "approval.request", allowed), (f"rule:{rule.id}", "approval.approved", allowed)]
    with store.reading() as s:
        call = s.get(sc.ToolCallRow, s.get(sc.ApprovalRow, allowed).tool_call_id)
        assert call is not None and call.status == "approved"
        assert verify_chain(s).ok


def test_deny_beats_allow_and_ask_leaves_it_to_a_person(store: Store, rt: AgentRuntime, world: World,
                                                        source: NativeSource) -> None:
    add_rule(store, "allow", "run_shell", NPM, "alice", session_id=world.session)
    deny = add_rule(store, "deny", "*", {"kind": "any"}, "alice", agent_id=world.agent)
    denied = rt.request_approval(world.run, "run_shell", {"command": "npm test", "cwd": "/w"})
    assert (source.approval(denied).status, source.approval(denied).decided_by_rule) == ("denied", deny.id)
    update_rule(store, deny.id, 1, "alice", effect="ask")
    asked = rt.request_approval(world.run, "run_shell", {"command": "npm test", "cwd": "/w"})
    assert source.approval(asked).status == "pending"
    assert get_rule(store, deny.id).hit_count == 1


def test_a_failed_request_counts_no_hit(store: Store, rt: AgentRuntime, world: World) -> None:
    rule = add_rule(store, "allow", "read_file", {"kind": "any"}, "alice")
    with pytest.raises(NotFound):
        rt.request_approval("run_missing", "read_file", {"path": "a"})
    assert get_rule(store, rule.id).hit_count == 0


def test_the_narrowest_proposed_rule_matches_its_approval_only(store: Store, rt: AgentRuntime,
                                                               world: World, source: NativeSource) -> None:
    aid = rt.request_approval(world.run, "run_shell", {"command": "cd /w && npm test", "cwd": "/w"})
    proposed = propose_rule(source.approval(aid))
    assert proposed.effect == Effect.ALLOW
    assert proposed.matcher["commands"] == [["cd", "/w"], ["npm", "test"]]
    assert (proposed.project_id, proposed.agent_id, proposed.session_id) == \
        (world.project, world.agent, world.session)
    other = rt.request_approval(world.run, "run_shell", {"command": "cd /w && npm test", "cwd": "/x"})
    result = dry_run(store, proposed)
    assert {r.approval_id for r in result.pending} == {aid}
    assert would_settle(proposed, source.approvals("pending")) == {aid}
    assert other not in would_settle(proposed, source.approvals("pending"))
    hidden = rt.request_approval(world.run, "run_shell", {"command": "npm test\u202e", "cwd": "/w"})
    with pytest.raises(InvalidInput, match="hidden characters"):
        propose_rule(source.approval(hidden))
    variable = rt.request_approval(world.run, "run_shell", {"command": "npm test $X", "cwd": "/w"})
    with pytest.raises(InvalidInput, match="expands a parameter"):
        propose_rule(source.approval(variable))
    glob = rt.request_approval(world.run, "run_shell", {"command": "npm test *.js", "cwd": "/w"})
    with pytest.raises(InvalidInput, match="run time"):
        propose_rule(source.approval(glob))


def test_dry_run_marks_where_the_rule_differs_from_the_person(store: Store, rt: AgentRuntime, world: World,
                                                              source: NativeSource) -> None:
    yes = rt.request_approval(world.run, "run_shell", {"command": "npm test", "cwd": "/w"})
    no = rt.request_approval(world.run, "run_shell", {"command": "npm test", "cwd": "/w"})
    rt.request_approval(world.run, "run_shell", {"command": "npm test; rm -rf ~", "cwd": "/w"})
    source.decide(yes, approve=True, actor="op")
    source.decide(no, approve=False, actor="op", reason="not now")
    draft = Rule("", Effect.ALLOW, "run_shell", parse_matcher("run_shell", NPM))
    result = dry_run(store, draft)
    by_id = {r.approval_id: r for r in result.rows}
    assert set(by_id) == {yes, no}
    assert (by_id[yes].differs, by_id[no].differs) == (False, True)
    assert result.summary()["would_allow"] == 2 and result.differing == 1
    assert result.summary()["examined"] == 2 and result.pending == []  # world.approval is another tool


def test_heartbeat_renews_without_audit_and_gone_requesters_are_dismissed(
        store: Store, rt: AgentRuntime, world: World, source: NativeSource) -> None:
    waited = rt.request_approval(world.run, "run_shell", {"command": "ls"})
    assert source.approval(waited).requester_heartbeat_at is None
    before = len(audit_actions(store))
    decision = rt.wait_for_decision(waited, timeout_s=0.35, poll_s=0.05, heartbeat_s=0.1)
    assert decision.status == "pending"
    assert len(audit_actions(store)) == before
    beats = [c for c in change_rows(store, "approval") if c == ("heartbeat", waited)]
    assert 2 <= len(beats) <= 5
    approval = source.approval(waited)
    assert approval.requester_heartbeat_at is not None
    assert not is_gone("pending", approval.requester_heartbeat_at, approval.requester_heartbeat_at)
    assert dismiss_gone(store, "op", gone_after_s=60) == []
    last_beat = approval.requester_heartbeat_at
    wait_until(lambda: datetime.now(UTC) - last_beat > timedelta(seconds=0.15),
               what="the last beat to age past 0.1 s")
    assert dismiss_gone(store, "op", gone_after_s=0.1) == [waited]  # world.approval never beat: kept
    gone = source.approval(waited)
    assert (gone.status, gone.reason, gone.decided_by) == ("denied", GONE_REASON, "op")
    assert source.approval(world.approval).status == "pending"
    assert not beat(store, waited)
    assert ("op", "approval.denied", waited) in audit_actions(store)


def test_a_beat_keeps_the_decision_revision(store: Store, rt: AgentRuntime, world: World) -> None:
    assert beat(store, world.approval)
    with store.reading() as s:
        row = s.get(sc.ApprovalRow, world.approval)
        assert row is not None and row.revision == 1 and row.requester_heartbeat_at is not None


COMMANDS = ["npm test", "npm test && rm -rf ~", "npm run lint", "cd /w && npm test", "ls", "npm test $(id)",
            "npm test\u200b", "rm -rf /tmp/x"]
PATTERNS = [[["npm", "test"]], [["npm", "*"]], [["cd", "/w"], ["npm", "test"]], [["rm", "*"]], [["ls"]]]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=st.lists(st.tuples(st.sampled_from(COMMANDS), st.sampled_from(["approve", "deny", "leave"]),
                                  st.booleans()), min_size=1, max_size=8),
       effect=st.sampled_from(["allow", "deny", "ask"]), patterns=st.sampled_from(PATTERNS),
       scoped=st.booleans())
def test_dry_run_counts_equal_a_brute_force_replay(tmp_path: Path, history: list[tuple[str, str, bool]],
                                                   effect: str, patterns: list[list[str]], scoped: bool) -> None:
    """What the dry run predicts is what the runtime does when the same calls arrive with the rule saved."""
    path = prebuilt(tmp_path / f"s{time.monotonic_ns()}.sqlite")
    store = open_store(str(path))
    try:
        rt, source = AgentRuntime(store), NativeSource(store)
        sid = rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s")
        runs = [rt.start_run(rt.create_agent(sid, name, "m"), "r") for name in ("a", "b")]
        calls = []
        for command, fate, other_agent in history:
            run = runs[other_agent]
            aid = rt.request_approval(run, "run_shell", {"command": command})
            calls.append((run, command))
            if fate != "leave":
                source.decide(aid, approve=fate == "approve", actor="op", reason="r")
        matcher = {"kind": "shell", "field": "command", "commands": patterns}
        agent = source.approval(aid).agent_id if scoped else None
        draft = Rule("", Effect(effect), "run_shell", parse_matcher("run_shell", matcher), agent_id=agent)
        predicted = dry_run(store, draft)
        saved = add_rule(store, effect, "run_shell", matcher, "op", agent_id=agent)
        replayed = {"approved": 0, "denied": 0}
        settled_pending = 0
        for (run, command), (_, fate, _) in zip(calls, history, strict=True):
            status = source.approval(rt.request_approval(run, "run_shell", {"command": command})).status
            if status in replayed:
                if fate == "leave":
                    settled_pending += 1
                else:
                    replayed[status] += 1
        assert predicted.count("would-allow") == replayed["approved"]
        assert predicted.count("would-deny") == replayed["denied"]
        assert get_rule(store, saved.id).hit_count == sum(replayed.values()) + settled_pending
        if effect != "ask":
            assert len(predicted.pending) == settled_pending
        decided_before = {a.id: a.status for a in source.approvals("all") if a.decided_by == "op"}
        brute_differs = sum(1 for r in predicted.rows
                            if decided_before[r.approval_id] != ("approved" if effect == "allow" else "denied")
                            and effect != "ask")
        assert predicted.differing == brute_differs
    finally:
        store.close()


def test_on_postgresql_only_admins_change_rules(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentdesk.store.rules import commands as rule_commands

    kept = add_rule(store, "allow", "read_file", {"kind": "any"}, "alice")
    monkeypatch.setattr(store.engine.dialect, "name", "postgresql")
    monkeypatch.setattr(rule_commands, "is_admin", lambda session: False)
    with pytest.raises(rule_commands.NotAdmin, match="agentdesk_admin"):
        add_rule(store, "deny", "read_file", {"kind": "any"}, "mallory")
    with pytest.raises(rule_commands.NotAdmin):
        update_rule(store, kept.id, 1, "mallory", enabled=False)
    with pytest.raises(rule_commands.NotAdmin):
        remove_rule(store, kept.id, "mallory")
    assert [r.id for r in list_rules(store)] == [kept.id] and get_rule(store, kept.id).enabled
    monkeypatch.setattr(rule_commands, "is_admin", lambda session: True)
    assert update_rule(store, kept.id, 1, "root", enabled=False).enabled is False
