"""The `agentdesk` command line: inspect and control a store from a terminal or a script.

Exit codes are a contract: 0 ok, 2 usage or bad input, 3 conflict (already decided or answered,
expired, stale), 4 not found, 5 store unreadable/locked/unknown or older schema or an unexpected
error, 6 audit log tampered, 7 audit log cannot be checked (no key, or not every key, on this machine),
130 interrupted. Failures print one sentence on stderr, never a traceback (an unexpected
error's traceback goes to a log file, `cli.crash`).

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
import shlex
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from agentdesk.cli import crash
from agentdesk.cli import output as out
from agentdesk.cli.admin_commands import cmd_admin
from agentdesk.cli.agent_token_commands import cmd_agent_token
from agentdesk.cli.analysis_commands import cmd_critical_path, cmd_diff, cmd_search
from agentdesk.cli.ask_commands import cmd_answer, cmd_asks
from agentdesk.cli.audit_commands import cmd_audit, cmd_verify
from agentdesk.cli.control_commands import cmd_control
from agentdesk.cli.display import display_problem
from agentdesk.cli.message_commands import cmd_message, cmd_messages
from agentdesk.cli.notes_commands import cmd_label, cmd_note, cmd_notes
from agentdesk.cli.opening import (
    EXIT_OK,
    EXIT_UNAVAILABLE,
    CommandFailed,
    checked_location,
    location_of,
    open_any,
    read_arguments,
    say,
)
from agentdesk.cli.otel_io import EXIT_INVALID as EXIT_INVALID_OUTPUT
from agentdesk.cli.otel_io import cmd_export, cmd_import
from agentdesk.cli.outfile import check_picture_output
from agentdesk.cli.parser import Handler, parse
from agentdesk.cli.receive import cmd_receive
from agentdesk.cli.rules_commands import cmd_rules
from agentdesk.cli.watch import cmd_watch
from agentdesk.store.errors import InvalidInput, NoStore, PermissionRefused, StoreError
from agentdesk.store.native import native_store, size_on_disk
from agentdesk.store.persistence.database import (
    describe_operational_error,
    is_refusal,
    make_private_dirs,
    own_store,
)
from agentdesk.store.persistence.postgres.tls import connection_encryption
from agentdesk.store.readmodel import Approval, ApprovalStatus, StoreInfo, awaiting_decision, overdue
from agentdesk.store.sim.player import SimEvent, Simulator
from agentdesk.store.source import Source, SourceDescriptor, require_approval_writer
from agentdesk.store.sources import open_source
from agentdesk.store.text.arguments import arguments_hash, inspect_cached, short_hash


# -- commands ------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    # The default location is the app's own data folder, made on first use; a folder the user named is not.
    chosen = args.store is not None or bool(os.environ.get("AGENTDESK_STORE"))
    require_parent_folder(checked_location(args), create=args.parents or not chosen)
    source = open_any(args, write=True, create=True)
    try:
        native_store(source, "be initialised")
        descriptor = source.descriptor
    finally:
        source.close()
    say(f"Store ready at {descriptor.location} (schema {descriptor.schema_version}).")
    return EXIT_OK


def require_parent_folder(location: str, *, create: bool) -> None:
    """A mistyped folder is refused, not quietly made: `init` creates folders only with `--parents`."""
    if "://" in location:
        return  # a database URL: the server decides
    folder = Path(location).expanduser().parent
    if folder.is_dir():
        return
    if not create:
        raise InvalidInput(f"The folder {folder} does not exist; create it first, or run init with --parents.")
    say(f"Creating the folder {folder}.")
    try:
        make_private_dirs(folder)
    except OSError as exc:
        raise CommandFailed(f"Could not create the folder {folder}: {exc.strerror or exc}.", EXIT_UNAVAILABLE) from exc


EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
"""Stopped by Ctrl-C (SIGINT) or by SIGTERM: 128 + the signal's number, as shells report it."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be, so both stop the same way; only the exit code differs."""


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM (`kill`, `timeout`, a service manager) stops the simulation as cleanly as Ctrl-C does,
    so no run is left looking live forever."""
    raise Terminated


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
    stopped_by: int | None = None
    try:
        sim.run()
    except KeyboardInterrupt as exc:
        sim.stop()
        stopped_by = EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        source.close()
    kinds = Counter(event.kind for event in sim.events)
    say(f"Simulation over: {kinds['run_started']} runs started, {kinds['run_finished']} finished, "
        f"{kinds['approval_requested']} approvals requested.")
    if sim.closed_leftovers:
        say(f"Closed {len(sim.closed_leftovers)} run{'s' if len(sim.closed_leftovers) != 1 else ''} left waiting "
            "by agents that are gone.")
    if sim.failures:
        first = sim.failures[0]
        raise CommandFailed(f"The simulation hit {len(sim.failures)} store errors; the first: {first}",
                            EXIT_UNAVAILABLE)
    return EXIT_OK if stopped_by is None else stopped_by


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
    if status == pending:  # the window's count is the same read (`awaiting_decision`)
        return awaiting_decision(source.approvals(pending, limit), now)
    if status == ApprovalStatus.EXPIRED:
        rows = sorted(overdue(source.approvals(pending, limit), now) + source.approvals(ApprovalStatus.EXPIRED, limit),
                      key=lambda a: a.created_at,
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
    say(f"{verb} {result.id} ({out.clean(result.tool_name)}) as {out.clean(result.decider)}{extra}{why}.")
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
        store = own_store(source)
        encryption = connection_encryption(store.engine) if store is not None else None
    finally:
        source.close()
    facts = info_facts(info, descriptor)
    if encryption is not None:  # PostgreSQL: libpq's sslmode=prefer falls back to plain text silently
        facts["connection"] = {"encrypted": encryption.encrypted, "tls_version": encryption.version,
                               "cipher": encryption.cipher, "local_socket": encryption.socket}
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
    if encryption is not None:
        say(f"connection: {encryption.label}. {encryption.sentence}")
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


def require_display(screenshot: str | None = None) -> None:
    """Refuse in one sentence, before Qt starts, where Qt would abort (no display, xcb libraries missing)."""
    if screenshot and not os.environ.get("DISPLAY") and not os.environ.get("QT_QPA_PLATFORM"):
        return  # run_gui renders a screenshot offscreen when there is no display
    problem = display_problem()
    if problem is not None:
        raise CommandFailed(problem, EXIT_UNAVAILABLE)


def cmd_gui(args: argparse.Namespace) -> int:
    if args.screenshot:
        check_picture_output(Path(args.screenshot))  # a folder, a link, a pipe nobody reads: refused
        check_screenshot_folder(args.screenshot)  # and no folder is made for it
    require_display(args.screenshot)
    options: dict[str, Any] = {"size": args.size} if args.size else {}
    return start_window(checked_location(args), screenshot=args.screenshot, view=args.view, select=args.select,
                        allow_writes=args.allow_writes, theme=args.theme, **options)


def check_screenshot_folder(path: str) -> None:
    """Refuse a screenshot whose folder is not there, naming the output (not the store), before Qt starts:
    agentdesk makes no folder it was not asked for (as root it made `/nonexistent/dir`)."""
    folder = Path(path).parent
    if not folder.is_dir():
        raise CommandFailed(f"The output {path} cannot be written: its folder {folder} does not exist.",
                            EXIT_INVALID_OUTPUT)


def cmd_demo(args: argparse.Namespace) -> int:
    """A throwaway store, agents working in it, and the window on top; the store goes with the window
    unless `--keep`."""
    require_display()
    if threading.current_thread() is threading.main_thread():  # a kill before the window is up still cleans up
        signal.signal(signal.SIGTERM, interrupt)
    folder = Path(tempfile.mkdtemp(prefix="agentdesk-demo-"))
    location = str(folder / "agentdesk.sqlite")
    try:
        source = open_source(location, create=True, busy_timeout_s=args.busy_timeout)
        sim = Simulator(native_store(source, "host the demo"), agents=args.agents, seed=args.seed,
                        approval_timeout_s=args.approval_timeout, speed=args.speed, duration_s=args.duration)
        say(f"Demo store: {location}" + ("" if args.keep else " (removed when the window closes; --keep keeps it)"))
        try:
            sim.start()
            return start_window(location, simulator=sim, allow_writes=True, theme=args.theme,
                                select=first_live_run(sim))
        finally:
            sim.stop()
            source.close()
    finally:
        if args.keep:
            say(f"Kept the demo store: {location}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def first_live_run(sim: Simulator, *, timeout_s: float = 1.5, most_s: float = 10.0) -> str | None:
    """The run the demo opens on: a running one whose agent waits for an approval (it stays running until
    the operator decides, so the timeline and the queue show the same work), else, after `timeout_s`, the
    running run with the most tool calls (waiting on, up to `most_s`, while no run has started: a loaded
    machine). The store's showcase run may be a short one that already ended.

    The window waits for this, so the wait is short: at the default speed the first approval comes about 6 s
    in, and a demo whose window took 6 s to appear felt broken; a running run is a fine first view."""
    started = time.monotonic()
    while True:
        events = sim.events
        live: dict[str, int] = {}  # run id -> tool calls so far
        waiting: set[str] = set()
        current: dict[int, str] = {}  # worker -> its running run
        for event in events:
            if event.kind == "run_started" and event.entity_id:
                current[event.worker] = event.entity_id
                live[event.entity_id] = 0
            elif event.kind == "run_finished" and event.entity_id:
                live.pop(event.entity_id, None)
                waiting.discard(event.entity_id)
            elif event.worker in current and current[event.worker] in live:
                run_id = current[event.worker]
                if event.kind == "tool":
                    live[run_id] += 1
                elif event.kind == "approval_requested":
                    waiting.add(run_id)
                elif event.kind == "approval_decided":
                    waiting.discard(run_id)
        if waiting:
            return min(waiting)
        waited = time.monotonic() - started
        if not sim.running or (waited >= timeout_s and live) or waited >= most_s:
            return max(live, key=lambda run_id: live[run_id]) if live else None
        time.sleep(0.05)


HANDLERS: dict[str, Handler] = {
    "init": cmd_init, "simulate": cmd_simulate, "watch": cmd_watch, "approvals": cmd_approvals,
    "approve": cmd_decide, "deny": cmd_decide, "info": cmd_info, "verify": cmd_verify, "demo": cmd_demo,
    "gui": cmd_gui, "rules": cmd_rules, "receive": cmd_receive, "import": cmd_import, "export": cmd_export,
    "admin": cmd_admin, "agent-token": cmd_agent_token, "message": cmd_message, "messages": cmd_messages,
    "search": cmd_search, "critical-path": cmd_critical_path, "diff": cmd_diff,
    "audit": cmd_audit, "note": cmd_note, "label": cmd_label, "notes": cmd_notes,
    "asks": cmd_asks, "answer": cmd_answer,
    "pause": cmd_control, "resume": cmd_control, "stop": cmd_control,
}


# -- entry point ---------------------------------------------------------------------------
def fail(message: str, code: int) -> int:
    print(f"agentdesk: {out.clean(message)}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    crash.printable_streams()
    try:
        args = parse(None if argv is None else list(argv), HANDLERS)
    except SystemExit as exc:  # argparse printed the usage error (exit 2) or the help (exit 0)
        return int(exc.code or 0)
    out.RAW = bool(getattr(args, "raw", False))
    try:
        return int(args.handler(args))
    except CommandFailed as exc:
        return fail(str(exc), exc.code)
    except NoStore as exc:
        given = f" --store {shlex.quote(args.store)}" if getattr(args, "store", None) else ""
        return fail(f"There is no store at {exc.path}; run `agentdesk{given} init` to create one.", exc.exit_code)
    except StoreError as exc:
        return fail(str(exc), exc.exit_code)
    except DBAPIError as exc:
        return fail(describe_operational_error(exc, location_of(args)),
                    PermissionRefused.exit_code if is_refusal(exc) else EXIT_UNAVAILABLE)
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
    except Exception as exc:  # anything unforeseen: one sentence, exit 5, the traceback in a log file
        return fail(crash.unexpected(exc), crash.EXIT_UNEXPECTED)


if __name__ == "__main__":
    sys.exit(main())
