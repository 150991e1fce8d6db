"""What rules see of one command argument: parsed once, within a size and time budget, failing closed.

`analyse(value)` returns a `CommandView`:

- `allow`: the simple commands an allow rule may vouch for, or None. They are only set when two
  independent parsers agree word for word: our strict lexer (`lexer.strict_commands`, which refuses
  anything it cannot prove is plain words) and bashlex (`shell.simple_commands`). Either refusing,
  or the two disagreeing, leaves `allow` None and `why_not` says why: a person decides.
- `deny`: every command the text might run, over-approximated (`lexer.deny_candidates`, plus what
  bashlex found): substitutions, `$'…'`, brace expansion, wrappers and `sh -c` scripts included.
  Deny and ask rules look at these.
- `readable`: False when the command is longer than `MAX_COMMAND_CHARS` or parsing it ran past
  `PARSE_BUDGET_S`: then no shell rule of any effect decides the call, a person does.

`request_approval` analyses the arguments before its write transaction (`prepare.prepare_request`),
so no parse ever runs while the store's write lock is held.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from agentdesk.store.rules.lexer import (
    Budget,
    OverBudget,
    Refused,
    Words,
    argv_candidates,
    deny_candidates,
    strict_commands,
)
from agentdesk.store.rules.shell import load_parser, simple_commands

MAX_COMMAND_CHARS = 8_192
"""A longer command is not parsed at all: no shell rule matches it, a person decides."""
ALLOW_MAX_CHARS = 1_024
"""A longer command is never allowed by a shell rule (bashlex, the second parser, costs ~5 ms a KiB)."""
PARSE_BUDGET_S = 0.02
"""CPU time to analyse one command (both lexers and bashlex); past it the command is unreadable."""
CACHE_SIZE = 4_096


@dataclass(frozen=True, slots=True)
class CommandView:
    allow: tuple[Words, ...] | None
    why_not: str
    deny: tuple[Words, ...]
    readable: bool = True

    @property
    def vouchable(self) -> bool:
        return self.readable and self.allow is not None


def unreadable(why: str) -> CommandView:
    return CommandView(None, why, (), readable=False)


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def analyse(value: Any, budget_s: float | None = None) -> CommandView:
    """The view rules take of a command argument (a string, or an argv list), within `budget_s` of CPU
    time (default `PARSE_BUDGET_S`)."""
    if budget_s is None:
        budget_s = PARSE_BUDGET_S
    if isinstance(value, str):
        if len(value) > MAX_COMMAND_CHARS:
            return unreadable(f"the command is longer than {MAX_COMMAND_CHARS:,} characters")
        cached = _CACHE.get(value)
        if cached is not None:
            return cached
        load_parser()
        view = _script(value, Budget.of(budget_s))
        if view.readable:  # an over-budget result is not kept: the next request tries again
            with _CACHE_LOCK:
                if len(_CACHE) >= CACHE_SIZE:
                    _CACHE.pop(next(iter(_CACHE)))
                _CACHE[value] = view
        return view
    if not isinstance(value, list) or not value or not all(isinstance(w, str) for w in value):
        return CommandView(None, "the command is not a string or a list of strings", ())
    if sum(len(w) for w in value) > MAX_COMMAND_CHARS:
        return unreadable(f"the command is longer than {MAX_COMMAND_CHARS:,} characters")
    budget = Budget.of(budget_s)
    try:
        around = tuple(argv_candidates(value, budget))
    except OverBudget as exc:
        return unreadable(str(exc))
    if len(value) == 3 and value[0].rsplit("/", 1)[-1] in ("sh", "bash", "zsh", "dash") \
            and value[1] in ("-c", "-lc"):
        inner = analyse(value[2], budget_s)
        return CommandView(inner.allow, inner.why_not, inner.deny + around, inner.readable)
    if any("\x00" in w for w in value):
        return CommandView(None, "the command contains a NUL character", around)
    return CommandView((tuple(value),), "", around)


_CACHE: dict[str, CommandView] = {}
_CACHE_LOCK = threading.Lock()


def _script(text: str, budget: Budget) -> CommandView:
    if not text.strip():
        return CommandView(None, "the command is empty", ())
    try:
        deny = deny_candidates(text, budget)
    except OverBudget as exc:
        return unreadable(str(exc))
    except RecursionError:
        return unreadable("the command is nested too deeply")
    try:
        strict = strict_commands(text, budget)
    except Refused as exc:
        return CommandView(None, str(exc), tuple(deny))
    except OverBudget as exc:
        return unreadable(str(exc))
    if len(text) > ALLOW_MAX_CHARS:
        return CommandView(None, f"an allow rule vouches only for commands of at most {ALLOW_MAX_CHARS:,} "
                                 "characters", tuple(deny))
    parsed = simple_commands(text)
    if budget.spent:
        return unreadable("the command took too long to parse")
    deny.extend(c.words for c in parsed.commands)
    theirs = [c.words for c in parsed.commands]
    if not (parsed.parsed and parsed.plain) or any(c.redirects for c in parsed.commands) \
            or theirs != [c.literal for c in strict]:
        return CommandView(None, "the two shell parsers disagree about what it runs", tuple(deny))
    return CommandView(tuple(c.words for c in strict), "", tuple(deny))
