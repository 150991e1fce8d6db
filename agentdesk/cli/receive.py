"""`agentdesk receive`: an OTLP/HTTP receiver writing live spans into the store until Ctrl-C.

The counters are printed when they change (at most every `--every` seconds) and
once more on exit, so a terminal shows at a glance whether spans arrive and
whether any were refused (429 + Retry-After: the exporter sends them again).
The receiver (and aiohttp) is imported only when this command runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, open_for, positive, say

if TYPE_CHECKING:  # agentdesk.store.ingest (protobuf, aiohttp) loads only when `receive` runs
    from agentdesk.store.ingest.receiver_stats import ReceiverCounters
    from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread

TOKEN_ENV = "AGENTDESK_RECEIVER_TOKEN"


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a port number: {text}") from exc
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, not {text}")
    return value


def receive_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only)")
    p.add_argument("--port", type=port_number, default=4318,
                   help="port (default 4318, the OTLP/HTTP port; 0 picks a free one)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host (needs --token too)")
    p.add_argument("--token", help=f"require this bearer token (default ${TOKEN_ENV}, which other users "
                                   "cannot read in the process list)")
    p.add_argument("--project", metavar="NAME", help="project for spans whose resource names none")
    p.add_argument("--max-body-mb", type=positive(float, most=4096), default=20.0, metavar="MB",
                   help="body limit, compressed or not (default 20)")
    p.add_argument("--spool-mb", type=positive(float, most=1_048_576), default=64.0, metavar="MB",
                   help="request bodies acknowledged but not yet in the store before new ones get 429 "
                        "(default 64)")
    p.add_argument("--every", type=positive(float), default=2.0, metavar="SECONDS",
                   help="print the counters at most this often (default 2)")
    p.add_argument("--duration", type=positive(float), metavar="SECONDS", help="stop after this long")
    p.add_argument("--header-timeout", type=positive(float, most=3600), default=10.0, metavar="SECONDS",
                   help="close a connection that has not sent a request's headers this long after opening or "
                        "after its last answer (default 10)")
    p.add_argument("--body-timeout", type=positive(float, most=3600), default=10.0, metavar="SECONDS",
                   help="answer 408 to a body that has not arrived this long after its headers, plus 1 s per "
                        "MiB it declares (default 10)")


def config_of(args: argparse.Namespace) -> ReceiverConfig:
    from agentdesk.store.ingest.receiver_limits import ReceiverLimits
    from agentdesk.store.server.receiver import ReceiverConfig  # aiohttp is loaded by this command only

    config = ReceiverConfig(host=args.host, port=args.port, token=args.token or os.environ.get(TOKEN_ENV) or None,
                            allow_remote=args.allow_remote, max_body_bytes=int(args.max_body_mb * 1024 * 1024),
                            spool_max_bytes=int(args.spool_mb * 1024 * 1024), default_project=args.project,
                            limits=ReceiverLimits(header_timeout_s=args.header_timeout,
                                                  body_timeout_s=args.body_timeout))
    config.check()  # refuse a remote address without the flag and a token before opening anything
    return config


def counters_line(c: ReceiverCounters) -> str:
    line = f"received: {c.summary()}"
    return f"{line}; last problem: {out.clean(c.last_problem, 160)}" if c.last_problem else line


class OneLine(logging.Handler):
    """aiohttp and the writer log problems with tracebacks; a terminal gets one clean sentence instead."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"agentdesk receive: {out.clean(record.getMessage(), 300)}", file=sys.stderr, flush=True)


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_receive(args: argparse.Namespace) -> int:
    config = config_of(args)
    from agentdesk.store.server.receiver import ReceiverThread

    store = open_for(args, "receive OpenTelemetry spans", write=True, create=True)
    receiver = ReceiverThread(store, config)
    handler = OneLine(logging.WARNING)
    logging.getLogger().addHandler(handler)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, interrupt) if in_main else None
    try:
        host, port = receiver.start()
        say(f"Receiving OTLP/HTTP on http://{host}:{port}/v1/traces into {store.display_name}; Ctrl-C stops.")
        say(f"Point agents at it: OTEL_EXPORTER_OTLP_ENDPOINT=http://{host}:{port}")
        say(f"Gate agents through it: AGENTDESK_URL=http://{host}:{port} AGENTDESK_TOKEN=<agentdesk agent-token "
            "create NAME>")
        _report_until_stopped(receiver, args.every, args.duration)
    finally:
        receiver.stop()
        store.close()
        logging.getLogger().removeHandler(handler)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    say(f"Stopped. {counters_line(receiver.stats.snapshot())}")
    return EXIT_OK


def _report_until_stopped(receiver: ReceiverThread, every: float, duration: float | None) -> None:
    shown = receiver.stats.snapshot()
    deadline = None if duration is None else time.monotonic() + duration
    try:
        while deadline is None or time.monotonic() < deadline:
            left = every if deadline is None else min(every, deadline - time.monotonic())
            time.sleep(max(0.05, left))
            now = receiver.stats.snapshot()
            if now != shown:
                say(counters_line(now))
                shown = now
    except KeyboardInterrupt:
        pass
