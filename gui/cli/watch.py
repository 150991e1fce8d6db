"""`agentdesk watch`: every committed change, one line (or one JSON object) each, as it lands.

Native stores are followed through the change log with a watcher that includes
this process's own writes and a bus that does not coalesce (a view wants the
latest state; a log wants every event). Other runtimes' databases use their
source's own watcher.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Sequence

from agentdesk.gui.cli import output as out
from agentdesk.gui.cli.opening import EXIT_OK, AnySource, open_any, say
from agentdesk.store.bus import Change, ChangeBus
from agentdesk.store.native import NativeSource
from agentdesk.store.watcher import ChangeWatcher


class VerbatimBus(ChangeBus):
    """`watch` prints every change-log row, so it skips the coalescing the bus does for views."""

    def publish(self, changes: Sequence[Change]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback(list(changes))


def cmd_watch(args: argparse.Namespace) -> int:
    source = open_any(args)
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

    stop_watching, replay = start_watching(source, show, args.since)
    try:  # Ctrl-C during the replay (which prints on this thread) ends as cleanly as during the wait
        replay()
        done.wait(args.timeout)
    except KeyboardInterrupt:
        pass
    finally:
        stop_watching()
        source.close()
    return EXIT_OK


def start_watching(source: AnySource, show: Callable[[Sequence[Change]], None],
                   since: int | None) -> tuple[Callable[[], None], Callable[[], object]]:
    """Native stores: a watcher that reports every change, ours included; others: the source's own.
    Returns how to stop, and the replay of the changes after `since` to run now (an idle store would
    not move data_version to trigger a poll)."""
    if isinstance(source, NativeSource):
        bus = VerbatimBus()
        bus.subscribe(show)
        watcher = ChangeWatcher(source.store, include_own=True, bus=bus, poll_interval_s=0.05)
        watcher.start(from_seq=since)
        return watcher.stop, (watcher.poll_once if since is not None else lambda: None)
    source.bus.subscribe(show)
    source.watch()
    return (lambda: None), (lambda: None)  # the source's close() stops its watcher
