"""`agentdesk message AGENT_ID TEXT`, `agentdesk message --cancel MSG_ID` and `agentdesk messages`.

A message waits (pending) until the agent's next model call takes it into its context; until then it can be
cancelled. Sending and cancelling are audited operator writes on agentdesk's own store; listing reads.
Exit codes: 0 ok, 2 usage or invalid input (empty, over 1 MB) or a runtime with no message queue, 3 conflict
(the agent finished; the message was already delivered or cancelled), 4 no such agent or message, 5 store
unavailable or another runtime's database opened without --allow-writes.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import UTC, datetime

from agentdesk.cli import output as out
from agentdesk.cli.agent_token_commands import operator_name
from agentdesk.cli.opening import EXIT_OK, open_any, say
from agentdesk.store.errors import InvalidInput, ReadOnlyStore, Unsupported
from agentdesk.store.messages.desk import message_desk, messaging_refusal, why_no_messages
from agentdesk.store.messages.reads import Message, pending_messages
from agentdesk.store.persistence.database import own_store

PREVIEW_CHARS = 60


def message_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("agent", nargs="?", metavar="AGENT_ID", help="the agent to send the message to")
    p.add_argument("text", nargs="?", metavar="TEXT",
                   help="the message (<= 1 MB), or - to read it from stdin; the agent reads it at its next model call")
    p.add_argument("--cancel", metavar="MSG_ID", help="cancel this pending message instead of sending one")
    p.add_argument("--actor", help="who sends or cancels it (default: the database login, else the OS user)")


def messages_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", metavar="AGENT_ID", help="only this agent's pending messages")
    p.add_argument("--json", action="store_true", help="one JSON array with stable keys")


def cmd_message(args: argparse.Namespace) -> int:
    if args.cancel is not None and (args.agent is not None or args.text is not None):
        raise InvalidInput("Give either AGENT_ID TEXT to send a message or --cancel MSG_ID, not both.")
    if args.cancel is None and (args.agent is None or args.text is None):
        raise InvalidInput("Give the agent's id and the message: agentdesk message AGENT_ID TEXT.")
    text = sys.stdin.read() if args.text == "-" else args.text
    source = open_any(args, write=True)
    try:
        refusal = messaging_refusal(source)
        desk = message_desk(source)
        if desk is None:
            raise Unsupported(why_no_messages(source))
        if refusal is not None:  # a lensagent database opened without --allow-writes, as `approve` says
            raise ReadOnlyStore(refusal)
        store = own_store(source)
        actor = args.actor or (operator_name(store) if store is not None else os_user())
        if args.cancel is not None:
            desk.cancel(args.cancel, actor)
            say(f"Cancelled {args.cancel}: the agent will not see it.")
        else:
            say(desk.send(args.agent, text, actor))
        return EXIT_OK
    finally:
        source.close()


def cmd_messages(args: argparse.Namespace) -> int:
    source = open_any(args)
    try:
        store, desk = own_store(source), message_desk(source)
        if store is not None:
            found = pending_messages(store, args.agent)
        elif desk is None:
            raise Unsupported(why_no_messages(source))
        elif args.agent is None:
            raise InvalidInput(f"Name the agent (--agent AGENT_ID): a {source.descriptor.kind} database is listed "
                               "one agent at a time.")
        else:
            found = desk.pending(args.agent)
    finally:
        source.close()
    if args.json:
        say(out.json_text([message_json(m) for m in found], indent=2))
    elif found:
        say(out.table(["ID", "AGENT", "QUEUED", "BY", "MESSAGE"],
                      [[m.id, m.agent_id, when(m.created_at), out.clean(m.created_by, 20),
                        out.clean(m.content.replace("\n", " "), PREVIEW_CHARS)] for m in found]))
    else:
        say("No pending messages.")
    return EXIT_OK


def os_user() -> str:
    """Who writes into another runtime's database: the OS user (it has no logins of ours)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def message_json(m: Message) -> dict[str, object]:
    return {"id": m.id, "agent_id": m.agent_id, "session_id": m.session_id, "status": m.status,
            "content": m.content, "created_at": m.created_at, "created_by": m.created_by}
