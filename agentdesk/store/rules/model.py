"""The rule value, its matcher and how rules are ordered.

A matcher is JSON so it can live in one column and travel through the CLI:

- ``{"kind": "any"}``: every call of the tool.
- ``{"kind": "fields", "fields": {NAME: OP, ...}}``: each named argument must satisfy its OP.
- ``{"kind": "shell", "field": "command", "commands": [["npm", "test"], ["git", "status", "*"]],
  "fields": {...}}``: the command in argument FIELD is parsed, and *every* simple command it would
  run must equal one of the argv patterns (a final ``"*"`` allows any further arguments).

An OP is ``{"equals": VALUE}``, ``{"one_of": [VALUE, ...]}``, ``{"under": "/a/dir"}`` (a path
inside a directory, never with ``..``) or ``{"any": true}``. For an allow rule every argument of
the call must be named by the matcher (the command field of a shell matcher counts): an argument
the rule author never thought about (``env``, ``cwd``…) can change what runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from agentdesk.store.errors import InvalidInput
from agentdesk.store.text.jsonsafe import DuplicateKey, loads

SHELL_TOOLS = frozenset({"bash", "sh", "shell", "zsh", "run_shell", "shell_exec", "exec", "execute_command",
                         "run_command", "run_terminal_cmd", "terminal", "local_shell", "command"})
"""Tools whose arguments carry a shell command: a string matcher on them would be bypassable."""

ANY_TOOL = "*"
FIELD_OPS = frozenset({"equals", "one_of", "under", "any"})
MAX_PATTERNS = 200


class Effect(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


PRECEDENCE = {Effect.DENY: 0, Effect.ASK: 1, Effect.ALLOW: 2}
"""deny beats ask beats allow, whatever the order rules were written in."""


def is_shell_tool(tool: str) -> bool:
    return tool.lower() in SHELL_TOOLS


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    effect: Effect
    tool: str
    matcher: dict[str, Any]
    project_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    expires_at: datetime | None = None
    note: str = ""
    enabled: bool = True
    revision: int = 1
    created_by: str = ""
    created_at: datetime | None = None
    hit_count: int = 0
    last_hit_at: datetime | None = None

    @property
    def scope_size(self) -> int:
        return sum(x is not None for x in (self.project_id, self.agent_id, self.session_id))

    def is_live(self, now: datetime) -> bool:
        return self.enabled and (self.expires_at is None or now < self.expires_at)

    def describe(self) -> str:
        """One line for lists and reports: effect, tool and matcher in the rule's own words."""
        return f"{self.effect} {self.tool} {describe_matcher(self.matcher)}"


def specificity(rule: Rule) -> tuple[int, int, int]:
    """Higher is narrower: a named tool, then a narrower place, then a more precise matcher."""
    return (rule.tool != ANY_TOOL, rule.scope_size, matcher_specificity(rule.matcher))


def matcher_specificity(matcher: dict[str, Any]) -> int:
    kind = matcher.get("kind")
    if kind == "any":
        return 0
    fields = matcher.get("fields") or {}
    exact = sum(1 for op in fields.values() if "any" not in op)
    if kind == "shell":
        patterns = matcher.get("commands") or [[]]
        literal = min(len([t for t in p if t != "*"]) for p in patterns)
        wild = any(p and p[-1] == "*" for p in patterns)
        return 10 + 4 * literal + exact - (2 if wild else 0)
    return 5 + 2 * exact


def editor_order(rules: list[Rule]) -> list[Rule]:
    """How the editor lists rules: the more specific rule above the broader one, then newest first."""
    return sorted(rules, key=lambda r: (tuple(-x for x in specificity(r)), PRECEDENCE[r.effect],
                                        -(r.created_at.timestamp() if r.created_at else 0.0), r.id))


ANY_ARGUMENTS = "(any arguments: every call of the tool)"


def covers_every_call(matcher: dict[str, Any]) -> bool:
    """A matcher with no condition: the rule decides every call of its tool, whatever the arguments."""
    return matcher.get("kind") == "any"


def every_call_warning(effect: str, tool: str) -> str:
    """What a rule with no matcher does, in one sentence (the CLI and the window say it before saving)."""
    verb = {"allow": "allow", "deny": "deny", "ask": "ask a person about"}.get(str(effect), str(effect))
    what = "every call of every tool" if tool == ANY_TOOL else f"every call of {tool}"
    return f"This rule has no matcher: it would {verb} {what}, whatever its arguments."


