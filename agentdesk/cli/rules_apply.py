"""`agentdesk rules apply [--follow]`: standing rules for agent logins on PostgreSQL, for teams with no window open.

An agent login's requests are ruled on by an operator's process, never the agent's own (store/rules/applier.py):
the window does it while an operator or admin has it open; this command does it from a terminal or a service.
Without `--follow` it rules on every request waiting now and ends; with it, it keeps going, woken by the change
bus (LISTEN), until Ctrl-C or `--timeout`.

Exit codes: 0 done (or `--timeout` reached); 2 this store has no applier (SQLite: rules are applied as each
request is made) or the login is below operator; 5 the store cannot be opened; 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, CommandFailed, open_any, positive, say
from agentdesk.store.errors import InvalidInput, PermissionRefused, ServerUnreachable, Unsupported
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import Change
from agentdesk.store.rules.applier import DECIDED, Applied, applier_refusal, apply_pending, follow, wakes

EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as shells report it (and as `agentdesk watch` exits)."""


def add_apply_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                     common: argparse.ArgumentParser) -> None:
    apply = sub.add_parser("apply", parents=[common],
                           help="PostgreSQL: decide agent logins' waiting requests by the standing rules "
                                "(as an operator or admin)")
    apply.add_argument("--follow", action="store_true",
                       help="keep going: rule on each new request as it arrives, until Ctrl-C")
    apply.add_argument("--timeout", type=positive(float), metavar="SECONDS", help="with --follow: stop after this")


def line(applied: Applied) -> str:
    """One request's outcome; the tool name is agent text, so it is cleaned."""
    tool = out.clean(applied.tool)
    if applied.outcome in DECIDED:
        return f"{applied.approval_id} ({tool}): {applied.outcome} by rule {applied.rule_id}"
    if applied.outcome == "ask":
        return f"{applied.approval_id} ({tool}): left for a person (ask rule {applied.rule_id})"
    if applied.outcome == "none":
        return f"{applied.approval_id} ({tool}): left for a person (no rule matches)"
    if applied.outcome == "lost":
        return f"{applied.approval_id} ({tool}): decided or expired before the rule could decide it"
    if applied.outcome == "rule changed":
        return f"{applied.approval_id} ({tool}): rule {applied.rule_id} changed meanwhile; looked at again next"
    return f"{applied.approval_id} ({tool}): {applied.outcome}"


def summary(applied: Sequence[Applied]) -> str:
    decided = sum(a.outcome in DECIDED for a in applied)
    waiting = sum(a.outcome in ("ask", "none") for a in applied)
    if not applied:
        return "No request is waiting for the rules."
    return (f"Looked at {len(applied)} request{'s' * (len(applied) != 1)}: {decided} decided by rule, "
            f"{waiting} left for a person.")


def cmd_rules_apply(args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.follow:
        raise InvalidInput("--timeout goes with --follow.")
    source = open_any(args, write=True)
    try:
        if not isinstance(source, NativeSource):
            raise CommandFailed(f"Rules live in agentdesk stores; this is a {source.descriptor.kind} database.",
                                InvalidInput.exit_code)
        refused = applier_refusal(source.store)
        if refused is not None:
            raise (Unsupported if not source.store.is_postgres else PermissionRefused)(refused)
        if not args.follow:
            applied = apply_pending(source.store)
            for found in applied:
                say(line(found))
            say(summary(applied))
            return EXIT_OK
        return _follow(source, args.timeout)
    finally:
        source.close()


def _follow(source: NativeSource, timeout: float | None) -> int:
    wake, stop = threading.Event(), threading.Event()

    def heard(batch: Sequence[Change]) -> None:
        if any(wakes(change) for change in batch):
            wake.set()

    def outage(_exc: ServerUnreachable) -> None:
        source.store.outage.lost()  # the one line, once per outage; the next pass that works says it is back

    def report(applied: Sequence[Applied]) -> None:
        for found in applied:
            say(line(found))

    source.bus.subscribe(heard)
    source.watch()
    say(f"Applying standing rules to agent logins' requests on {out.clean(source.store.display_name)}, as "
        f"{out.clean(source.store.login.name if source.store.login else 'this login')}; Ctrl-C stops.")
    failed: list[BaseException] = []

    def run() -> None:
        try:
            follow(source.store, wake, stop, report, on_outage=outage, on_pass=source.store.outage.back)
        except BaseException as exc:  # e.g. the login lost its level: said in the main thread, one sentence
            failed.append(exc)

    worker = threading.Thread(target=run, name="agentdesk-rule-applier", daemon=True)
    worker.start()
    try:
        worker.join(timeout)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        stop.set()
        wake.set()
        worker.join(10)
    if failed:
        raise failed[0]
    return EXIT_OK
