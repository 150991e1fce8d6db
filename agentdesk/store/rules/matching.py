"""Does a rule cover a tool call, and which rule decides it.

Allow is the dangerous direction, so an allow rule matches only when it can vouch
for everything the call would do: no hidden characters anywhere in the
arguments, every argument named by the matcher, and for a shell command two
independent parsers agreeing on a plain parse in which *every* simple command
equals one of the rule's argv patterns (`command.analyse`). Deny and ask rules
match when *any* command the text might run matches, over-approximated (a deny
for `rm *` catches `npm test && rm -rf ~`, `ls ~$(rm -rf ~)` and `{rm,-rf,~}`).
Among the live rules that match, deny beats ask beats allow; ties go to the more
specific rule.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from agentdesk.store.rules.command import CommandView, analyse, unreadable
from agentdesk.store.rules.hidden import has_hidden_characters, value_hides_characters
from agentdesk.store.rules.lexer import Words
from agentdesk.store.rules.model import ANY_TOOL, PRECEDENCE, Effect, Rule, specificity
from agentdesk.store.text.jsonsafe import loads


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call as rules see it: the tool, its arguments (JSON text) and where it comes from."""

    tool: str
    arguments: str
    project_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None


CACHE_BELOW_CHARS = 8_192
"""Only short texts are memoised (dry runs see the same few commands many times); big ones are not kept."""

Prepared = Mapping[str, CommandView]
"""A call's command arguments analysed ahead (field name → view), before the write transaction."""


def _decoded(arguments: str) -> tuple[dict[str, Any] | None, bool]:
    """The arguments as a dict (None when not a JSON object) and whether they hide characters."""
    if len(arguments) < CACHE_BELOW_CHARS:
        return _decoded_cached(arguments)
    return _decode(arguments)


@lru_cache(maxsize=4096)
def _decoded_cached(arguments: str) -> tuple[dict[str, Any] | None, bool]:
    return _decode(arguments)


def _decode(arguments: str) -> tuple[dict[str, Any] | None, bool]:
    """Duplicate keys make the arguments no object at all: a runtime might act on either value."""
    try:
        value = loads(arguments, unique_keys=True)
    except (ValueError, RecursionError):
        return None, True
    if not isinstance(value, dict):
        return None, True
    hidden = has_hidden_characters(arguments) or value_hides_characters(value)
    return value, hidden


def decoded_arguments(arguments: str) -> dict[str, Any] | None:
    return _decoded(arguments)[0]


def in_scope(rule: Rule, call: Call) -> bool:
    return ((rule.tool == ANY_TOOL or rule.tool == call.tool)
            and rule.project_id in (None, call.project_id)
            and rule.agent_id in (None, call.agent_id)
            and rule.session_id in (None, call.session_id))


NO, MAYBE, YES = 0, 1, 2
"""How a rule matches: not at all; only through a word known at run time (`$CMD -rf ~` against a deny
for `rm *`: it may be `rm`); or for certain."""


def matches(rule: Rule, call: Call, prepared: Prepared | None = None) -> bool:
    """Would this rule apply to this call (ignoring whether it is enabled or expired)?

    `prepared` holds the command arguments analysed ahead of time; a field it lacks is unreadable
    (a rule written meanwhile names it) and no shell rule on it matches. Without it, fields are
    analysed here (dry runs, the window).
    """
    return match_level(rule, call, prepared) != NO


def effective_effect(rule: Rule, level: int) -> Effect:
    """A deny rule that matches only through a word known at run time asks a person instead."""
    return Effect.ASK if rule.effect == Effect.DENY and level == MAYBE else rule.effect


