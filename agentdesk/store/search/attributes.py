"""`key:value` terms on the indexed path: the index's candidates, checked exactly against the span row.

The index finds candidates (the key's words and the value's words somewhere in the span's "key value" words,
`run_search.match_expression`); whether the words are in *that key's* value is decided here, per candidate,
as the scan decides it (`run_search.attribute_matches`): the key exists, its value is not null, and the value
(a string as it is, anything else as JSON) holds the words in order, the last one as a prefix.

Why a registered function: SQL has no word test (LIKE '%w%' also accepts the words apart, in any order, or
inside other words), and why one value rather than the whole JSON: SQLite's `->` extracts the key's value in C,
so Python parses only that value. The span row is read for its attributes (`spans.attributes`, the stored value,
maybe compressed): the index keeps no copy of them (migration 0025 dropped it, ~0.55 KB a span), and calling
`agentdesk_text` once per candidate (the LIKE tests called it once per word and once more for `json_valid`)
keeps a 47,600-hit `key:value` search as fast as it was with the copy (docs/architecture.md, "Storage").
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

from agentdesk.store.persistence.payloads import sql_text
from agentdesk.store.search.query import Query, holds_words

VALUE_HAS = "agentdesk_value_has"
"""SQL: whether a JSON value (as SQLite's `->` gives it; NULL for a missing key) holds words (space-separated)."""
KEY_HAS = "agentdesk_key_has"
"""SQL: the same for a key a JSON path may miss, the whole JSON parsed in Python: a key with `"`, `\\`, a
control or a non-ASCII character (SQLite 3.40 compares a path's label with the key as written in the JSON,
and `json.dumps` writes those escaped)."""
_PATH_SAFE = re.compile(r'[\x20\x21\x23-\x5b\x5d-\x7e]*')
"""Printable ASCII but `"` and `\\`: a key written as it is in the JSON text, which a quoted path label names."""


_ESCAPE = re.compile(r"\\.")


def _holds(value: Any, words: str) -> bool:
    if value is None:
        return False
    return holds_words(tuple(words.split(" ")), value if isinstance(value, str) else json.dumps(value))


def value_has(value_json: str | None, words: str) -> bool:
    """`VALUE_HAS`: None (no such key) and JSON null hold nothing, as in the scan.

    A string is searched in its JSON text, each escape but `\\u` made a space: every other escape stands for
    a character that is no letter or digit, and a word test only tells those from letters and digits."""
    if value_json is None:
        return False
    if value_json[:1] == '"' and "\\u" not in value_json:
        return holds_words(tuple(words.split(" ")), _ESCAPE.sub(" ", value_json[1:-1]))
    try:
        return _holds(json.loads(value_json), words)
    except ValueError:
        return False


def key_has(attributes: str | None, key: str, words: str) -> bool:
    """`KEY_HAS`: the scan's own test on the whole attributes JSON."""
    try:
        found = json.loads(attributes) if attributes else None
    except ValueError:
        return False
    return isinstance(found, dict) and _holds(found.get(key), words)


def register_checks(raw: sqlite3.Connection) -> None:
    """Make the checks callable in this connection's SQL (cheap: done before each indexed search)."""
    raw.create_function(VALUE_HAS, 2, value_has, deterministic=True)
    raw.create_function(KEY_HAS, 3, key_has, deterministic=True)


def attribute_tests(q: Query, params: dict[str, Any], table: str = "s") -> list[str]:
    """SQL conditions checking each attribute term exactly on `table`'s (a span row's) attributes.

    Each reads the stored attributes once (`agentdesk_text`); the key's value is taken out in C (`->`) when a
    JSON path can name the key. Only for the index's candidates: a span not written since it was indexed,
    so its attributes are a JSON object (the index holds attribute words for nothing else)."""
    tests: list[str] = []
    column = f"{table}.attributes"  # stored compressed when large (persistence/payloads.py): TEXT needs no call
    attrs = f"CASE WHEN typeof({column}) = 'text' THEN {column} ELSE {sql_text(column)} END"
    for n, a in enumerate(q.attributes):
        params[f"apat{n}"] = " ".join(a.words)  # words hold no spaces (query.WORD)
        if _PATH_SAFE.fullmatch(a.key):
            params[f"akey{n}"] = f'$."{a.key}"'
            tests.append(f"{VALUE_HAS}({attrs} -> :akey{n}, :apat{n})")
        else:
            params[f"akey{n}"] = a.key
            tests.append(f"{KEY_HAS}({attrs}, :akey{n}, :apat{n})")
    return tests
