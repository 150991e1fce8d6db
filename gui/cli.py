"""The `agentdesk` command line: inspect and control a store from a terminal or a script.

Exit codes are a contract: 0 ok, 2 usage or bad input, 3 conflict (already decided,
expired, stale), 4 not found, 5 store unreadable/locked/unknown schema, 6 audit
chain broken. Failures print one sentence on stderr, never a traceback. Qt is
imported only by the `gui` and `demo` commands, so scripts and servers without a
display can use everything else. Commands that only read open the store
read-only and never create it, so a mistyped path is an error, not a new file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from store.bus import Change, ChangeBus
from store.database import (
    Store,
    default_store_location,
    describe_operational_error,
    head_revision,
    open_store,
)
from store.errors import InvalidInput, StoreError
from store.native import NativeSource
from store.readmodel import Approval
from store.sim.player import SimEvent, Simulator
from store.validation import parse_json_arguments
from store.watcher import ChangeWatcher

from . import cli_output as out

EXIT_OK, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 2, 5
STATUSES = ("pending", "approved", "denied", "expired", "all")
VIEWS = ("window", "tree", "timeline", "context", "approvals")


class CommandFailed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# -- helpers -------------------------------------------------------------------------------
def location_of(args: argparse.Namespace) -> str:
    return args.store or default_store_location()


def open_for(args: argparse.Namespace, *, write: bool = False, create: bool = False) -> Store:
    """Readers open read-only and never create; writers open read-write (creating only if asked)."""
    return open_store(location_of(args), create=create, read_only=not write, busy_timeout_s=args.busy_timeout)


def say(text: str) -> None:
    print(text, flush=True)


def read_arguments(value: str) -> str:
    """`--args` text, `@FILE`, or `-` for stdin: a large payload cannot fit in a command line (128 KiB)."""
    if value == "-":
        text = sys.stdin.read()
    elif value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"Cannot read the arguments file {value[1:]}: {exc}.") from exc
    else:
        text = value
    parse_json_arguments(text)
    return text


# -- commands ------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    store = open_for(args, write=True, create=True)
    try:
        say(f"Store ready at {store.display_name} (schema {store.schema_version}).")
    finally:
        store.close()
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    store = open_for(args, write=True, create=True)
    lock = threading.Lock()

    def show(event: SimEvent) -> None:
        with lock:
            say(out.sim_event_line(event))

    sim = Simulator(store, agents=args.agents, seed=args.seed, duration_s=args.duration,
                    approval_timeout_s=args.approval_timeout, speed=args.speed, on_event=show)
    say(f"Simulating {args.agents} agents (seed {args.seed}) in {store.display_name}; Ctrl-C stops.")
    try:
        sim.run()
    except KeyboardInterrupt:
        sim.stop()
    finally:
        store.close()
    if sim.failures:
        raise CommandFailed(f"The simulation hit {len(sim.failures)} store errors; the first: {sim.failures[0]}",
                            EXIT_UNAVAILABLE)
    return EXIT_OK


class VerbatimBus(ChangeBus):
    """`watch` prints every change-log row, so it skips the bus's coalescing meant for views."""

    def publish(self, changes: Sequence[Change]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback(list(changes))


def cmd_watch(args: argparse.Namespace) -> int:
    store = open_for(args)
    done, printed = threading.Event(), [0]
    render: Callable[[Change], str] = out.change_json if args.json else out.change_line

    def show(batch: Sequence[Change]) -> None:
        for change in batch:
            if done.is_set():
                return
            try:
                say(render(change))
            except BrokenPipeError:
                done.set()
                return
            printed[0] += 1
            if args.count is not None and printed[0] >= args.count:
                done.set()

    bus = VerbatimBus()
    bus.subscribe(show)
    watcher = ChangeWatcher(store, include_own=True, bus=bus, poll_interval_s=0.05)
    try:
        watcher.start(from_seq=args.since)
        done.wait(args.timeout)
    except KeyboardInterrupt:
        pass
    finally:
        watcher.stop()
        store.close()
    return EXIT_OK


def cmd_approvals(args: argparse.Namespace) -> int:
    store = open_for(args)
    try:
        rows = select_approvals(NativeSource(store), args.status, args.limit)
    finally:
        store.close()
    now = datetime.now(UTC)
    if args.json:
        say(json.dumps([out.approval_json(a, now) for a in rows], ensure_ascii=False, indent=2))
    elif rows:
        say(out.table(out.APPROVAL_HEADERS, [out.approval_cells(a, now) for a in rows]))
    else:
        say(f"No {'' if args.status == 'all' else args.status + ' '}approvals.")
    return EXIT_OK


def select_approvals(source: NativeSource, status: str, limit: int) -> list[Approval]:
    """Filter by the status an operator would see: a pending approval past its deadline counts as expired."""
    now = datetime.now(UTC)
    if status == "pending":
        return [a for a in source.approvals("pending", limit) if not a.is_expired(now)]
    if status == "expired":
        overdue = [a for a in source.approvals("pending", limit) if a.is_expired(now)]
        rows = sorted(overdue + source.approvals("expired", limit), key=lambda a: a.created_at, reverse=True)
        return rows[:limit]
    return source.approvals(status, limit)


def cmd_decide(args: argparse.Namespace) -> int:
    approve = args.command == "approve"
    edited = read_arguments(args.args) if approve and args.args is not None else None
    store = open_for(args, write=True)
    try:
        result = NativeSource(store).decide(args.id, approve, args.actor, args.reason, edited)
    finally:
        store.close()
    verb = "Approved" if approve else "Denied"
    extra = " with edited arguments" if result.edited_arguments else ""
    why = f": {out.clean(result.reason)}" if result.reason else ""
    say(f"{verb} {result.id} ({out.clean(result.tool_name)}) as {out.clean(result.decided_by)}{extra}{why}.")
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    store = open_for(args)
    try:
        info = store.info()
        path = store.path
    finally:
        store.close()
    size = path.stat().st_size if path is not None and path.exists() else None
    head = head_revision()
    facts = {"kind": info.kind, "location": info.url, "schema_version": info.schema_version,
             "schema_head": head, "up_to_date": info.schema_version == head, "size_bytes": size,
             "counts": info.counts}
    if args.json:
        say(json.dumps(facts, indent=2))
        return EXIT_OK
    schema = f"{info.schema_version}" + ("" if facts["up_to_date"] else f" (this agentdesk upgrades to {head})")
    say(f"{info.kind} store at {info.url}")
    say(f"schema: {schema}" + (f"; size: {size:,} bytes" if size is not None else ""))
    for label, count in info.counts.items():
        say(f"  {label:<18} {count:>12,}")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    store = open_for(args)
    try:
        report = NativeSource(store).verify()
    finally:
        store.close()
    if args.json:
        say(json.dumps({"ok": report.ok, "records": report.records, "broken_seq": report.broken_seq,
                        "reason": report.reason}))
    if not report.ok:
        raise CommandFailed(f"The audit chain is broken at record {report.broken_seq}: {report.reason} "
                            f"({report.records} records before it verify).", 6)
    if not args.json:
        say(f"Audit chain intact: {report.records:,} records verified.")
    return EXIT_OK


def gui_available() -> bool:
    return importlib.util.find_spec("gui.app") is not None


def cmd_gui(args: argparse.Namespace) -> int:
    open_for(args).close()  # a clear exit 5 for a bad store before any window opens
    if not gui_available():
        raise CommandFailed("The window is not available in this build (gui.app is missing).", 1)
    from gui.app import run_gui  # Qt is imported here and only here

    return int(run_gui(location_of(args), screenshot=args.screenshot, view=args.view, select=args.select,
                       allow_writes=args.allow_writes))


def cmd_demo(args: argparse.Namespace) -> int:
    """A throwaway store, agents working in it, and the window on top (or `watch` output without one)."""
    folder = Path(tempfile.mkdtemp(prefix="agentdesk-demo-"))
    location = str(folder / "agentdesk.sqlite")
    store = open_store(location, create=True, busy_timeout_s=args.busy_timeout)
    sim = Simulator(store, agents=args.agents, seed=args.seed, approval_timeout_s=args.approval_timeout,
                    speed=args.speed, duration_s=args.duration)
    say(f"Demo store: {location}")
    try:
        sim.start()
        if gui_available():
            from gui.app import run_gui  # Qt is imported here and only here

            return int(run_gui(location, simulator=sim, allow_writes=True))
        # Fallback while gui.app does not exist yet: show the live change feed instead of a window.
        say("(no window in this build: showing the change feed; Ctrl-C stops)")
        watch_args = argparse.Namespace(store=location, busy_timeout=args.busy_timeout, json=False,
                                        count=None, timeout=args.duration, since=None)
        return cmd_watch(watch_args)
    finally:
        sim.stop()
        store.close()


# -- entry point ---------------------------------------------------------------------------
def fail(message: str, code: int) -> int:
    print(f"agentdesk: {out.clean(message)}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage (exit 2) or help (exit 0)
        return int(exc.code or 0)
    args.store = getattr(args, "store", None)
    args.busy_timeout = getattr(args, "busy_timeout", 5.0)
    try:
        return int(args.handler(args))
    except CommandFailed as exc:
        return fail(str(exc), exc.code)
    except StoreError as exc:
        return fail(str(exc), exc.exit_code)
    except DBAPIError as exc:
        return fail(describe_operational_error(exc, args.store or default_store_location()), EXIT_UNAVAILABLE)
    except (sqlite3.Error, SQLAlchemyError) as exc:
        return fail(f"The store {location_of(args)} could not be used: {exc}.", EXIT_UNAVAILABLE)
    except OSError as exc:
        return fail(f"The store {location_of(args)} could not be used: {exc.strerror or exc}.", EXIT_UNAVAILABLE)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