def match_level(rule: Rule, call: Call, prepared: Prepared | None = None) -> int:
    """`matches`, saying whether the match is certain (YES) or rests on a run-time word (MAYBE)."""
    if not in_scope(rule, call):
        return NO
    args, hidden = _decoded(call.arguments)
    allow = rule.effect == Effect.ALLOW
    if args is None or (allow and hidden):
        return NO
    matcher = rule.matcher
    kind = matcher.get("kind")
    if kind == "any":
        return YES
    fields: dict[str, dict[str, Any]] = matcher.get("fields") or {}
    named = set(fields)
    if kind == "shell":
        named.add(matcher["field"])
    if allow and not set(args) <= named:
        return NO
    if not all(name in args and _field_ok(op, args[name]) for name, op in fields.items()):
        return NO
    if kind == "shell":
        field = matcher["field"]
        if field not in args:
            return NO
        if prepared is None:
            view = analyse(args[field])
        else:
            view = prepared.get(field) or unreadable("the command was not analysed before the request")
        return _shell_level(matcher["commands"], view, allow)
    return YES if kind == "fields" else NO


def _shell_level(patterns: Sequence[Sequence[str]], view: CommandView, allow: bool) -> int:
    if not view.readable:
        return NO
    if allow:
        return YES if view.allow is not None and bool(view.allow) and all(
            any(_argv_ok(p, words) for p in patterns) for words in view.allow) else NO
    return max((_deny_level(p, words) for words in view.deny for p in patterns), default=NO)


def _argv_ok(pattern: Sequence[str], words: Words) -> bool:
    """Allow: every word equals the pattern's; a word known only at run time (None) only under a final *."""
    if pattern and pattern[-1] == "*":
        fixed = pattern[:-1]
        return len(words) >= len(fixed) and all(w == p for w, p in zip(words, fixed, strict=False))
    return len(words) == len(pattern) and all(w == p for w, p in zip(words, pattern, strict=True))


def _deny_level(pattern: Sequence[str], words: Words) -> int:
    """Deny and ask: as `_argv_ok`, but a word known only at run time may be any pattern word (MAYBE), and
    a command given by path (`/bin/rm`) matches a pattern naming it bare (`rm`)."""
    open_ended = bool(pattern) and pattern[-1] == "*"
    fixed = pattern[:-1] if open_ended else pattern
    if len(words) < len(fixed) or (not open_ended and len(words) != len(fixed)):
        return NO
    level = YES
    for n, (word, want) in enumerate(zip(words, fixed, strict=False)):
        if word is None:
            level = MAYBE
        elif word != want and not (n == 0 and "/" not in want and word.rsplit("/", 1)[-1] == want):
            return NO
    return level


def _field_ok(op: dict[str, Any], value: Any) -> bool:
    verb, arg = next(iter(op.items()))
    if verb == "any":
        return True
    if verb == "equals":
        return _same(value, arg)
    if verb == "one_of":
        return any(_same(value, a) for a in arg)
    if verb == "under":
        return isinstance(value, str) and _is_under(value, arg)
    return False


def _same(a: Any, b: Any) -> bool:
    """JSON equality without Python's 1 == True == 1.0 coercions."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _is_under(path: str, directory: str) -> bool:
    """Inside `directory`, with no `..` and no NUL: a lexical check that cannot be walked out of."""
    if "\x00" in path or ".." in path.split("/") or path.startswith("~") != directory.startswith("~"):
        return False
    if posixpath.isabs(directory) != posixpath.isabs(path):
        return False
    base = posixpath.normpath(directory)
    norm = posixpath.normpath(path)
    return norm == base or norm.startswith(base.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class Verdict:
    effect: Effect
    rule: Rule


def decide(rules: Iterable[Rule], call: Call, now: datetime, prepared: Prepared | None = None) -> Verdict | None:
    """The rule that decides this call: deny beats ask beats allow, then the more specific rule.

    A deny rule that matches only through a word known at run time counts as ask: a person decides.
    """
    best: tuple[tuple[int, tuple[int, ...], str], Verdict] | None = None
    for rule in rules:
        if not rule.is_live(now):
            continue
        level = match_level(rule, call, prepared)
        if level == NO:
            continue
        effect = effective_effect(rule, level)
        key = (PRECEDENCE[effect], tuple(-x for x in specificity(rule)), rule.id)
        if best is None or key < best[0]:
            best = (key, Verdict(effect, rule))
    return None if best is None else best[1]
