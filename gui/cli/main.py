"""The `agentdesk` command line: inspect and control a store from a terminal or a script.

Exit codes are a contract: 0 ok, 2 usage or bad input, 3 conflict (already decided,
expired, stale), 4 not found, 5 store unreadable/locked/unknown schema, 6 audit
log tampered, 7 audit log cannot be checked (no key on this machine). Failures
print one sentence on stderr, never a traceback.

Qt is imported only by the `gui` and `demo` commands, so scripts and machines
without a display can use everything else. Commands that only read open the
store read-only and never create it: a mistyped path is an error, not a new
file, and listing never writes (not even to sweep expired approvals).
Another runtime's database (lensagent, stageflow, vgxness, maka) is read in
place through its source; it is written only with `--allow-writes`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from agentdesk.gui.cli import output as out
from agentdesk.gui.cli.audit_commands import cmd_audit, cmd_verify
from agentdesk.gui.cli.opening import (
    EXIT_OK,
    EXIT_UNAVAILABLE,
    CommandFailed,
    location_of,
    open_any,
    read_arguments,
    say,
)
from agentdesk.gui.cli.otel_io import cmd_export, cmd_import
from agentdesk.gui.cli.parser import Handler, parse
from agentdesk.gui.cli.receive import cmd_receive
from agentdesk.gui.cli.rules_commands import cmd_rules
from agentdesk.gui.cli.watch import cmd_watch
from agentdesk.store.database import describe_operational_error
from agentdesk.store.errors import InvalidInput, StoreError
from agentdesk.store.native import native_store, size_on_disk
from agentdesk.store.readmodel import Approval, ApprovalStatus, StoreInfo
from agentdesk.store.sim.player import SimEvent, Simulator
from agentdesk.store.source import Source, SourceDescriptor, require_approval_writer
from agentdesk.store.sources import open_source
from agentdesk.store.text.arguments import arguments_hash, inspect_cached, short_hash


# -- commands ------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    source = open_any(args, write=True, create=True)
    try:
        native_store(source, "be initialised")
        descriptor = source.descriptor
    finally:
        source.close()
    say(f"Store ready at {descriptor.location} (schema {descriptor.schema_version}).")
    return EXIT_OK


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM (`kill`, `timeout`, a service manager) stops the simulation as cleanly as Ctrl-C does,
    so no run is left looking live forever."""
    raise KeyboardInterrupt


def cmd_simulate(args: argparse.Namespace) -> int:
    source = open_any(args, write=True, create=True)
    try:
        store = native_store(source, "host simulated agents")
    except StoreError:
        source.close()
        raise
    lock = threading.Lock()

    def show(event: SimEvent) -> None:
        with lock:
            say(out.sim_event_line(event))

    sim = Simulator(store, agents=args.agents, seed=args.seed, duration_s=args.duration,
                    approval_timeout_s=args.approval_timeout, speed=args.speed, on_event=show)
    say(f"Simulating {args.agents} agents (seed {args.seed}) in {store.display_name}; Ctrl-C stops.")
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, interrupt) if in_main_thread else None
    try:
        sim.run()
    except KeyboardInterrupt:
        sim.stop()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        source.close()
    kinds = Counter(event.kind for event in sim.events)
    say(f"Simulation over: {kinds['run_started']} runs started, {kinds['run_finished']} finished, "
        f"{kinds['approval_requested']} approvals requested.")
    if sim.failures:
        first = sim.failures[0]
        raise CommandFailed(f"The simulation hit {len(sim.failures)} store errors; the first: {first}",
                            EXIT_UNAVAILABLE)
    return EXIT_OK


def cmd_approvals(args: argparse.Namespace) -> int:
    source = open_any(args)
    try:
        rows = select_approvals(source, args.status, args.limit)
    finally:
        source.close()
    now = datetime.now(UTC)
    if args.json:
        say(out.json_text([out.approval_json(a, now) for a in rows], indent=2))
    elif rows:
        say(out.table(out.APPROVAL_HEADERS, [out.approval_cells(a, now) for a in rows]))
    else:
        say(f"No {'' if args.status == 'all' else args.status + ' '}approvals.")
    return EXIT_OK


def select_approvals(source: Source, status: str, limit: int) -> list[Approval]:
    """Filter by the status an operator would see: a pending approval past its deadline counts as expired."""
    now, pending = datetime.now(UTC), ApprovalStatus.PENDING
    if status == pending:
        return [a for a in source.approvals(pending, limit) if not a.is_expired(now)]
    if status == ApprovalStatus.EXPIRED:
        overdue = [a for a in source.approvals(pending, limit) if a.is_expired(now)]
        rows = sorted(overdue + source.approvals(ApprovalStatus.EXPIRED, limit), key=lambda a: a.created_at,
                      reverse=True)
        return rows[:limit]
    return source.approvals(None if status == "all" else ApprovalStatus(status), limit)


