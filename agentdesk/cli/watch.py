"""`agentdesk watch`: every committed change, one line (or one JSON object) each, as it lands.

How a source is followed is `store.native.follow_every_change`'s business: an
agentdesk store through its change log, every event and this process's own too;
another runtime's database through its source's watcher.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Sequence

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, open_any, say
from agentdesk.store.native import follow_every_change
from agentdesk.store.persistence.bus import Change

EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as shells report it."""


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

    stops: list[Callable[[], None]] = []
    try:  # Ctrl-C may land while `--since` replays (printing on this thread) as well as while waiting
        stops.append(follow_every_change(source, show, args.since))
        done.wait(args.timeout)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED  # Ctrl-C: 130, as the README promises (the finally still cleans up)
    finally:
        for stop in stops:
            stop()
        source.close()
    return EXIT_OK