def describe_matcher(matcher: dict[str, Any]) -> str:
    kind = matcher.get("kind")
    if kind == "any":
        return ANY_ARGUMENTS
    parts = []
    if kind == "shell":
        parts.append(" | ".join(" ".join(p) for p in matcher.get("commands", [])))
    for name, op in sorted((matcher.get("fields") or {}).items()):
        (verb, value), = op.items()
        parts.append(f"{name} {verb.replace('_', ' ')}" + ("" if verb == "any" else f" {json.dumps(value)}"))
    return "; ".join(parts) or "(no conditions)"


def check_effect(value: str) -> Effect:
    try:
        return Effect(value)
    except ValueError:
        raise InvalidInput(f"A rule's effect must be allow, deny or ask, not {value!r}.") from None


def parse_matcher(tool: str, matcher: dict[str, Any] | str) -> dict[str, Any]:
    """Validate a matcher (a dict or its JSON) and return it normalised; one clear sentence when bad."""
    if isinstance(matcher, str):
        try:
            matcher = loads(matcher, unique_keys=True)
        except DuplicateKey as exc:
            raise InvalidInput(f"The rule's matcher is ambiguous: {exc}.") from exc
        except ValueError as exc:
            raise InvalidInput(f"The rule's matcher is not valid JSON: {exc}.") from exc
    if not isinstance(matcher, dict):
        raise InvalidInput("The rule's matcher must be a JSON object.")
    kind = matcher.get("kind")
    if kind == "any":
        return {"kind": "any"}
    if kind == "fields":
        fields = _check_fields(tool, matcher.get("fields"), required=True)
        return {"kind": "fields", "fields": fields}
    if kind == "shell":
        field = matcher.get("field", "command")
        if not isinstance(field, str) or not field:
            raise InvalidInput("A shell matcher's field must name the argument that holds the command.")
        commands = _check_patterns(matcher.get("commands"))
        fields = _check_fields(tool, matcher.get("fields") or {}, required=False)
        if field in fields:
            raise InvalidInput(f"A shell matcher cannot also match {field!r} as a plain field.")
        return {"kind": "shell", "field": field, "commands": commands, "fields": fields}
    raise InvalidInput("A rule's matcher kind must be any, fields or shell.")


def _check_patterns(value: Any) -> list[list[str]]:
    if not isinstance(value, list) or not value:
        raise InvalidInput("A shell matcher needs a non-empty list of commands, each a list of words.")
    if len(value) > MAX_PATTERNS:
        raise InvalidInput(f"A shell matcher may list at most {MAX_PATTERNS} commands.")
    patterns = []
    for pattern in value:
        if not isinstance(pattern, list) or not pattern or not all(isinstance(w, str) and w for w in pattern):
            raise InvalidInput("Each command of a shell matcher must be a non-empty list of non-empty words.")
        if pattern[0] == "*" or "*" in pattern[:-1]:
            raise InvalidInput("In a shell matcher only the last word may be \"*\" (any further arguments).")
        patterns.append(list(pattern))
    return patterns


def _check_fields(tool: str, value: Any, *, required: bool) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict) or (required and not value):
        raise InvalidInput("A fields matcher needs an object of argument names to conditions.")
    fields: dict[str, dict[str, Any]] = {}
    for name, op in value.items():
        if not isinstance(op, dict) or len(op) != 1 or next(iter(op)) not in FIELD_OPS:
            raise InvalidInput(f"The condition on {name!r} must be one of equals, one_of, under or any.")
        verb, arg = next(iter(op.items()))
        if verb == "under" and (not isinstance(arg, str) or not arg):
            raise InvalidInput(f"The condition \"under\" on {name!r} needs a directory path.")
        if verb == "one_of" and not isinstance(arg, list):
            raise InvalidInput(f"The condition \"one_of\" on {name!r} needs a list of values.")
        if verb == "any" and arg is not True:
            raise InvalidInput(f"The condition \"any\" on {name!r} must be true.")
        if is_shell_tool(tool) and name in ("command", "cmd", "script") and verb != "any":
            raise InvalidInput(f"{tool} runs {name!r} through a shell: match it with a shell matcher, "
                               "which checks every command it would run.")
        fields[name] = {verb: arg}
    return fields
