"""Tool-call arguments as an operator must see them: every hidden character found, within fixed budgets.

`inspect` walks the parsed arguments (keys and string values, where JSON escapes
like `\\u202e` have already been decoded) and reports each hidden character with
the path and offset it sits at, plus words that mix scripts. `render` turns the
arguments into display lines, iteratively (a 990-deep argument renders, no
`RecursionError`), with budgets: a string longer than `value_cap` shows its head
and its tail around a "… N more characters" mark (the tail is where `; rm -rf ~`
hides), long runs of one whitespace character collapse to a counted mark
(`⟨100,000 spaces⟩`), containers deeper than `depth_cap` show "nested deeper than
N levels", and strings with line breaks become numbered lines of a code block.
Lines wider than `width` wrap with a visible `↪`. `render` is a generator, so a
caller can show a first screenful and load the rest in slices ("Show all").

`arguments_hash` is what an approval is shown as, and what the decision
records: a hash of the arguments exactly as stored, so a later change is caught.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from agentdesk.store.errors import InvalidInput, StaleRevision
from agentdesk.store.text.jsonsafe import NotJson, depth_of, loads
from agentdesk.store.text.visible import MixedWord, has_hidden, is_hidden, mixed_scripts, plural, visible
from agentdesk.store.text.visible import findings as text_findings

VALUE_CAP = 2_000
"""Characters of one string value shown before "Show all"."""
LINE_CAP = 200
"""Lines of one multi-line string shown before "Show all"."""
DEPTH_CAP = 24
"""Nesting levels shown before "Show all"."""
TOTAL_LINES = 600
"""Display lines produced before "Show all" (a budget for arguments with very many values)."""
WIDTH = 100
INDENT_CAP = 24
"""Indentation stops growing here; deeper lines say their depth instead (`⟨depth 300⟩`)."""
RUN = re.compile("([ \t\u3000\u00a0])\\1{15,}")
RUN_NAMES = {" ": "space", "\t": "tab", "\u3000": "ideographic space", "\u00a0": "no-break space"}
TIMES = "\u00d7"
SLICE = 65_536
"""Characters processed per step of a long string, so each step of `render` stays short."""


def arguments_hash(text: str) -> str:
    """sha256 of the arguments exactly as stored (UTF-8): what the operator was shown."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def short_hash(digest: str) -> str:
    """The first 12 hex digits: enough to compare by eye and to type into `approve --expect-hash`."""
    return digest.removeprefix("sha256:")[:12]


HEX = re.compile(r"[0-9a-f]{12,64}")


def check_expected_hash(expected: str | None) -> str | None:
    """The hex digits of a hash the operator was shown (full, or at least the 12-digit short form)."""
    if expected is None:
        return None
    digits = expected.strip().lower().removeprefix("sha256:")
    if not HEX.fullmatch(digits):
        raise InvalidInput(f"{expected[:80]!r} is not an arguments hash: give the 12 or more hex digits "
                           "shown with the arguments.")
    return digits


def guard_arguments(approval_id: str, stored_hash: str, expected: str | None) -> None:
    """Refuse a decision on arguments other than the ones the operator was shown."""
    if expected is not None and not stored_hash.removeprefix("sha256:").startswith(expected):
        raise StaleRevision(f"The arguments of approval {approval_id} changed since they were shown (now "
                            f"{short_hash(stored_hash)}, shown {expected[:12]}); look at them again before "
                            "deciding.")


def byte_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class Located:
    """A finding inside the arguments: at which key path and offset in that string."""

    path: str
    position: int
    name: str

    def phrase(self) -> str:
        where = f" in {self.path}" if self.path else ""
        return f"{self.name} at {self.position}{where}"


@dataclass(frozen=True, slots=True)
class Inspection:
    """Everything about the arguments that the operator cannot see by reading them."""

    hidden: tuple[Located, ...] = ()
    mixed: tuple[tuple[str, MixedWord], ...] = ()
    parse_error: str = ""
    depth: int = 0

    @property
    def suspicious(self) -> bool:
        """Hidden characters or mixed-script words: bulk approval skips it, approving asks twice."""
        return bool(self.hidden or self.mixed)

    def sentence(self, limit: int = 4) -> str:
        """The banner text: "contains 2 hidden characters: RIGHT-TO-LEFT OVERRIDE at 14, …". Key paths and
        words are quoted raw (they may hold hidden characters): show it through `visible`, once."""
        parts = []
        if self.hidden:
            groups = runs_of(self.hidden)
            shown = ", ".join(groups[:limit])
            more = f" and {len(groups) - limit:,} more" if len(groups) > limit else ""
            parts.append(f"contains {plural(len(self.hidden), 'hidden character')}: {shown}{more}")
        if self.mixed:
            words = ", ".join(f"“{w.word}” ({' + '.join(w.scripts)}{' in ' + p if p else ''})"
                              for p, w in self.mixed[:limit])
            more = f" and {len(self.mixed) - limit:,} more" if len(self.mixed) > limit else ""
            parts.append(f"mixes scripts in {plural(len(self.mixed), 'word')}: {words}{more}")
        return "; ".join(parts)

    def reason(self) -> str:
        """Why bulk approval skipped it (one clause)."""
        what = []
        if self.hidden:
            what.append(plural(len(self.hidden), "hidden character"))
        if self.mixed:
            what.append(plural(len(self.mixed), "mixed-script word"))
        return " and ".join(what)


