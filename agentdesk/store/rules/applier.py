"""Standing rules for agent logins on PostgreSQL, applied by a party the agent cannot impersonate.

On SQLite, and for the PostgreSQL store's owner, `request_approval` applies the rules inside the
transaction that records the request (`apply.py`). An agent login may not: its own process would match
the rules, and a process that can lie about the verdict would be the agent deciding for itself, so the
server refuses any request it records as decided (migration 0012). Its requests are therefore ruled on by
an operator's (or admin's) process: the window when its login is one, or `agentdesk rules apply [--follow]`.

The applier reads the pending, unexpired requests no applier has looked at yet (no `approval_rule_looks`
row), matches each against the live rules with the same matcher and the same command analysis the runtime
uses (`matching.decide`, `prepare.views_for`; fail closed: what it cannot prove goes to a person), and then:

- an allow or deny verdict: `agentdesk_rules_decide` decides it on the server, compare-and-set on the
  pending state, under the rule's revision (a rule changed since it was read decides nothing); the server
  records the rule and "rules (applied by <login>)" as who, audits and change-logs it like any decision.
  Two appliers racing on one request: one wins, the other is told `lost`: exactly once.
- an ask verdict or none: `agentdesk_rules_looked` records the look once; the request waits for a person.

When no applier runs, agent logins' requests wait for a person, as they did before (docs/postgres.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import exists, select, text

from agentdesk.store.errors import PermissionRefused, ServerUnreachable, Unsupported
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.bus import Change, ChangeOp, EntityKind
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.commands import live_rules_for
from agentdesk.store.rules.matching import Call, decide
from agentdesk.store.rules.model import Effect, Rule
from agentdesk.store.rules.prepare import views_for
from agentdesk.store.text.arguments import arguments_hash
from agentdesk.store.uow import UnitOfWork, adopt_server_changes

SERVER_RULES_DECIDE = text("SELECT * FROM agentdesk_rules_decide(:id, :rule, :revision, :expected, :origin)")
SERVER_RULES_LOOKED = text("SELECT * FROM agentdesk_rules_looked(:id, :rule, :origin)")
BATCH = 200
"""Requests looked at per pass; a pass that fills it is followed by another at once."""
IDLE_S = 5.0
"""`follow` looks again this often with no change heard (a missed notification costs at most this long)."""

DECIDED = frozenset({"approved", "denied"})
WAITS = frozenset({"ask", "none"})
"""Outcomes that leave the request for a person."""


def wakes(change: Change) -> bool:
    """Whether a change is worth another pass: a new request, a rule changed, or a reset (a reconnect after an
    outage). Not a heartbeat nor a decision or look (another applier's, or our own): every waiting request beats
    every few seconds, and a pass there would find nothing new."""
    return ((change.entity == EntityKind.APPROVAL and change.op == ChangeOp.INSERT)
            or change.entity == EntityKind.RULE or change.op == ChangeOp.RESET)


@dataclass(frozen=True, slots=True)
class Applied:
    """What one look at one request did.

    `outcome`: approved / denied (a rule decided it here), ask / none (it waits for a person), lost (another
    applier or a person decided it first, or it expired), seen (another applier looked first), rule changed
    (the rule moved on since it was read: looked at again on the next pass).
    """

    approval_id: str
    tool: str
    outcome: str
    rule_id: str | None = None


@dataclass(frozen=True, slots=True)
class Request:
    id: str
    tool: str
    arguments: str
    project_id: str
    agent_id: str
    session_id: str


def applier_refusal(store: Store) -> str | None:
    """Why this store and login cannot apply rules (one sentence), or None when they can."""
    if store.read_only:
        return "The store is open read-only: rules cannot be applied from here."
    if not store.is_postgres:
        return ("On a SQLite store standing rules are applied as each request is made; the rule applier is "
                "for PostgreSQL stores.")
    login = store.login
    if login is not None and not login.may("operator"):
        return login.refusal("applying standing rules", "operator")
    return None


def unlooked(store: Store, limit: int = BATCH) -> list[Request]:
    """The oldest pending, unexpired requests no applier has looked at yet."""
    A, L = sc.ApprovalRow, sc.RuleLookRow
    now = time.time()
    with store.reading() as s:
        rows = s.execute(
            select(A.id, A.tool_name, A.arguments, A.project_id, A.agent_id, A.session_id)
            .where(A.status == "pending", A.expires_at.is_(None) | (A.expires_at > now),
                   ~exists().where(L.approval_id == A.id))
            .order_by(A.created_at, A.id).limit(limit)).all()
    return [Request(*row) for row in rows]


def live_rules(store: Store, tools: set[str]) -> dict[str, list[Rule]]:
    """The live rules for each tool, read once per pass."""
    with store.reading() as s:
        return {tool: live_rules_for(s, tool, time.time()) for tool in tools}


def verdict_for(request: Request, rules: list[Rule]) -> tuple[Effect, Rule] | None:
    """The runtime's matcher on one request: (effect, rule), or None when no rule matches (fail closed)."""
    call = Call(request.tool, request.arguments, request.project_id, request.agent_id, request.session_id)
    found = decide(rules, call, datetime.now(UTC), views_for(rules, request.arguments))
    return None if found is None else (found.effect, found.rule)


def apply_pending(store: Store, limit: int = BATCH) -> list[Applied]:
    """One pass: every unlooked request (up to `limit`) ruled on or left for a person; what happened to each."""
    refused = applier_refusal(store)
    if refused is not None:
        raise (Unsupported if not store.is_postgres else PermissionRefused)(refused)
    requests = unlooked(store, limit)
    rules = live_rules(store, {r.tool for r in requests}) if requests else {}
    return [apply_one(store, request, rules[request.tool]) for request in requests]


def apply_one(store: Store, request: Request, rules: list[Rule]) -> Applied:
    found = verdict_for(request, rules)
    if found is None or found[0] == Effect.ASK:
        rule_id = None if found is None else found[1].id
        with UnitOfWork(store) as uow:
            row = uow.session.execute(SERVER_RULES_LOOKED, {"id": request.id, "rule": rule_id,
                                                            "origin": store.origin}).one()
            adopt_server_changes(uow, row.changes)
        outcome = ("none" if rule_id is None else "ask") if row.outcome == "ok" else str(row.outcome)
        return Applied(request.id, request.tool, outcome, rule_id)
    _effect, rule = found
    with UnitOfWork(store) as uow:
        row = uow.session.execute(SERVER_RULES_DECIDE, {
            "id": request.id, "rule": rule.id, "revision": rule.revision,
            "expected": arguments_hash(request.arguments).removeprefix("sha256:"), "origin": store.origin}).one()
        adopt_server_changes(uow, row.changes)
    outcome = str(row.status) if row.outcome == "ok" else "lost" if row.outcome in ("lost", "stale") \
        else str(row.outcome)
    return Applied(request.id, request.tool, outcome, rule.id)


def follow(store: Store, wake: threading.Event, stop: threading.Event,
           report: Callable[[Sequence[Applied]], None], idle_s: float = IDLE_S,
           on_outage: Callable[[ServerUnreachable], None] | None = None,
           on_pass: Callable[[], None] | None = None) -> None:
    """Apply passes until `stop`: one now, then one each time `wake` is set (a request or rule change heard on
    the bus) or `idle_s` passes. A lost server is waited out: `on_outage` hears of each pass that failed (the
    next is tried within a second), `on_pass` of each that worked. Set `wake` after `stop` to end it at once."""
    while not stop.is_set():
        wake.clear()
        healthy = True
        try:
            while not stop.is_set():
                applied = apply_pending(store)
                if applied:
                    report(applied)
                if len(applied) < BATCH:
                    break
            if on_pass is not None:
                on_pass()
        except ServerUnreachable as exc:
            healthy = False
            if on_outage is not None:
                on_outage(exc)
        wake.wait(idle_s if healthy else min(idle_s, OUTAGE_RETRY_S))


OUTAGE_RETRY_S = 1.0