def cmd_decide(args: argparse.Namespace) -> int:
    approve = args.command == "approve"
    edited = read_arguments(args.args) if approve and args.args is not None else None
    source = open_any(args, write=True)
    try:
        if approve and edited is None and args.expect_hash is None:
            require_a_look(source.approval(args.id))
        result = require_approval_writer(source).decide(args.id, approve, args.actor, args.reason, edited,
                                                        expected_arguments_hash=args.expect_hash)
    finally:
        source.close()
    verb = "Approved" if approve else "Denied"
    extra = " with edited arguments" if result.edited_arguments else ""
    why = f": {out.clean(result.reason)}" if result.reason else ""
    say(f"{verb} {result.id} ({out.clean(result.tool_name)}) as {out.clean(result.decided_by)}{extra}{why}.")
    return EXIT_OK


def require_a_look(approval: Approval) -> None:
    """The terminal's second confirmation: arguments with hidden characters are approved only with the
    hash of exactly those arguments, which the operator gets by looking at them."""
    inspection = inspect_cached(approval.arguments)
    if inspection.suspicious:
        raise InvalidInput(
            f"The arguments of {approval.id} {inspection.sentence(limit=3)}. Look at them (agentdesk approvals "
            f"--json) and approve exactly those with --expect-hash {short_hash(arguments_hash(approval.arguments))}.")


def cmd_info(args: argparse.Namespace) -> int:
    source = open_any(args)
    try:
        info, descriptor = source.info(), source.descriptor
    finally:
        source.close()
    facts = info_facts(info, descriptor)
    if args.json:
        say(out.json_text(facts, indent=2))
        return EXIT_OK
    foreign_read_only = descriptor.read_only and info.kind != "agentdesk"
    say(f"{info.kind} store at {info.url}" + (" (read-only)" if foreign_read_only else ""))
    size = facts["size_bytes"]
    sized = f"; size: {size:,} bytes" if size is not None else ""
    say(f"schema: {info.schema_version or 'unknown'}{sized}")
    if descriptor.notes:
        say(f"note: {out.clean(descriptor.notes)}")
    width = max((len(label) for label in info.counts), default=0)
    for label, count in info.counts.items():
        say(f"  {label:<{width}}  {count:>12,}")
    return EXIT_OK


def info_facts(info: StoreInfo, descriptor: SourceDescriptor) -> dict[str, object]:
    size = size_on_disk(info.url)
    return {"kind": info.kind, "location": info.url, "schema_version": info.schema_version,
            "size_bytes": size, "notes": descriptor.notes, "counts": info.counts}


def start_window(location: str, **options: Any) -> int:
    """The one hop from the command line into Qt: `gui.window.app` (and PySide6) load only here.

    The import-linter contract "the CLI imports no Qt" ignores exactly this edge.
    """
    from agentdesk.gui.window.app import run_gui

    return int(run_gui(location, **options))


def cmd_gui(args: argparse.Namespace) -> int:
    return start_window(location_of(args), screenshot=args.screenshot, view=args.view, select=args.select,
                        allow_writes=args.allow_writes, theme=args.theme)


def cmd_demo(args: argparse.Namespace) -> int:
    """A throwaway store, agents working in it, and the window on top."""
    location = str(Path(tempfile.mkdtemp(prefix="agentdesk-demo-")) / "agentdesk.sqlite")
    source = open_source(location, create=True, busy_timeout_s=args.busy_timeout)
    sim = Simulator(native_store(source, "host the demo"), agents=args.agents, seed=args.seed,
                    approval_timeout_s=args.approval_timeout, speed=args.speed, duration_s=args.duration)
    say(f"Demo store: {location}")
    try:
        sim.start()
        return start_window(location, simulator=sim, allow_writes=True, theme=args.theme)
    finally:
        sim.stop()
        source.close()


HANDLERS: dict[str, Handler] = {
    "init": cmd_init, "simulate": cmd_simulate, "watch": cmd_watch, "approvals": cmd_approvals,
    "approve": cmd_decide, "deny": cmd_decide, "info": cmd_info, "verify": cmd_verify, "demo": cmd_demo,
    "gui": cmd_gui, "rules": cmd_rules, "receive": cmd_receive, "import": cmd_import, "export": cmd_export,
    "audit": cmd_audit,
}


# -- entry point ---------------------------------------------------------------------------
def fail(message: str, code: int) -> int:
    print(f"agentdesk: {out.clean(message)}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(None if argv is None else list(argv), HANDLERS)
    except SystemExit as exc:  # argparse printed the usage error (exit 2) or the help (exit 0)
        return int(exc.code or 0)
    out.RAW = bool(getattr(args, "raw", False))
    try:
        return int(args.handler(args))
    except CommandFailed as exc:
        return fail(str(exc), exc.code)
    except StoreError as exc:
        return fail(str(exc), exc.exit_code)
    except DBAPIError as exc:
        return fail(describe_operational_error(exc, location_of(args)), EXIT_UNAVAILABLE)
    except (sqlite3.Error, SQLAlchemyError) as exc:
        return fail(f"The store {location_of(args)} could not be used: {exc}.", EXIT_UNAVAILABLE)
    except BrokenPipeError:  # `agentdesk approvals | head`: the reader left; that is not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at interpreter exit
        return EXIT_OK
    except OSError as exc:
        return fail(f"The store {location_of(args)} could not be used: {exc.strerror or exc}.",
                    EXIT_UNAVAILABLE)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
