"""Input checks shared by commands and the runtime API: sizes, JSON, token estimates."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from agentdesk.store.errors import InvalidInput, StoreError
from agentdesk.store.text.jsonsafe import DuplicateKey, depth_of, loads

MAX_ARGUMENTS_BYTES = 1_000_000
MAX_ARGUMENTS_DEPTH = 64
"""Arrays and objects nested deeper than this are refused: no tool needs it, and every reader
(the window, the CLI, `json.loads` inside a callback) would have to survive it."""
MAX_TEXT_BYTES = 4_000_000
MAX_SHORT_TEXT = 2_000


def parse_json_arguments(text: str) -> Any:
    """Validate tool arguments: JSON, an object, of a sane size, and no object repeating a key.

    A repeated key (`{"command": "rm -rf ~", "command": "git status"}`) is refused: Python keeps the
    last value, other runtimes the first, so a decision on one could run the other.
    """
    size = len(text.encode())
    if size > MAX_ARGUMENTS_BYTES:
        raise InvalidInput(f"The arguments are {size:,} bytes; the limit is {MAX_ARGUMENTS_BYTES:,} bytes.")
    try:
        value = loads(text, unique_keys=True)
    except DuplicateKey as exc:
        raise InvalidInput(f"The arguments repeat the key {json.dumps(exc.key, ensure_ascii=True)} in one "
                           "object; a runtime could act on either value, so they are refused.") from exc
    except ValueError as exc:
        raise InvalidInput(f"The arguments are not valid JSON: {exc}.") from exc
    if not isinstance(value, dict):
        raise InvalidInput("The arguments must be a JSON object.")
    depth = depth_of(value)
    if depth > MAX_ARGUMENTS_DEPTH:
        raise InvalidInput(f"The arguments are nested {depth:,} levels deep; the limit is "
                           f"{MAX_ARGUMENTS_DEPTH} levels.")
    return value


def arguments_text(value: Any) -> str:
    """JSON text of arguments given as Python values; what cannot be JSON is refused in one sentence."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except RecursionError as exc:
        raise InvalidInput(f"The arguments are nested too deeply; the limit is {MAX_ARGUMENTS_DEPTH} "
                           "levels.") from exc
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"The arguments cannot be written as JSON: {exc}.") from exc


def canonical_arguments(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def payload_hash(tool_name: str, arguments: str) -> str:
    """sha256 over tool name and canonical arguments: what an approval is an approval *of*."""
    try:
        canon = canonical_arguments(loads(arguments, unique_keys=True))
    except ValueError:  # not JSON, or a repeated key: hash the text itself, never one reading of it
        canon = arguments
    return "sha256:" + hashlib.sha256(f"{tool_name}\n{canon}".encode()).hexdigest()


def check_text(label: str, text: str, limit: int = MAX_TEXT_BYTES) -> str:
    size = len(text.encode())
    if size > limit:
        raise InvalidInput(f"The {label} is {size:,} bytes; the limit is {limit:,} bytes.")
    return text


def check_name(label: str, text: str | None, *, required: bool = True) -> str:
    value = (text or "").strip()
    if required and not value:
        article = "An" if label[:1].lower() in "aeiou" else "A"  # "An actor name", "A reason"
        raise InvalidInput(f"{article} {label} is required.")
    return check_text(label, value, MAX_SHORT_TEXT)


def estimate_tokens(text: str) -> int:
    """About four characters a token: close enough for budgets, with no tokenizer to ship."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


SPECIAL_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                 (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def special_kind(path: Path | str) -> str | None:
    """What `path` is when it is not a regular file ("a named pipe", "a character device", …); None for a
    regular file or nothing at all. Asked before opening: opening a FIFO blocks until a writer comes, and
    reading /dev/zero never ends."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in SPECIAL_KINDS if test(mode)), "a special file")


def require_regular_file(path: Path | str, what: str, error: type[StoreError] = InvalidInput) -> None:
    """Refuse (one sentence naming `what`) a path that exists and is not a regular file, before opening it."""
    kind = special_kind(path)
    if kind is not None:
        raise error(f"{what} {path} is {kind}, not a regular file.")
