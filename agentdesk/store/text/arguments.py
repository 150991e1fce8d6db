"""Tool-call arguments as an operator must judge them: what they hide, and which ones were shown.

`inspect` walks the parsed arguments (keys and string values, where JSON escapes
like `\\u202e` have already been decoded) and reports each hidden character with
the key path and offset it sits at, plus words that mix scripts; the approval
banner, the row mark, bulk approval and the CLI all ask it. `arguments_hash` is
what an approval is shown as and what the decision records: a hash of the
arguments exactly as stored, so a later change is refused as stale.
Display lines are `store.text.render`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agentdesk.store.errors import InvalidInput, StaleRevision
from agentdesk.store.text.jsonsafe import NotJson, depth_of, loads
from agentdesk.store.text.shown import TIMES
from agentdesk.store.text.visible import MixedWord, has_hidden, is_hidden, mixed_scripts, plural
from agentdesk.store.text.visible import findings as text_findings


@lru_cache(maxsize=256)
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


@lru_cache(maxsize=256)
def byte_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


TAGS = (0xE0000, 0xE007F)


@dataclass(frozen=True, slots=True)
class Located:
    """A finding inside the arguments: at which key path and offset in that string."""

    path: str
    position: int
    name: str
    code: int = 0

    @property
    def is_tag(self) -> bool:
        """A Unicode tag character: invisible to people, read by models as ASCII ("ASCII smuggling")."""
        return TAGS[0] <= self.code <= TAGS[1]

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
        while (end < len(found) and found[end].path == first.path
               and found[end].position == found[end - 1].position + 1
               and (found[end].name == first.name or (first.is_tag and found[end].is_tag))):
            end += 1
        if first.is_tag and end - n > 1:  # say what a model would read there
            where = f" in {first.path}" if first.path else ""
            spelt = "".join(chr(f.code - TAGS[0]) if 0x20 <= f.code - TAGS[0] <= 0x7E else "?"
                            for f in found[n:end])
            phrases.append(f"{end - n} TAG characters at {first.position}-{found[end - 1].position}{where}, "
                           f"which a model reads as “{spelt}”")
        elif end - n == 1:
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
        hidden += [Located(shown_path, f.position, f.name, ord(f.char)) for f in text_findings(piece)]
        mixed += [(shown_path, w) for w in mixed_scripts(piece)]
    return Inspection(tuple(hidden), tuple(mixed), error, 0 if error else depth_of(value))



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
