"""Tool-call arguments as display lines, within fixed budgets, without recursion.

`render` pretty-prints the arguments iteratively (a 990-deep argument renders, no
`RecursionError`), with budgets: a string longer than `value_cap` shows its head
and its tail around a "… N more characters" mark (the tail is where `; rm -rf ~`
hides), long runs of one character are counted (`shown`), containers deeper than
`depth_cap` show "nested deeper than N levels", strings with line breaks become
numbered lines of a code block, and lines wider than `width` wrap with a visible
`↪`. Quotes and backslashes inside values are escaped so no value can forge a key.
`render` is a generator, so a caller can show a first screenful and load the rest
in slices ("Show all", with `Budget.unlimited()`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentdesk.store.text.arguments import parse
from agentdesk.store.text.shown import RUN_NAMES, shown
from agentdesk.store.text.visible import plural, visible

VALUE_CAP = 2_000
"""Characters of one string value shown before "Show all"."""
LINE_CAP = 200
"""Lines of one multi-line string shown before "Show all"."""
DEPTH_CAP = 24
"""Nesting levels shown before "Show all"."""
TOTAL_LINES = 600
"""Display lines produced before "Show all" (a budget for arguments with very many values)."""
WIDTH = 100
PIECE = 65_536
"""Raw characters of one long string marked per step of an unlimited render."""
INDENT_CAP = 24
"""Indentation stops growing here; deeper lines say their depth instead (`⟨depth 300⟩`)."""


@dataclass
class Budget:
    """Display limits; `unlimited()` is what "Show all" uses (whitespace runs still collapse)."""

    value_cap: int | None = VALUE_CAP
    line_cap: int | None = LINE_CAP
    depth_cap: int | None = DEPTH_CAP
    total_lines: int | None = TOTAL_LINES
    width: int = WIDTH
    cut: list[str] = field(default_factory=list)
    """What was left out, as phrases (so the pane can offer "Show all" only when it matters)."""

    @classmethod
    def unlimited(cls, width: int = WIDTH) -> Budget:
        return cls(None, None, None, None, width)




def _run_end(text: str, pos: int) -> int:
    """`pos`, moved past the whitespace run it falls in (a run is shown whole, as one counted mark)."""
    if 0 < pos < len(text) and text[pos - 1] in RUN_NAMES and text[pos] == text[pos - 1]:
        char = text[pos]
        return len(text) - len(text[pos:].lstrip(char))
    return pos


def _run_start(text: str, pos: int) -> int:
    if 0 < pos < len(text) and text[pos] in RUN_NAMES and text[pos - 1] == text[pos]:
        return len(text[:pos].rstrip(text[pos]))
    return pos


def capped(text: str, budget: Budget, what: str, *, lines: bool) -> str:
    """The shown text, its middle cut when longer than the value cap: head and tail stay in view
    (the tail is where `; rm -rf ~` hides). The cut is made in the raw text, so it never splits a mark."""
    cap = budget.value_cap
    if cap is None or len(text) <= cap:
        return shown(text, lines=lines)
    head = _run_end(text, cap * 3 // 4)
    tail = _run_start(text, len(text) - cap // 4)
    if head >= tail:
        return shown(text, lines=lines)
    budget.cut.append(f"{tail - head:,} characters of {what or 'the arguments'}")
    return (f"{shown(text[:head], lines=lines)} ⟨… {tail - head:,} more characters: Show all …⟩ "
            f"{shown(text[tail:], lines=lines)}")


def wrap(line: str, width: int, indent: str = "") -> Iterator[str]:
    """One display line per `width` characters; continuations start with a visible `↪`."""
    if len(line) <= width:
        yield line
        return
    start, first = 0, True
    while start < len(line):
        room = width if first else max(8, width - len(indent) - 2)
        end = min(len(line), start + room)
        if end < len(line):
            opened = line.rfind("⟨", max(start, end - 60), end)
            if opened > start and "⟩" not in line[opened:end]:
                end = opened  # never split a mark across lines
        chunk = line[start:end]
        yield chunk if first else f"{indent}↪ {chunk}"
        start, first = end, False


def _scalar(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else ""


def pieces(text: str, budget: Budget, what: str, *, lines: bool) -> Iterator[str]:
    """The shown text in pieces of about `PIECE` raw characters (never splitting a whitespace run), so
    one step of "Show all" never has to mark a whole 5 MB line at once; capped text is one piece."""
    if budget.value_cap is not None or len(text) <= PIECE:
        yield capped(text, budget, what, lines=lines)
        return
    start = 0
    while start < len(text):
        end = _run_end(text, min(len(text), start + PIECE))
        yield shown(text[start:end], lines=lines)
        start = end


def _escaped(display: str) -> str:
    return display.replace("\\", "\\\\").replace('"', '\\"')


def _quoted(text: str, budget: Budget, path: str, after: str) -> Iterator[str]:
    """A one-line string in quotes; quotes and backslashes escaped so no value can forge a key.
    A long one comes as several display lines, each after the first a `↪` continuation."""
    parts = pieces(text, budget, path, lines=False)
    previous = '"' + _escaped(next(parts))
    for part in parts:
        yield previous
        previous = "    ↪ " + _escaped(part)
    yield previous + '"' + after


def _block(text: str, budget: Budget, path: str, indent: str, after: str) -> Iterator[str]:
    """A string with line breaks as numbered lines of a code block (it is code or a script)."""
    rows = text.split("\n")
    count = len(rows)
    keep: list[tuple[int, str]] = list(enumerate(rows, 1))
    cap = budget.line_cap
    if cap is not None and count > cap:
        head = cap * 3 // 4
        keep = [*keep[:head], (0, f"⟨… {count - cap:,} more lines: Show all …⟩"), *keep[count - (cap - head):]]
        budget.cut.append(f"{count - cap:,} lines of {path or 'the arguments'}")
    digits = len(str(count))
    yield f"┌ {plural(count, 'line')}"
    for number, row in keep:
        if number == 0:
            yield f"{indent}{'…'.rjust(digits)} │ {row}"
            continue
        gutter = f"{indent}{str(number).rjust(digits)} │ "
        n = 0
        for display in pieces(row, budget, f"line {number} of {path or 'the arguments'}", lines=True):
            for part in wrap(display, max(20, budget.width - len(gutter))):
                yield (gutter if n == 0 else f"{indent}{' ' * digits} ↪ ") + part
                n += 1
    yield f"{indent}└{after}"


def _string_lines(text: str, budget: Budget, path: str, indent: str, after: str = "") -> Iterator[str]:
    if "\n" in text:
        yield from _block(text, budget, path, indent, after)
    else:
        yield from _quoted(text, budget, path, after)


def render(text: str, budget: Budget | None = None) -> Iterator[str]:
    """Display lines for stored arguments: pretty JSON with code blocks, or the plain text."""
    budget = budget or Budget()
    value, error = parse(text)
    if error or not isinstance(value, (dict, list)):
        lines = _string_lines(value, budget, "", "") if isinstance(value, str) else iter([_scalar(value)])
        yield from _limited(lines, budget, "")
        return
    yield from _limited(_tree(value, budget), budget, "")


def _limited(lines: Iterator[str], budget: Budget, indent: str) -> Iterator[str]:
    """Stops after `total_lines`, saying so; wraps every line to the width."""
    produced = 0
    for line in lines:
        for part in wrap(line, budget.width, "    "):
            if budget.total_lines is not None and produced >= budget.total_lines:
                budget.cut.append("the rest of the arguments")
                yield f"⟨… cut after {budget.total_lines:,} lines: Show all …⟩"
                return
            produced += 1
            yield part


def _indent(depth: int, width: int = WIDTH) -> str:
    """Two spaces a level, up to `INDENT_CAP` levels or two fifths of the width; deeper lines say
    their depth instead of drifting off the right edge."""
    cap = min(INDENT_CAP, max(4, width // 5))
    if depth <= cap:
        return "  " * depth
    return "  " * cap + f"⟨depth {depth}⟩ "


def _tree(value: Any, budget: Budget) -> Iterator[str]:
    """Pretty-printed JSON with an explicit stack of (children, closer, depth, path, comma after closer)."""
    opener, closer = ("{", "}") if isinstance(value, dict) else ("[", "]")
    yield opener
    stack: list[tuple[Iterator[tuple[str, str, Any, bool]], str, int, str, str]] = [
        (_children(value, ""), closer, 1, "", "")]
    while stack:
        children, closer, depth, _path, after = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            yield f"{_indent(depth - 1, budget.width)}{closer}{after}"
            continue
        label, sub, node, last = child
        pad, comma = _indent(depth, budget.width), "" if last else ","
        if isinstance(node, (dict, list)):
            o, c = ("{", "}") if isinstance(node, dict) else ("[", "]")
            if not node:
                yield f"{pad}{label}{o}{c}{comma}"
            elif budget.depth_cap is not None and depth >= budget.depth_cap:
                budget.cut.append(f"values nested deeper than {budget.depth_cap} levels")
                yield f"{pad}{label}{o} ⟨nested deeper than {budget.depth_cap} levels: Show all⟩ {c}{comma}"
            else:
                yield f"{pad}{label}{o}"
                stack.append((_children(node, sub), c, depth + 1, sub, comma))
        elif isinstance(node, str):
            lines = _string_lines(node, budget, sub, pad + "  ", comma)
            yield f"{pad}{label}{next(lines)}"
            yield from lines
        else:
            yield f"{pad}{label}{_scalar(node)}{comma}"


def _label(key: str) -> str:
    return '"' + visible(key).replace("\\", "\\\\").replace('"', '\\"') + '": '


def _children(node: Any, path: str) -> Iterator[tuple[str, str, Any, bool]]:
    """(label, path, value, is last) for each child: a dict's keys, or a list's indexes."""
    last = len(node) - 1
    if isinstance(node, dict):
        for n, (key, child) in enumerate(node.items()):
            yield _label(key), (f"{path}.{key}" if path else key), child, n == last
    else:
        for n, child in enumerate(node):
            yield "", f"{path}[{n}]", child, n == last


