"""The rule editor's form as plain values, and the rule it describes (Qt-free, testable without a display).

The operator writes shell commands one per line (`npm test`, `git status *`); each
line is split into words with `shlex` (it is the operator's own text, not agent
text) and becomes one argv pattern. Other argument conditions are JSON.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agentdesk.store.errors import InvalidInput
from agentdesk.store.rules.model import Effect, Rule, parse_matcher
from agentdesk.store.text.jsonsafe import DuplicateKey, loads

KINDS = ("shell", "fields", "any")
EXPIRY_CHOICES: tuple[tuple[str, float | None], ...] = (
    ("never", None), ("in 1 hour", 3600.0), ("in 8 hours", 8 * 3600.0), ("in 1 day", 86_400.0),
    ("in 7 days", 7 * 86_400.0))


@dataclass(slots=True)
class RuleForm:
    effect: str = "allow"
    tool: str = ""
    kind: str = "shell"
    commands: str = ""
    """One command per line (shell matchers)."""
    fields: str = ""
    """JSON object of argument name → condition."""
    command_field: str = "command"
    project_id: str = ""
    agent_id: str = ""
    session_id: str = ""
    expires_at: datetime | None = None
    note: str = ""
    enabled: bool = True
    rule_id: str = ""
    """Set when editing a saved rule."""
    revision: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def matcher(self) -> dict[str, Any]:
        """The matcher the form describes, validated; InvalidInput says what is wrong in one sentence."""
        tool = self.tool.strip()
        if not tool:
            raise InvalidInput("Name the tool the rule is for (or * for every tool).")
        fields = _fields(self.fields)
        if self.kind == "any":
            return parse_matcher(tool, {"kind": "any"})
        if self.kind == "fields":
            return parse_matcher(tool, {"kind": "fields", "fields": fields})
        lines = [line.strip() for line in self.commands.splitlines() if line.strip()]
        try:
            commands = [shlex.split(line) for line in lines]
        except ValueError as exc:
            raise InvalidInput(f"A command line could not be split into words: {exc}.") from exc
        return parse_matcher(tool, {"kind": "shell", "field": self.command_field or "command",
                                    "commands": commands, "fields": fields})

    def rule(self) -> Rule:
        """The draft as a rule value (id "" until saved), for the dry run."""
        try:
            effect = Effect(self.effect)
        except ValueError:
            raise InvalidInput("Choose allow, deny or ask.") from None
        return Rule(self.rule_id, effect, self.tool.strip(), self.matcher(), self.project_id.strip() or None,
                    self.agent_id.strip() or None, self.session_id.strip() or None, self.expires_at,
                    self.note.strip(), self.enabled, self.revision)


def _fields(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = loads(text, unique_keys=True)
    except DuplicateKey as exc:
        raise InvalidInput(f"The other-arguments conditions are ambiguous: {exc}.") from exc
    except ValueError as exc:
        raise InvalidInput(f"The other-arguments conditions are not valid JSON: {exc}.") from exc
    if not isinstance(value, dict):
        raise InvalidInput("The other-arguments conditions must be a JSON object.")
    return value


def form_of(rule: Rule) -> RuleForm:
    """The form that edits `rule` (or a proposal: then `rule.id` is "")."""
    matcher = rule.matcher
    kind = str(matcher.get("kind", "any"))
    commands = "\n".join(shlex.join(p) if p[-1] != "*" else shlex.join(p[:-1]) + " *"
                         for p in matcher.get("commands", []))
    fields = matcher.get("fields") or {}
    return RuleForm(str(rule.effect), rule.tool, kind, commands,
                    json.dumps(fields, ensure_ascii=False, sort_keys=True) if fields else "",
                    str(matcher.get("field", "command")), rule.project_id or "", rule.agent_id or "",
                    rule.session_id or "", rule.expires_at, rule.note, rule.enabled, rule.id, rule.revision)


def expiry_after(now: datetime, seconds: float | None) -> datetime | None:
    return None if seconds is None else now + timedelta(seconds=seconds)
