"""`agentdesk asks` and `agentdesk answer`: an agent's questions from a terminal.

`asks` lists them (pending by default; a pending one past its deadline shows as expired). `answer ID TEXT`
(or `--option N`, the Nth of its options, from 1) records the answer exactly once, under `--as NAME`
(also spelt `--actor`, like `approve`). Exit codes, as for decisions: 0 answered, 2 bad input (empty or
oversize answer, no such option, a source that cannot answer, a question shown read-only), 3 conflict
(already answered or cancelled: the sentence names by whom and when; or expired: it says when), 4 no
question with that id, 5 another runtime's database opened without --allow-writes.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, open_any, positive, say
from agentdesk.store.asks.protocol import require_ask_reader, require_ask_writer
from agentdesk.store.asks.reads import STATUSES, Ask
from agentdesk.store.errors import InvalidInput
from agentdesk.store.text.arguments import inspect_cached

HEADERS = ["ID", "QUESTION", "OPTIONS", "AGENT", "RUN", "AGE", "EXPIRES IN", "STATUS", "ANSWERED BY"]


def add_ask_parsers(command: Any) -> None:
    p = command("asks", "list agents' questions (newest first)")
    p.add_argument("--status", choices=(*STATUSES, "all"), default="pending",
                   help="which questions to list (default pending; expired includes overdue pending ones)")
    p.add_argument("--json", action="store_true", help="one JSON array with stable keys")
    p.add_argument("--raw", action="store_true", help="print agent text byte for byte (hidden characters are "
                                                      "otherwise shown as marks like ⟨U+202E⟩)")
    p.add_argument("--limit", type=positive(int), default=1000, help="list at most this many (default 1000)")
    p = command("answer", "answer an agent's pending question")
    p.add_argument("id", help="the question's id (`agentdesk asks` lists them)")
    p.add_argument("text", nargs="?", help="the answer (or use --option)")
    p.add_argument("--option", type=positive(int), metavar="N", help="answer with the question's Nth option (from 1)")
    p.add_argument("--as", "--actor", dest="actor", required=True,
                   help="your name, recorded with the answer and in the audit log")


def shown_status(ask: Ask, now: datetime) -> str:
    return "expired" if ask.pending and ask.is_expired(now) else ask.status


def ask_json(ask: Ask, now: datetime) -> dict[str, Any]:
    """The stable JSON shape of one question (scripts depend on these keys)."""
    return {"id": ask.id, "status": shown_status(ask, now), "question": ask.question, "options": list(ask.options),
            "agent_id": ask.agent_id, "agent": ask.agent_name, "project": ask.project_name, "run_id": ask.run_id,
            "created_at": out.iso(ask.created_at), "expires_at": out.iso(ask.expires_at),
            "answered_at": out.iso(ask.answered_at), "answered_by": ask.answered_by,
            "answered_login": ask.answered_login, "answer": ask.answer, "reason": ask.reason,
            "revision": ask.revision, "source": ask.source, "read_only": ask.read_only,
            "hidden": inspect_cached(ask.question).sentence()}


def ask_cells(ask: Ask, now: datetime) -> list[str]:
    status = shown_status(ask, now)
    expires = "-"
    if status == "pending":
        expires = "never" if ask.expires_at is None else out.span_of((ask.expires_at - now).total_seconds())
    warn = "⚠ " if inspect_cached(ask.question).suspicious else ""
    options = " | ".join(f"{n}. {o}" for n, o in enumerate(ask.options, 1)) or "-"
    return [out.clean(ask.id), warn + out.clean(ask.question, 48), out.clean(options, 32),
            out.clean(ask.agent_name, 20), out.clean(ask.run_id, 24),
            out.span_of((now - ask.created_at).total_seconds()), expires,
            status + (" (read-only)" if ask.read_only and status == "pending" else ""),
            out.clean(ask.answered_by or "-", 24)]


def select_asks(found: list[Ask], status: str, now: datetime) -> list[Ask]:
    return [a for a in found if status == "all" or shown_status(a, now) == status]


def cmd_asks(args: argparse.Namespace) -> int:
    source = open_any(args)
    try:
        reader = require_ask_reader(source)
        rows = reader.asks(pending_only=args.status == "pending", limit=args.limit)
    finally:
        source.close()
    now = datetime.now(UTC)
    rows = select_asks(rows, args.status, now)
    if args.json:
        say(out.json_text([ask_json(a, now) for a in rows], indent=2))
    elif rows:
        say(out.table(HEADERS, [ask_cells(a, now) for a in rows]))
    else:
        say(f"No {'' if args.status == 'all' else args.status + ' '}questions.")
    return EXIT_OK


def cmd_answer(args: argparse.Namespace) -> int:
    if (args.text is None) == (args.option is None):
        raise InvalidInput("Give the answer as TEXT or pick one of the question's options with --option N, "
                           "not both and not neither.")
    source = open_any(args, write=True)
    try:
        asked = require_ask_reader(source).ask(args.id)
        if asked.read_only:
            raise InvalidInput(f"Question {asked.id} cannot be answered here: {asked.read_only}")
        text = args.text
        if args.option is not None:
            if not asked.options:
                raise InvalidInput(f"Question {asked.id} offers no options; answer with TEXT.")
            if args.option > len(asked.options):
                raise InvalidInput(f"Question {asked.id} has {len(asked.options)} options; "
                                   f"--option {args.option} is not one of them.")
            text = asked.options[args.option - 1]
        done = require_ask_writer(source).answer_ask(asked.id, text, args.actor)
    finally:
        source.close()
    say(f"Answered {done.id} as {out.clean(done.answered_by)}: {out.clean(done.answer, 80)}.")
    return EXIT_OK
