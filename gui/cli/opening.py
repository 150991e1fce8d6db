"""Shared by the command-line modules: where the store is, how to open it, how to talk.

Readers open agentdesk stores read-only and never create them; another runtime's
database is detected (read-only) and opened through its source.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import cast

from agentdesk.store import sqlite as sqlite_files
from agentdesk.store.database import Store, default_store_location, open_store, to_url
from agentdesk.store.errors import InvalidInput
from agentdesk.store.native import NativeSource
from agentdesk.store.source import Source
from agentdesk.store.sources import open_source
from agentdesk.store.sources.detect import detect
from agentdesk.store.validation import parse_json_arguments

EXIT_OK, EXIT_FAILED, EXIT_UNAVAILABLE, EXIT_BROKEN_CHAIN = 0, 1, 5, 6


class CommandFailed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


AnySource = Source


def location_of(args: argparse.Namespace) -> str:
    return str(args.store or default_store_location())


def open_for(args: argparse.Namespace, *, write: bool = False, create: bool = False) -> Store:
    """Readers open read-only and never create; writers open read-write (creating only if asked)."""
    return open_store(location_of(args), create=create, read_only=not write, busy_timeout_s=args.busy_timeout)


def open_any(args: argparse.Namespace, *, write: bool = False) -> AnySource:
    """An agentdesk store, or another runtime's database when the file is one (detected read-only)."""
    location = location_of(args)
    path = sqlite_files.path_of(to_url(location))
    existing = path is not None and path.is_file() and path.stat().st_size > 0
    if existing and path is not None and detect(path, args.busy_timeout).kind != "agentdesk":
        source = open_source(location, allow_writes=args.allow_writes, busy_timeout_s=args.busy_timeout)
        return cast(AnySource, source)
    return NativeSource(open_for(args, write=write))


def say(text: str) -> None:
    print(text, flush=True)


def read_arguments(value: str) -> str:
    """`--args` as JSON text, `@FILE`, or `-` for stdin (one command-line argument is capped at 128 KiB)."""
    if value == "-":
        text = sys.stdin.read()
    elif value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"Cannot read the arguments file {value[1:]}: {exc}.") from exc
    else:
        text = value
    parse_json_arguments(text)  # refuse bad JSON or an oversize payload before touching the store
    return text
