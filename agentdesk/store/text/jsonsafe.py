"""JSON parsing that survives any nesting depth, for display.

`json.loads` recurses once per nesting level, so arguments nested a few hundred
levels deep raise `RecursionError` when parsed from inside a Qt callback (the
stack is already deep there). Display must never crash on agent input, so this
falls back to an iterative parser built on the decoder's own string scanner:
same values, no recursion.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
SPACE = re.compile(r"[ \t\n\r]*")
LITERALS = {"true": True, "false": False, "null": None}


class NotJson(ValueError):
    """The text is not one JSON value."""


class DuplicateKey(NotJson):
    """An object names the same key twice: one reader takes the first value, another the last."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {json.dumps(key, ensure_ascii=True)} appears twice in one object")
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise DuplicateKey(key)
        value[key] = item
    return value


def loads(text: str, *, unique_keys: bool = False) -> Any:
    """`json.loads`, falling back to the iterative parser when the nesting is too deep to recurse.

    With `unique_keys`, an object that repeats a key raises `DuplicateKey` (what is parsed for a
    decision must mean one thing to every reader).
    """
    try:
        return json.loads(text, object_pairs_hook=_unique) if unique_keys else json.loads(text)
    except RecursionError:
        return loads_iterative(text, unique_keys=unique_keys)
    except DuplicateKey:
        raise
    except ValueError as exc:
        raise NotJson(str(exc)) from exc


def loads_iterative(text: str, *, unique_keys: bool = False) -> Any:
    """Parse one JSON value with an explicit stack (containers are filled as they close)."""
    stack: list[tuple[list[Any] | dict[str, Any], str | None]] = []
    pos = SPACE.match(text, 0).end()  # type: ignore[union-attr]
    result: Any = None
    done = False
    while not done:
        value, pos, opened = _scalar_or_open(text, pos)
        if opened is not None:
            stack.append((opened, None))
            pos = SPACE.match(text, pos).end()  # type: ignore[union-attr]
            closer = "]" if isinstance(opened, list) else "}"
            if text.startswith(closer, pos):
                pos += 1
                value = stack.pop()[0]
            else:
                if isinstance(opened, dict):
                    pos = _key(text, pos, stack)
                continue
        while True:
            if not stack:
                result, done = value, True
                break
            container, key = stack[-1]
            if isinstance(container, list):
                container.append(value)
            else:
                if unique_keys and key in container:
                    raise DuplicateKey(key)  # type: ignore[arg-type]
                container[key] = value  # type: ignore[index]
            pos = SPACE.match(text, pos).end()  # type: ignore[union-attr]
            closer = "]" if isinstance(container, list) else "}"
            if text.startswith(",", pos):
                pos = SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
                if isinstance(container, dict):
                    pos = _key(text, pos, stack)
                break
            if not text.startswith(closer, pos):
                raise NotJson(f"Expecting ',' or '{closer}' at character {pos}")
            pos += 1
            value = stack.pop()[0]
    if SPACE.match(text, pos).end() != len(text):  # type: ignore[union-attr]
        raise NotJson(f"Extra data at character {pos}")
    return result


def _key(text: str, pos: int, stack: list[tuple[Any, str | None]]) -> int:
    if not text.startswith('"', pos):
        raise NotJson(f"Expecting a property name at character {pos}")
    key, pos = scanstring(text, pos + 1, True)
    pos = SPACE.match(text, pos).end()  # type: ignore[union-attr]
    if not text.startswith(":", pos):
        raise NotJson(f"Expecting ':' at character {pos}")
    stack[-1] = (stack[-1][0], key)
    return SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]


def _scalar_or_open(text: str, pos: int) -> tuple[Any, int, list[Any] | dict[str, Any] | None]:
    """A scalar and the position after it, or a new empty container to fill."""
    char = text[pos:pos + 1]
    if char == "[":
        return None, pos + 1, []
    if char == "{":
        return None, pos + 1, {}
    if char == '"':
        value, end = scanstring(text, pos + 1, True)
        return value, end, None
    for word, literal in LITERALS.items():
        if text.startswith(word, pos):
            return literal, pos + len(word), None
    match = NUMBER.match(text, pos)
    if match is None or not match.group():
        raise NotJson(f"Expecting a value at character {pos}")
    number = match.group()
    return (float(number) if any(c in number for c in ".eE") else int(number)), match.end(), None


