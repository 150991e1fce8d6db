"""The span query language, parsed into terms every search backend evaluates the same way.

    payments.py            words in the name, input or output text (the last word as a prefix)
    "retry budget"         a quoted phrase: the same, with spaces inside
    kind:tool              the span kind (agent, model, tool, sub_agent, guardrail, gate, internal)
    status:error           the span status (ok, error, cancelled, running)
    name:plan              words in the span name only
    gen_ai.model:gpt       any other key:value: the attribute `key`, whose value holds the words
    dur>2s  dur<100ms      duration against a number with a unit (us, ms, s, m, h); also >= and <=
    label:needs-review     carries this label (an operator's; store/notes), case-insensitively
    note:"wrong tool"      an operator's note on it holds the words

Terms are ANDed. Text matching is by words, case-insensitively: `pay` finds
"payments.py" (prefix of the last word), `ments` does not; punctuation and `_` only
separate words, so `payments.py` means the word "payments" followed by a
word starting with "py". That is what SQLite FTS5's unicode61 tokenizer gives
the native store, and what `matches_text` reproduces for the scan fallback.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache

from agentdesk.store.errors import InvalidInput

WORD = re.compile(r"[^\W_]+", re.UNICODE)
"""A word: letters and digits (FTS5 unicode61: `read_file` is the words "read" and "file")."""

DURATION = re.compile(r"^(dur|duration)(<=|>=|<|>|=)(\d+(?:\.\d+)?)(us|µs|ms|s|m|h)?$", re.IGNORECASE)
UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
KINDS = frozenset({"agent", "model", "tool", "sub_agent", "guardrail", "gate", "internal"})
STATUSES = frozenset({"ok", "error", "cancelled", "running"})
MAX_TERMS = 16


class QueryError(InvalidInput):
    """A query that cannot be run; its text is one sentence for the operator."""


@dataclass(frozen=True)
class Duration:
    op: str
    seconds: float

    def accepts(self, seconds: float | None) -> bool:
        """Whether a span lasting `seconds` passes (a running span, None, never does)."""
        if seconds is None:
            return False
        return {"<": seconds < self.seconds, "<=": seconds <= self.seconds, ">": seconds > self.seconds,
                ">=": seconds >= self.seconds, "=": abs(seconds - self.seconds) < 5e-7}[self.op]


@dataclass(frozen=True)
class Attribute:
    key: str
    words: tuple[str, ...]


@dataclass(frozen=True)
class Query:
    """A parsed query: every list is ANDed; `text` and `names` are word sequences."""

    source: str
    text: tuple[tuple[str, ...], ...] = ()
    names: tuple[tuple[str, ...], ...] = ()
    kinds: frozenset[str] = field(default_factory=frozenset)
    statuses: frozenset[str] = field(default_factory=frozenset)
    durations: tuple[Duration, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    labels: tuple[str, ...] = ()
    """Labels the target must all carry, casefolded (`label:`)."""
    notes: tuple[tuple[str, ...], ...] = ()
    """Word sequences some note on the target must hold, each (`note:`)."""

    @property
    def marked(self) -> bool:
        """Whether the query asks about operators' notes or labels (answered from store/notes)."""
        return bool(self.labels or self.notes)

    @property
    def only_marks(self) -> bool:
        """Whether notes and labels are all it asks about (no span term narrows it further)."""
        return self.marked and not (self.text or self.names or self.kinds or self.statuses or self.durations
                                    or self.attributes)

    @property
    def needs_payload(self) -> bool:
        """Whether a term looks at input/output text or attributes (not only the span table's columns)."""
        return bool(self.text or self.attributes)


def words_of(text: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in WORD.findall(text))


