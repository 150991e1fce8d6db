"""Analysing a call's command arguments before `request_approval` takes the write lock.

Parsing a shell command is the one expensive step of applying rules, and an agent
chooses the command: done inside the write transaction (BEGIN IMMEDIATE on
SQLite), a hostile command held every writer for seconds. So the runtime reads
the live rules for the tool first (a plain read), analyses each argument a shell
matcher names once — not once per rule — within `command.PARSE_BUDGET_S`, and
hands the views to `apply_rules` inside the transaction. A rule written in
between that names another argument finds no view and does not match: a person
decides that call.
"""

from __future__ import annotations

import time
from typing import Any

from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.command import CommandView, analyse
from agentdesk.store.rules.commands import live_rules_for
from agentdesk.store.rules.matching import decoded_arguments


def shell_fields(rules: list[Any]) -> set[str]:
    return {str(r.matcher.get("field")) for r in rules if r.matcher.get("kind") == "shell"}


def prepare_request(store: Store, tool: str, arguments: str) -> dict[str, CommandView]:
    """The views of every argument a live shell rule for `tool` names (empty when no such rule)."""
    with store.reading() as session:
        rules = live_rules_for(session, tool, time.time())
    return views_for(rules, arguments)


def views_for(rules: list[Any], arguments: str) -> dict[str, CommandView]:
    """The views of every argument a shell rule among `rules` names: the same analysis wherever rules are
    applied (inside `request_approval`, and by an operator's applier on PostgreSQL, store/rules/applier.py)."""
    fields = shell_fields(rules)
    if not fields:
        return {}
    args = decoded_arguments(arguments)
    if args is None:
        return {}
    return {name: analyse(args[name]) for name in fields if name in args}
