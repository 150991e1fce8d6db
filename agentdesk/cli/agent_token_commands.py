"""`agentdesk agent-token create|list|revoke`: the identities agents present to the receiver's agent API.

A token is printed once, when it is made (only its hash is kept); give it to the agent with the
receiver's URL, never the store. Creating and revoking are audited writes; listing reads.
"""

from __future__ import annotations

import argparse
import getpass
from datetime import UTC, datetime

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, open_for, say
from agentdesk.store.agents import tokens
from agentdesk.store.persistence.database import Store

DEFAULT_URL = "http://127.0.0.1:4318"


def add_agent_token_parser(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = sub.add_parser("create", parents=[common], help="make a token for an agent; printed once")
    create.add_argument("name", help="the agent identity: recorded as the requester of what it writes")
    create.add_argument("--url", default=DEFAULT_URL,
                        help=f"the receiver's address to print in the instructions (default {DEFAULT_URL})")
    listing = sub.add_parser("list", parents=[common], help="every token: name, id, created, last used, revoked")
    listing.add_argument("--json", action="store_true", help="one JSON array with stable keys")
    revoke = sub.add_parser("revoke", parents=[common], help="refuse a token from now on (401)")
    revoke.add_argument("token", metavar="NAME_OR_ID", help="a token's id, or a name (every active token of it)")


def operator_name(store: Store) -> str:
    """Who made or revoked a token: the database login on PostgreSQL, the OS user on SQLite."""
    login = getattr(store, "login", None)
    if login is not None and getattr(login, "name", None):
        return str(login.name)
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def cmd_agent_token(args: argparse.Namespace) -> int:
    command = args.token_command
    store = open_for(args, "hold agent tokens", write=command != "list", create=command == "create")
    try:
        if command == "create":
            made, token = tokens.create(store, args.name, operator_name(store))
            say(f"Agent token {made.id} for {out.clean(made.name)} (shown once; only its hash is kept):")
            say(token)
            say("Give the agent the receiver's address and this token, never the store:")
            say(f"  AGENTDESK_URL={args.url} AGENTDESK_TOKEN={token} python my_agent.py")
            say("  (AgentDesk.connect() reads both; `agentdesk receive` must be running.)")
        elif command == "revoke":
            for gone in tokens.revoke(store, args.token, operator_name(store)):
                say(f"Revoked {gone.id} ({out.clean(gone.name)}): it is refused from now on.")
        else:
            found = tokens.list_tokens(store)
            if args.json:
                say(out.json_text([token_json(t) for t in found], indent=2))
            elif found:
                say(out.table(["ID", "NAME", "CREATED", "BY", "LAST USED", "REVOKED"],
                              [[t.id, out.clean(t.name, 40), when(t.created_at), out.clean(t.created_by, 20),
                                when(t.last_used_at), when(t.revoked_at)] for t in found]))
            else:
                say("No agent tokens yet (agentdesk agent-token create NAME).")
        return EXIT_OK
    finally:
        store.close()


def when(at: float | None) -> str:
    return "" if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def token_json(t: tokens.AgentToken) -> dict[str, object]:
    return {"id": t.id, "name": t.name, "created_at": t.created_at, "created_by": t.created_by,
            "last_used_at": t.last_used_at, "revoked_at": t.revoked_at, "active": t.active}
