"""Shared by the command-line modules: where the store is, how to open it, how to talk.

Every command opens its database with one call to `store.sources.open_source`,
which detects what the file is (once) and returns a `Source`. Readers open
agentdesk stores read-only and never create them; another runtime's database is
read-only unless `--allow-writes`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

from agentdesk.store.errors import InvalidInput
from agentdesk.store.native import native_store
from agentdesk.store.paths import default_store_location
from agentdesk.store.persistence.database import Store
from agentdesk.store.source import Source
from agentdesk.store.sources import open_source
from agentdesk.store.text.jsonsafe import SURROGATE_ESCAPE, lone_surrogate_in, undecodable
from agentdesk.store.validation import MAX_ARGUMENTS_BYTES, parse_json_arguments, require_regular_file

EXIT_OK, EXIT_FAILED, EXIT_UNAVAILABLE, EXIT_BROKEN_CHAIN = 0, 1, 5, 6


class CommandFailed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def location_of(args: argparse.Namespace) -> str:
    """`--store`, else `$AGENTDESK_STORE`, else the default; an empty `--store ''` is a mistake, not a wish for
    the default (a shell variable that was never set), so it is refused in one sentence."""
    if args.store is not None and not str(args.store).strip():
        raise InvalidInput("--store is empty; give a store path or URL, or leave --store out for the default "
                           f"({default_store_location()}).")
    return str(args.store or default_store_location())


def checked_location(args: argparse.Namespace) -> str:
    """`location_of`, refused in one sentence when it is not text (a `$AGENTDESK_STORE` of bytes that are not
    UTF-8: SQLite could not be handed the name)."""
    location = location_of(args)
    if (at := undecodable(location)) is not None:
        raise InvalidInput(f"The store location {location!a} is not UTF-8 text (character {at + 1}); set "
                           "$AGENTDESK_STORE or --store to a UTF-8 path.")
    return location


def open_any(args: argparse.Namespace, *, write: bool = False, create: bool = False,
             older_schema: bool = False) -> Source:
    """The database at `--store` as a `Source`: readers open read-only and never create; writers open
    read-write, creating an agentdesk store only if asked. A store behind this agentdesk's schema is refused
    with who upgrades it (exit 5), unless `older_schema` (`verify` reads every revision's audit)."""
    return open_source(checked_location(args), allow_writes=args.allow_writes, create=create, read_only=not write,
                       busy_timeout_s=args.busy_timeout, older_schema=older_schema)


def open_for(args: argparse.Namespace, purpose: str, *, write: bool = False, create: bool = False) -> Store:
    """The agentdesk store at `--store`, for commands only an agentdesk store can serve (`purpose`, a
    sentence fragment: "import traces"); another runtime's database is refused in one sentence."""
    source = open_any(args, write=write, create=create)
    try:
        return native_store(source, purpose)
    except Exception:
        source.close()
        raise


LARGEST_COUNT = 1_000_000_000
"""The default bound on a count or a limit: SQLite's integers end at 2**63, and nothing here needs more."""
LARGEST_SECONDS = 1_000_000_000.0
"""The default bound on a duration (about 31 years): beyond it, deadlines and timestamps overflow."""


def positive(kind: type[int] | type[float], most: float | None = None) -> Callable[[str], float]:
    """An argparse type for options that must be a finite number above zero and at most `most`
    (counts, sizes, seconds): NaN, infinities and 10**20 are usage errors, never a hang or an overflow."""
    return number(kind, least=None, most=most)


def number(kind: type[int] | type[float], *, least: float | None = None,
           most: float | None = None) -> Callable[[str], float]:
    """An argparse type for a finite number in [least, most] (above zero when `least` is None)."""
    top = most if most is not None else (LARGEST_COUNT if kind is int else LARGEST_SECONDS)

    def parse(text: str) -> float:
        shown = text if len(text) <= 40 else text[:39] + "…"
        try:
            value = kind(text.strip())
        except (ValueError, OverflowError) as exc:
            raise argparse.ArgumentTypeError(f"not a {'whole ' if kind is int else ''}number: {shown}") from exc
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, not {shown}")
        if least is None and value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {shown}")
        if least is not None and value < least:
            raise argparse.ArgumentTypeError(f"must be at least {_figure(least)}, not {shown}")
        if value > top:
            raise argparse.ArgumentTypeError(f"must be at most {_figure(top)}, not {shown}")
        return value
    return parse


def _figure(value: float) -> str:
    return f"{int(value):,}" if value == int(value) and abs(value) < 1e16 else f"{value:g}"


def say(text: str) -> None:
    print(text, flush=True)


def read_arguments(value: str) -> str:
    """`--args` as JSON text, `@FILE`, or `-` for stdin (one command-line argument is capped at 128 KiB).

    A file or stdin is read only up to one byte past the arguments limit: a huge file (or
    /dev/zero) is refused by its size, never read whole into memory.
    """
    if value == "-":
        text = bounded_text(sys.stdin.buffer.read(MAX_ARGUMENTS_BYTES + 1), "on standard input", None)
    elif value.startswith("@"):
        name = value[1:]
        require_regular_file(name, "The arguments file")  # a FIFO would block the open
        try:
            with Path(name).open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size if Path(name).is_file() else None
                text = bounded_text(handle.read(MAX_ARGUMENTS_BYTES + 1), f"in the file {name}", size)
        except OSError as exc:
            raise InvalidInput(f"Cannot read the arguments file {name}: {exc.strerror or exc}.") from exc
    else:
        text = value
    if (at := undecodable(text)) is not None:
        raise InvalidInput(f"The arguments are not UTF-8 text (character {at + 1} is not).")
    value = parse_json_arguments(text)  # refuse bad JSON or an oversize payload before touching the store
    if SURROGATE_ESCAPE.search(text) and (bad := lone_surrogate_in(value)) is not None:
        raise InvalidInput(f"The arguments hold a lone UTF-16 surrogate escape, which is no character: {bad}.")
    return text


def bounded_text(data: bytes, where: str, size: int | None) -> str:
    """Arguments read from a file or a pipe (`size`: the file's, when known): at most the limit, and UTF-8."""
    if len(data) > MAX_ARGUMENTS_BYTES:
        told = f"{size:,} bytes" if size is not None else f"more than {MAX_ARGUMENTS_BYTES:,} bytes"
        raise InvalidInput(f"The arguments {where} are {told}; the limit is {MAX_ARGUMENTS_BYTES:,} bytes.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"The arguments {where} are not UTF-8 text (byte {exc.start}).") from exc
