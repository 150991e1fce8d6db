"""Deciding a new approval by standing rule, inside the transaction that records it.

`request_approval` inserts the pending approval and calls `apply_rules` before it
commits: an allow or deny rule decides the approval right there, so it is never
visible as pending, can never be decided twice (a person's decision afterwards
loses the compare-and-set and is told the rule decided it), and the decision,
its audit record and the rule's hit count commit together or not at all.

A rule decides only when its row is what its audit records say (store/audit/guard.py):
a rule written or changed in the store file by hand is ignored, the call goes to a
person, and a `rule.refused` audit record and a logged warning say which rule and why.
"""

from __future__ import annotations

import logging

from agentdesk.store.audit import guard
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.convert import ts
from agentdesk.store.rules.commands import live_rules_for, record_hit
from agentdesk.store.rules.matching import Call, Prepared, decide
from agentdesk.store.rules.model import Effect
from agentdesk.store.uow import UnitOfWork

log = logging.getLogger("agentdesk.audit")


def rule_actor(rule_id: str) -> str:
    """How a rule appears as the decider: `decided_by` and the audit actor."""
    return f"rule:{rule_id}"


def refuse_rule(uow: UnitOfWork, rule_id: str, approval_id: str, why: str) -> None:
    """A rule row its audit records do not vouch for decides nothing: said in the log and in the audit."""
    log.warning("agentdesk: rule %s was not applied to approval %s, which goes to a person: %s Run `agentdesk "
                "verify`.", rule_id, approval_id, why)
    uow.audit("agentdesk", "rule.refused", "rule", rule_id, {"approval_id": approval_id, "why": why})


def call_of(row: sc.ApprovalRow) -> Call:
    return Call(row.tool_name, row.arguments, row.project_id, row.agent_id, row.session_id)


def apply_rules(uow: UnitOfWork, row: sc.ApprovalRow, prepared: Prepared | None = None) -> str | None:
    """Decide the just-inserted pending `row` by rule; returns the deciding rule's id, or None.

    `prepared` is the call's command arguments analysed before the transaction (`prepare.prepare_request`):
    nothing is parsed here while the write lock is held. Without it (older callers), nothing is either:
    an empty view set means no shell rule matches and a person decides.
    """
    with uow.session.no_autoflush:  # the row's decision goes into its INSERT: operators may not UPDATE it on PG
        rules = live_rules_for(uow.session, row.tool_name, uow.now)
    if not rules:
        return None
    while True:
        verdict = decide(rules, call_of(row), ts(uow.now), {} if prepared is None else prepared)
        if verdict is None or verdict.effect == Effect.ASK:
            return None
        refused = guard.rule_refusal(uow.session, uow.store.url, verdict.rule.id)
        if refused is None:
            break
        refuse_rule(uow, verdict.rule.id, row.id, refused)  # the call goes to a person; decide without it
        rules = [r for r in rules if r.id != verdict.rule.id]
    rule = verdict.rule
    status = "approved" if verdict.effect == Effect.ALLOW else "denied"
    reason = f"{verdict.effect} rule {rule.id}" + (f": {rule.note}" if rule.note else "")
    row.status, row.decided_at, row.decided_by = status, uow.now, rule_actor(rule.id)
    row.decided_by_rule, row.reason = rule.id, reason
    row.revision = 2
    if row.tool_call_id:
        call = uow.session.get(sc.ToolCallRow, row.tool_call_id)
        if call is not None:
            call.status = status
    record_hit(uow, rule.id)
    uow.audit(rule_actor(rule.id), f"approval.{status}", "approval", row.id, {
        "rule_id": rule.id, "rule_revision": rule.revision, "rule": rule.describe(), "reason": reason,
        "tool": row.tool_name, "payload_hash": row.payload_hash})
    uow.record("approval", "update", row.id, {"project": row.project_id, "task": row.task_id,
                                               "session": row.session_id, "agent": row.agent_id,
                                               "run": row.run_id}, 2)
    return rule.id