def parse(text: str) -> Query:
    """The query in `text`, or `QueryError` saying in one sentence what is wrong with it."""
    stripped = text.strip()
    if not stripped:
        raise QueryError("The query is empty: type words to find, or a term such as kind:tool.")
    try:
        tokens = shlex.split(stripped, posix=True)
    except ValueError:
        raise QueryError("The query has an unclosed quote.") from None
    if len(tokens) > MAX_TERMS:
        raise QueryError(f"The query has {len(tokens)} terms; at most {MAX_TERMS} are allowed.")
    texts: list[tuple[str, ...]] = []
    names: list[tuple[str, ...]] = []
    kinds: set[str] = set()
    statuses: set[str] = set()
    durations: list[Duration] = []
    attributes: list[Attribute] = []
    labels: list[str] = []
    notes: list[tuple[str, ...]] = []
    for token in tokens:
        if token.lower().startswith(("dur", "duration")) and any(op in token for op in "<>="):
            durations.append(_duration(token))
            continue
        key, colon, value = token.partition(":")
        if colon and key and not _looks_like_path(token):
            lowered = key.lower()
            if not value:
                raise QueryError(f"The term {token!r} has no value after the colon.")
            if lowered == "kind":
                kinds.add(_one_of(value, KINDS, "kind"))
            elif lowered == "status":
                statuses.add(_one_of(value, STATUSES, "status"))
            elif lowered == "name":
                names.append(_words(value, token))
            elif lowered == "label":
                labels.append(value.strip().casefold())
            elif lowered == "note":
                notes.append(_words(value, token))
            else:
                attributes.append(Attribute(key, _words(value, token)))
            continue
        texts.append(_words(token, token))
    if len(kinds) > 1 or len(statuses) > 1:
        raise QueryError("A span has one kind and one status: give kind: and status: at most once each.")
    return Query(stripped, tuple(texts), tuple(names), frozenset(kinds), frozenset(statuses),
                 tuple(durations), tuple(attributes), tuple(dict.fromkeys(labels)), tuple(notes))


def _looks_like_path(token: str) -> bool:
    """`C:\\dir` or `http://x` are text to find, not key:value terms."""
    key, _, value = token.partition(":")
    return value.startswith("//") or (len(key) == 1 and value.startswith("\\"))


def _duration(token: str) -> Duration:
    match = DURATION.match(token)
    if match is None:
        raise QueryError(f"The term {token!r} is not a duration test such as dur>2s or dur<100ms.")
    _, op, number, unit = match.groups()
    return Duration(op, float(number) * UNITS[(unit or "s").lower()])


def _one_of(value: str, allowed: frozenset[str], what: str) -> str:
    lowered = value.lower()
    if lowered not in allowed:
        raise QueryError(f"{value!r} is not a span {what}; use one of {', '.join(sorted(allowed))}.")
    return lowered


def _words(value: str, token: str) -> tuple[str, ...]:
    found = words_of(value)
    if not found:
        raise QueryError(f"The term {token!r} has no letters or digits to search for.")
    return found


@lru_cache(maxsize=256)
def word_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """The words in order, separated by non-word characters, the last one as a prefix."""
    body = r"[\W_]+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![^\W_]){body}", re.IGNORECASE | re.UNICODE)


def holds_words(words: tuple[str, ...], text: str) -> bool:
    """Whether `text` holds the word sequence (`word_pattern`).

    ASCII text is searched for the first word with `str.find` and the pattern tried only there: its leading
    look-behind keeps `re.search` from skipping ahead, so it tries every position (about 40x slower on a
    model call's few KB of messages). Other text is searched by the pattern, whose case folding `lower`
    does not reproduce."""
    pattern = word_pattern(words)
    first = words[0]
    if not (text.isascii() and first.isascii()):
        return pattern.search(text) is not None
    lowered = text.lower()
    at = lowered.find(first)
    while at >= 0:
        if pattern.match(text, at):
            return True
        at = lowered.find(first, at + 1)
    return False


def matches_text(words: tuple[str, ...], *texts: str | None) -> bool:
    """Whether any of `texts` holds the word sequence (the scan fallback's text test)."""
    return any(t and holds_words(words, t) for t in texts)


def fts_phrase(words: tuple[str, ...]) -> str:
    """An FTS5 phrase with a prefix on its last word: `"payments py" *`."""
    return '"' + " ".join(words) + '" *'