def depth_of(value: Any) -> int:
    """How deeply containers nest (0 for a scalar), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in node if isinstance(child, (list, dict)))
    return deepest


# -- bounded parsing for display ----------------------------------------------------------------
DISPLAY_DEPTH = 64
"""Containers deeper than this are replaced by a marker: every consumer (json.dumps, a Qt model, a
recursive renderer) can then walk the value without recursing thousands of levels."""
DISPLAY_CHARS = 4_000_000
"""JSON text longer than this is not parsed at all: it is shown cut, with its size."""
PREVIEW_CHARS = 2_000


def too_deep(levels: int) -> str:
    return f"too deeply nested to display ({levels:,} levels)"


def truncated(text: str, keep: int = PREVIEW_CHARS) -> str:
    """The head of a too-large text, saying how large the whole is."""
    return f"{text[:keep]}… (truncated: {len(text):,} characters in all)"


def bounded(value: Any, max_depth: int = DISPLAY_DEPTH) -> Any:
    """`value` with every container nested deeper than `max_depth` replaced by `too_deep(total)`, where
    `total` is how deep the whole value nests. Iterative, copying only what it walks."""
    total = depth_of(value)
    if total <= max_depth:
        return value
    marker = too_deep(total)
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, int]] = [(root, 0, 0)]
    while stack:
        holder, key, depth = stack.pop()
        node = holder[key]
        if isinstance(node, dict | list) and depth >= max_depth:
            holder[key] = marker
        elif isinstance(node, dict):
            copy = dict(node)
            holder[key] = copy
            stack.extend((copy, k, depth + 1) for k, v in copy.items() if isinstance(v, dict | list))
        elif isinstance(node, list):
            items = list(node)
            holder[key] = items
            stack.extend((items, n, depth + 1) for n, v in enumerate(items) if isinstance(v, dict | list))
    return root[0]


def loads_bounded(text: str | bytes, max_depth: int = DISPLAY_DEPTH, max_chars: int = DISPLAY_CHARS) -> Any:
    """JSON text from an agent or a foreign database, as a value any display can walk.

    Past `max_chars` the text is not parsed (`NotJson` with its size); deeper than `max_depth`,
    the deep part is a `too_deep` marker. Raises `NotJson` for text that is not JSON.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if len(text) > max_chars:
        raise NotJson(f"too large to display as JSON ({len(text):,} characters)")
    return bounded(loads(text), max_depth)


class TooDeep(NotJson):
    """Valid JSON nested past the caller's limit (a value to refuse as input, not to display)."""


def loads_limited(text: str, max_depth: int, *, unique_keys: bool = False) -> Any:
    """JSON input to accept: parsed without recursing, refused (`TooDeep`) when nested past `max_depth`."""
    value = loads(text, unique_keys=unique_keys)
    depth = depth_of(value)
    if depth > max_depth:
        raise TooDeep(f"it is nested {depth:,} levels deep; the limit is {max_depth}")
    return value


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A JSON escape of a UTF-16 surrogate: a pair is a character, a lone one is no text at all."""


def undecodable(text: str) -> int | None:
    """Where `text` stops being Unicode text: the index of its first lone surrogate (a `\\ud800` JSON escape
    decoded, or a byte that was not UTF-8 kept by surrogateescape), or None when it is all text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def lone_surrogate_in(value: Any) -> str | None:
    """The first string (key or value) of a decoded JSON value holding a lone surrogate, shown escaped, or
    None. Iterative; cheap for the common case (one encode of the whole value's text)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return None
    except (UnicodeEncodeError, RecursionError, ValueError, TypeError):
        pass
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if undecodable(node) is not None:
                return node.encode("utf-8", "backslashreplace").decode("ascii")[:80]
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None