def runs_of(found: tuple[Located, ...]) -> list[str]:
    """Phrases for the findings, a run of one character in one place as one phrase
    ("60 x LINE SEPARATOR at 2-61 in note")."""
    phrases: list[str] = []
    n = 0
    while n < len(found):
        first, end = found[n], n + 1
        while (end < len(found) and found[end].name == first.name and found[end].path == first.path
               and found[end].position == found[end - 1].position + 1):
            end += 1
        if end - n == 1:
            phrases.append(first.phrase())
        else:
            where = f" in {first.path}" if first.path else ""
            phrases.append(f"{end - n} {TIMES} {first.name} at {first.position}-{found[end - 1].position}{where}")
        n = end
    return phrases


def parse(text: str) -> tuple[Any, str]:
    """The arguments' JSON value and "" , or the text itself and why it is not JSON."""
    try:
        return loads(text), ""
    except (NotJson, ValueError) as exc:
        return text, str(exc)


def _strings(value: Any) -> Iterator[tuple[str, str]]:
    """(path, text) of every key and string value, iteratively, in document order."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            yield path, node
        elif isinstance(node, dict):
            items = list(node.items())
            for key, child in reversed(items):
                sub = f"{path}.{key}" if path else str(key)
                stack.append((sub, child))
            for key, _ in reversed(items):
                stack.append((f"{path} (a key)" if path else "(a key)", key))
        elif isinstance(node, list):
            stack.extend((f"{path}[{n}]", child) for n, child in reversed(list(enumerate(node))))


def inspect(text: str) -> Inspection:
    """Hidden characters and mixed-script words in the arguments, located by key path and offset."""
    value, error = parse(text)
    hidden: list[Located] = []
    mixed: list[tuple[str, MixedWord]] = []
    sources = [("", text)] if error else _strings(value)
    for path, piece in sources:
        shown_path = path  # raw: every display runs the sentence through `visible` once
        hidden += [Located(shown_path, f.position, f.name) for f in text_findings(piece)]
        mixed += [(shown_path, w) for w in mixed_scripts(piece)]
    return Inspection(tuple(hidden), tuple(mixed), error, 0 if error else depth_of(value))


# -- rendering -------------------------------------------------------------------------------
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


def _run_mark(run: str) -> str:
    return f"⟨{plural(len(run), RUN_NAMES[run[0]])}⟩"


def shown(text: str, *, lines: bool = False) -> str:
    """`visible`, with long runs of one whitespace character, or of one hidden character, counted.

    Runs are found in the raw text and only the text between them goes through
    `visible`, so nothing agent-supplied can forge a counted mark.
    """
    out: list[str] = []
    end = 0
    runs = RUN.finditer(text) if any(c * 16 in text for c in RUN_NAMES) else iter(())
    for match in runs:
        out += [visible(text[end:match.start()], lines=lines), _run_mark(match.group())]
        end = match.end()
    out.append(visible(text[end:], lines=lines))
    joined = "".join(out)
    return REPEATED_MARK.sub(_count_marks, joined) if "⟩⟨" in joined else joined


REPEATED_MARK = re.compile(r"(⟨(?:U\+[0-9A-F]{4,6}|[A-Z]{2,3})⟩)\1{3,}")


def _count_marks(match: re.Match[str]) -> str:
    one = match.group(1)
    return f"⟨{len(match.group()) // len(one)} {TIMES} {one[1:-1]}⟩"


def mark_start(text: str, pos: int) -> int:
    """`pos`, moved back to the start of a mark it would cut through."""
    opened = text.rfind("⟨", max(0, pos - 40), pos)
    return opened if opened >= 0 and "⟩" not in text[opened:pos] else pos


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


def _quoted(text: str, budget: Budget, path: str, after: str) -> Iterator[str]:
    """A one-line string in quotes; quotes and backslashes escaped so no value can forge a key."""
    display = capped(text, budget, path, lines=False)
    yield '"' + display.replace("\\", "\\\\").replace('"', '\\"') + '"' + after


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
        display = capped(row, budget, f"line {number} of {path or 'the arguments'}", lines=True)
        for n, part in enumerate(wrap(display, max(20, budget.width - len(gutter)))):
            yield (gutter if n == 0 else f"{indent}{' ' * digits} ↪ ") + part
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


def escaped_json(text: str) -> str:
    """Arguments for editing: pretty JSON with every hidden character as a `\\uXXXX` escape.
    Lossless (the escape is the same JSON value) and nothing in the editor is invisible."""
    value, error = parse(text)
    pretty = text
    if not error:
        try:
            pretty = json.dumps(value, indent=2, ensure_ascii=False)
        except RecursionError:
            pretty = text
    return "".join(_json_escape(c) if is_hidden(c) and c not in "\n\t⟨⟩" else c for c in pretty) \
        if has_hidden(pretty) else pretty


def _json_escape(char: str) -> str:
    return json.dumps(char)[1:-1] if ord(char) < 0x10000 else json.dumps(char, ensure_ascii=True)[1:-1]


@lru_cache(maxsize=512)
def inspect_cached(text: str) -> Inspection:
    """`inspect`, remembered: the queue asks for every row on each repaint and before each decision."""
    return inspect(text)
