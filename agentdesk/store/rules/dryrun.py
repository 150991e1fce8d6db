"""Dry run: what a draft rule would have done over the stored history, before it is saved.

`dry_run` replays the draft alone against past approvals (newest first, up to a
limit) and against the pending ones: each approval it matches is listed with what
the rule would have done and what actually happened, and `differs` marks the
ones where the rule would have changed the outcome. The draft's enabled flag and
expiry are ignored (the question is what its matcher and scope cover).

`propose_rule` writes the narrowest rule that matches one approval: the same
tool, agent, session and project, and exactly its arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import InvalidInput
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.convert import ts, ts_opt
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.command import analyse
from agentdesk.store.rules.hidden import has_hidden_characters, value_hides_characters
from agentdesk.store.rules.matching import NO, YES, Call, effective_effect, match_level
from agentdesk.store.rules.model import Effect, Rule, is_shell_tool, parse_matcher
from agentdesk.store.rules.shell import command_of
from agentdesk.store.text.jsonsafe import DuplicateKey, loads

DEFAULT_HISTORY = 10_000
ARGUMENTS_PREVIEW = 2_000
"""A result row keeps this much of the arguments: 10,000 rows of 1 MB arguments must not sit in memory."""
PAGE = 2_000
OUTCOME = {Effect.ALLOW: "would-allow", Effect.DENY: "would-deny", Effect.ASK: "would-ask"}


@dataclass(frozen=True, slots=True)
class DryRunRow:
    approval_id: str
    tool: str
    arguments: str
    """The first `ARGUMENTS_PREVIEW` characters of the stored arguments."""
    created_at: datetime
    agent_id: str
    outcome: str
    """would-allow, would-deny or would-ask."""
    actual: str
    """pending, approved, denied or expired."""
    decided_by: str | None
    differs: bool


@dataclass(slots=True)
class DryRun:
    rows: list[DryRunRow] = field(default_factory=list)
    """Matched past approvals, newest first."""
    pending: list[DryRunRow] = field(default_factory=list)
    """Matched pending approvals: the ones the rule would settle now (allow/deny rules)."""
    examined: int = 0
    truncated: bool = False

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.rows if r.outcome == outcome)

    @property
    def differing(self) -> int:
        return sum(1 for r in self.rows if r.differs)

    def summary(self) -> dict[str, Any]:
        return {"examined": self.examined, "matched": len(self.rows), "would_allow": self.count("would-allow"),
                "would_deny": self.count("would-deny"), "would_ask": self.count("would-ask"),
                "differs": self.differing, "pending_matched": len(self.pending), "truncated": self.truncated}


def differs(effect: Effect, status: str, decided_by_rule: str | None) -> bool:
    """Would the rule have changed what happened to a decided (or expired) approval?"""
    if effect == Effect.ALLOW:
        return status != rm.ApprovalStatus.APPROVED
    if effect == Effect.DENY:
        return status != rm.ApprovalStatus.DENIED
    return decided_by_rule is not None  # ask: a person would have decided what a rule did


def dry_run(store: Store, draft: Rule, limit: int = DEFAULT_HISTORY) -> DryRun:
    """Replay `draft` over up to `limit` past approvals and over every pending approval."""
    A = sc.ApprovalRow
    result = DryRun()
    query = select(A.id, A.tool_name, A.arguments, A.created_at, A.project_id, A.agent_id, A.session_id,
                   A.status, A.decided_by, A.decided_by_rule)
    if draft.tool != "*":
        query = query.where(A.tool_name == draft.tool)
    with store.reading() as s:
        for row in s.execute(query.where(A.status == "pending").order_by(A.created_at, A.id)):
            found = _row(draft, row)
            if found is not None:
                result.pending.append(found)
        offset = 0
        history = query.where(A.status != "pending").order_by(A.created_at.desc(), A.id)
        while offset < limit:
            page = s.execute(history.offset(offset).limit(min(PAGE, limit - offset))).all()
            for row in page:
                found = _row(draft, row)
                if found is not None:
                    result.rows.append(found)
            result.examined += len(page)
            offset += len(page)
            if len(page) < PAGE:
                break
        else:
            result.truncated = s.execute(history.offset(limit).limit(1)).first() is not None
    return result


def _row(draft: Rule, row: Any) -> DryRunRow | None:
    aid, tool, arguments, created, project, agent, session, status, decided_by, by_rule = row
    level = match_level(draft, Call(tool, arguments, project, agent, session))
    if level == NO:
        return None
    effect = effective_effect(draft, level)  # a deny that rests on a run-time word asks
    return DryRunRow(aid, tool, arguments[:ARGUMENTS_PREVIEW], ts(created), agent, OUTCOME[effect], status,
                     decided_by,
                     status != "pending" and differs(effect, status, by_rule))


def would_settle(draft: Rule, approvals: list[rm.Approval]) -> set[str]:
    """Which of these pending approvals an allow/deny draft would decide (the queue marks them)."""
    if draft.effect == Effect.ASK:
        return set()
    return {a.id for a in approvals
            if match_level(draft, Call(a.tool_name, a.arguments, a.project_id, a.agent_id, a.session_id)) == YES}


def propose_rule(approval: rm.Approval, effect: Effect | None = None) -> Rule:
    """The narrowest rule that matches this approval: its tool, place and exact arguments."""
    if effect is None:
        effect = Effect.DENY if approval.status == rm.ApprovalStatus.DENIED else Effect.ALLOW
    try:
        args = loads(approval.arguments, unique_keys=True)
    except DuplicateKey as exc:
        raise InvalidInput(f"This approval's arguments repeat a key ({exc}); no rule can match them.") from None
    except ValueError:
        raise InvalidInput("This approval's arguments are not JSON; no rule can match them.") from None
    if not isinstance(args, dict):
        raise InvalidInput("This approval's arguments are not a JSON object; no rule can match them.")
    if effect == Effect.ALLOW and (has_hidden_characters(approval.arguments) or value_hides_characters(args)):
        raise InvalidInput("These arguments contain hidden characters; an allow rule never matches them.")
    matcher = _narrowest(approval.tool_name, args, effect)
    return Rule("", effect, approval.tool_name, parse_matcher(approval.tool_name, matcher),
                approval.project_id, approval.agent_id, approval.session_id,
                note=f"from approval {approval.id}", created_at=ts_opt(None))


def _narrowest(tool: str, args: dict[str, Any], effect: Effect) -> dict[str, Any]:
    command_field = next((k for k in ("command", "cmd", "script") if k in args), None)
    if not is_shell_tool(tool) or command_field is None:
        return {"kind": "fields", "fields": {k: {"equals": v} for k, v in args.items()}} if args else \
            {"kind": "any"}
    if effect == Effect.ALLOW:
        commands = _vouched(args[command_field])
    else:
        commands = [c.words for c in command_of(args[command_field]).commands]
    patterns: list[list[str]] = []
    for words in commands:
        if None in words:
            words = (*words[:words.index(None)], "*")
        if words and words[0] != "*" and list(words) not in patterns:
            patterns.append([str(w) for w in words])
    if not patterns:
        raise InvalidInput("The command has no simple command a rule could name.")
    others = {k: {"equals": v} for k, v in args.items() if k != command_field}
    return {"kind": "shell", "field": command_field, "commands": patterns, "fields": others}


def _vouched(command: Any) -> list[tuple[str | None, ...]]:
    """The simple commands an allow rule may name: only what both shell parsers agree is plain words."""
    view = analyse(command)
    if not view.vouchable or view.allow is None:
        raise InvalidInput(f"No allow rule is proposed for this command: {view.why_not or 'it cannot be parsed'}"
                           "; a person decides each such call.")
    if any(None in words for words in view.allow):
        raise InvalidInput("No allow rule is proposed for this command: it has words only known at run time "
                           "(globs); a person decides each such call.")
    return list(view.allow)
