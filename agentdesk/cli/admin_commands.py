"""`agentdesk admin role grant|list` and `agentdesk admin prune`: a team store's upkeep.

Roles exist only on PostgreSQL (SQLite has one user, exit 2 there); the database
itself decides whether the login running the command may grant or prune, and a
refusal is one sentence (exit 5).
"""

from __future__ import annotations

import argparse
import json

from agentdesk.cli import output as out
from agentdesk.cli.backup_commands import add_backup_parsers, cmd_backup, cmd_rebase, cmd_restore
from agentdesk.cli.opening import EXIT_OK, open_for, positive, say
from agentdesk.store.changes.maintenance import DEFAULT_KEEP_SECONDS, prune_change_log
from agentdesk.store.ingest.staging import clean_stale
from agentdesk.store.levels import grant_level, list_levels
from agentdesk.store.persistence.postgres.roles import LEVELS

DAY_S = 24 * 3600.0


def add_admin_parser(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="admin_command", required=True, metavar="ACTION")
    role = sub.add_parser("role", parents=[common], help="PostgreSQL logins and their agentdesk level")
    roles = role.add_subparsers(dest="role_command", required=True, metavar="ACTION")
    grant = roles.add_parser("grant", parents=[common], help="make a login an agent, viewer, operator or admin")
    grant.add_argument("login", help="an existing PostgreSQL login (CREATE ROLE name LOGIN PASSWORD ...)")
    grant.add_argument("level", choices=LEVELS,
                       help="agent (a runtime's writes), viewer (read), operator (decide, edit), admin (rules, upkeep)")
    listing = roles.add_parser("list", parents=[common], help="every login with an agentdesk level")
    listing.add_argument("--json", action="store_true", help="one JSON list of logins and levels")
    prune = sub.add_parser("prune", parents=[common], help="delete change-log rows every watcher has read, and "
                           "imports abandoned mid-trace")
    prune.add_argument("--keep-days", type=positive(float, most=36_500), metavar="N",
                       default=DEFAULT_KEEP_SECONDS / DAY_S,
                       help=f"keep this many days of changes (default {DEFAULT_KEEP_SECONDS / DAY_S:g}); the newest "
                            "change always stays")
    add_backup_parsers(sub, common)


BACKUP_COMMANDS = {"backup": cmd_backup, "restore": cmd_restore, "rebase-anchors": cmd_rebase}


def cmd_admin(args: argparse.Namespace) -> int:
    if args.admin_command in BACKUP_COMMANDS:
        return BACKUP_COMMANDS[args.admin_command](args)
    store = open_for(args, "manage roles and upkeep", write=args.admin_command == "prune"
                     or getattr(args, "role_command", "") == "grant")
    try:
        if args.admin_command == "prune":
            deleted = prune_change_log(store, keep_seconds=args.keep_days * DAY_S, keep_rows=1,
                                       actor=store.login.name if store.login else "agentdesk")
            abandoned = clean_stale(store)  # imports cancelled or killed mid-trace, idle for STALE_S
            left = (f" Removed {abandoned} abandoned partial import{'s' if abandoned != 1 else ''}."
                    if abandoned else "")
            say(f"Pruned {deleted} change-log row{'s' if deleted != 1 else ''} older than {args.keep_days:g} days."
                + left)
        elif args.role_command == "grant":
            grant_level(store, args.login, args.level)
            say(f"{out.clean(args.login)} is now an agentdesk {args.level}.")
        else:
            logins = list_levels(store)
            if args.json:
                say(json.dumps([{"login": login, "level": level} for login, level in logins]))
            else:
                say(out.table(["LOGIN", "LEVEL"], [[out.clean(login), level] for login, level in logins])
                    if logins else "No login holds an agentdesk level yet.")
        return EXIT_OK
    finally:
        store.close()
