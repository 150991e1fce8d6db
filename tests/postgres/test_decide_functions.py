"""On PostgreSQL approvals change only through agentdesk's SECURITY DEFINER functions (migration 0008).

A hand-written client gets what agentdesk does or nothing: a viewer cannot call the
functions, an operator cannot UPDATE a decision into the table, and what an operator
does through a function is the same compare-and-set, audit and change log as the
window's, signed by the server and checked by `verify`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
import pytest
from sqlalchemy import text

from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.approvals.heartbeat import GONE_REASON, beat, dismiss_gone
from agentdesk.store.audit.verify import verify_store
from agentdesk.store.context import commands as context_commands
from agentdesk.store.errors import AlreadyDecided, Conflict, StaleRevision
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.queries import NativeQueries
from agentdesk.store.rules.commands import add_rule
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.text.arguments import arguments_hash
from agentdesk.store.validation import payload_hash
from tests.postgres.test_roles import refused

MakeLogin = Callable[[str | None], tuple[str, str]]


def run_of(store: Store) -> tuple[AgentRuntime, str]:
    rt = AgentRuntime(store)
    pid = rt.create_project("p")
    aid = rt.create_agent(rt.create_session(rt.create_task(pid, "t"), "s"), "a", "m")
    return rt, rt.start_run(aid, "r")


def intact(store: Store) -> None:
    with store.reading() as session:
        report = verify_store(session)
    assert report.ok, report.reason


def test_no_login_writes_a_decision_or_an_audit_record_by_hand(pg_store: Store, make_login: MakeLogin) -> None:
    rt, run = run_of(pg_store)
    approval = rt.request_approval(run, "shell", {"cmd": "ls"})
    _, viewer = make_login("viewer")
    _, operator = make_login("operator")
    _, admin = make_login("admin")
    _, agent = make_login("agent")
    for url in (viewer, operator, admin, agent):
        assert refused(url, f"UPDATE approvals SET status = 'approved', decided_by = 'alice' WHERE id = '{approval}'")
        assert refused(url, f"UPDATE approvals SET approved_hash = 'x' WHERE id = '{approval}'")
        assert refused(url, "INSERT INTO audit_log (at, actor, action, entity, entity_id, payload, prev_hash, "
                            "hash) VALUES (1, 'a', 'approval.approved', 'approval', 'x', '{}', 'x', 'x')")
    assert refused(viewer, f"SELECT * FROM agentdesk_decide('{approval}', true, 'v', NULL, NULL, NULL, 'sql')")
    assert refused(viewer, f"SELECT * FROM agentdesk_withdraw('{approval}', 'v', NULL, 'sql')")
    assert refused(viewer, "SELECT * FROM agentdesk_expire_overdue('v', 'sql')")
    assert refused(viewer, "SELECT * FROM agentdesk_dismiss_gone('v', NULL, 1, 'x', 'sql')")
    assert refused(operator, "SELECT * FROM agentdesk_change(1, 'o', 'approval', 'update', 'x', '{}', 1)")
    assert NativeSource(pg_store).approval(approval).status == "pending"
    beat(open_store(operator), approval)  # the runtime's own column stays writable (a heartbeat)
    assert NativeSource(pg_store).approval(approval).requester_heartbeat_at is not None


def test_an_operator_deciding_by_hand_gets_exactly_what_agentdesk_does(pg_store: Store, make_login: MakeLogin) -> None:
    rt, run = run_of(pg_store)
    first, second = (rt.request_approval(run, "shell", {"cmd": c}) for c in ("ls", "rm -rf /"))
    name, operator = make_login("operator")
    shown = arguments_hash(NativeSource(pg_store).approval(first).arguments).removeprefix("sha256:")
    with psycopg.connect(libpq_url(operator)) as conn:
        outcome, status, by, *_ = conn.execute(
            "SELECT * FROM agentdesk_decide(%s, true, 'bob', NULL, %s, %s, 'sql')",
            (first, '{"cmd":"ls -la"}', shown[:12])).fetchone()
        again = conn.execute("SELECT outcome, status, decided_by FROM agentdesk_decide(%s, false, 'eve', 'no', "
                             "NULL, NULL, 'sql')", (first,)).fetchone()
        stale = conn.execute("SELECT outcome FROM agentdesk_decide(%s, true, 'bob', NULL, NULL, 'abcdefabcdef', "
                             "'sql')", (second,)).fetchone()
        login = conn.execute("SELECT db_login FROM audit_log WHERE entity_id = %s AND action = 'approval.approved'",
                             (first,)).fetchone()
    assert (outcome, status, by) == ("ok", "approved", "bob")
    assert again == ("lost", "approved", "bob") and stale == ("stale",)
    assert login == (name,)
    with pg_store.engine.connect() as conn:
        edited, edited_hash, approved_hash = conn.execute(text(
            "SELECT edited_arguments, edited_hash, approved_hash FROM approvals WHERE id = :id"), {"id": first}).one()
    assert edited == '{"cmd":"ls -la"}' and approved_hash == "sha256:" + shown
    assert edited_hash == payload_hash("shell", '{"cmd":"ls -la"}')  # the server's hash is Python's
    intact(pg_store)  # chain, server MACs and the approvals' state all agree with the log


def test_an_operator_through_agentdesk_decides_withdraws_expires_and_dismisses(
        pg_store: Store, make_login: MakeLogin) -> None:
    _, operator_url = make_login("operator")
    _, agent_url = make_login("agent")
    operator, agent = open_store(operator_url), open_store(agent_url)
    try:
        rt, run = run_of(agent)  # the runtime connects as an agent
        decided, withdrawn, overdue, gone = (rt.request_approval(run, "shell", {"cmd": str(n)},
                                                                 timeout_s=0.01 if n == 2 else 300) for n in range(4))
        approval_commands.decide(operator, decided, True, "bob")
        with pytest.raises(AlreadyDecided, match="bob"):  # the loser is told who won and when
            approval_commands.decide(operator, decided, False, "eve", reason="late")
        with pytest.raises(StaleRevision):
            approval_commands.decide(operator, withdrawn, True, "bob", expected_arguments_hash="0" * 12)
        assert approval_commands.withdraw(agent, withdrawn, "agent", "stopped").status == "withdrawn"
        time.sleep(0.05)
        assert approval_commands.expire_overdue(agent) == [overdue]  # by the server's clock: the runtime may
        with pg_store.engine.begin() as conn:  # the requester beat once, long ago (the owner's hand)
            conn.execute(text("UPDATE approvals SET requester_heartbeat_at = 1 WHERE id = :id"), {"id": gone})
        assert dismiss_gone(operator, "carol") == [gone]
        assert NativeSource(operator).approval(gone).reason == GONE_REASON
        add_rule(pg_store, "allow", "shell", {"kind": "any"}, "admin")
        ruled = rt.request_approval(run, "shell", {"cmd": "rule"})  # an agent login's process never decides
        assert NativeSource(operator).approval(ruled).status == "pending"
        owned = AgentRuntime(pg_store).request_approval(run, "shell", {"cmd": "rule"})  # the owner's runtime does
        assert NativeSource(operator).approval(owned).status == "approved"
    finally:
        operator.close()
        agent.close()
    intact(pg_store)


def context_of(store: Store) -> tuple[str, str, list[str]]:
    rt, _ = run_of(store)
    with store.engine.connect() as conn:
        agent = conn.execute(text("SELECT id FROM agents")).scalar_one()
    group = rt.new_turn_group(agent)
    items = [rt.append_context(agent, group, "message", "user", body) for body in ("hello", "wörld 😀 \"q\"")]
    return agent, group, items


def test_context_edits_go_through_the_functions(pg_store: Store, make_login: MakeLogin) -> None:
    _, group, (first, second) = context_of(pg_store)
    _, viewer = make_login("viewer")
    _, operator_url = make_login("operator")
    for url in (viewer, operator_url):
        assert refused(url, f"UPDATE context_items SET content = 'forged' WHERE id = '{first}'")
        assert refused(url, f"UPDATE context_items SET locked = true, visible = false WHERE id = '{first}'")
        assert refused(url, f"UPDATE context_item_revisions SET content = 'forged' WHERE item_id = '{first}'")
        assert refused(url, f"DELETE FROM context_items WHERE id = '{first}'")
    assert refused(viewer, f"SELECT * FROM agentdesk_edit_item('{first}', 'x', 1, 'v', 'sql')")
    assert refused(viewer, f"SELECT * FROM agentdesk_set_item_locked('{first}', true, 1, 'v', 'sql')")
    assert refused(viewer, f"SELECT * FROM agentdesk_set_group_visibility('{group}', false, 1, 'v', 'sql')")
    operator = open_store(operator_url)
    try:
        context_commands.edit_item(operator, first, "hello, edited \\ \"quoted\" 中文", 1, "bob")
        with pytest.raises(StaleRevision, match="revision 2, you had 1"):
            context_commands.edit_item(operator, first, "again", 1, "eve")
        context_commands.set_item_locked(operator, second, True, 1, "bob")
        with pytest.raises(Conflict, match="locked"):
            context_commands.edit_item(operator, second, "no", 2, "bob")
        with pytest.raises(Conflict, match="holds a locked item"):
            context_commands.set_group_visibility(operator, group, False, 5, "bob")
        context_commands.set_item_locked(operator, second, False, 2, "bob")
        context_commands.set_group_visibility(operator, group, False, 6, "bob")
        with psycopg.connect(libpq_url(operator_url)) as conn:  # by hand: the same function, the same rules
            assert conn.execute(f"SELECT outcome, revision FROM agentdesk_edit_item('{first}', 'x', 1, 'o', "
                                "'sql')").fetchone() == ("stale", 3)
        agent_ctx = NativeQueries(operator).context(run_agent(operator))
        assert all(not item.visible for item in agent_ctx.items)
        context_commands.set_group_visibility(operator, group, True, 7, "bob")
        revision = NativeQueries(operator).context(run_agent(operator)).context_revision
        compaction = context_commands.compact(operator, run_agent(operator), [first, second], "they said hi", "",
                                              revision, "bob")
        assert refused(operator_url, f"UPDATE compactions SET undone_at = 1 WHERE id = '{compaction}'")
        assert refused(operator_url, f"UPDATE context_items SET compaction_id = NULL WHERE id = '{first}'")
        context_commands.undo_compaction(operator, compaction, "bob")
        with pytest.raises(Conflict, match="already undone"):
            context_commands.undo_compaction(operator, compaction, "eve")
        after = NativeQueries(operator).context(run_agent(operator))
    finally:
        operator.close()
    assert {i.id for i in after.items} == {first, second} and not any(i.compaction_id for i in after.items)
    intact(pg_store)  # chain, MACs, and the items' revisions and locks against the log


def run_agent(store: Store) -> str:
    with store.engine.connect() as conn:
        return str(conn.execute(text("SELECT id FROM agents")).scalar_one())
