"""Search on PostgreSQL: the `spans_search` GIN index finds candidates, the query's own patterns decide.

Migration 0019 indexes each span's words as a tsvector (name A, input and output text B, attributes C;
words split as `query.WORD` splits them). A query becomes, per term, the words' presence (`'read' & 'fil':*`:
the last word a prefix, as everywhere) for the index, and the term's
pattern as a PostgreSQL regular expression for the answer: the words in order, only non-word
characters between them, the first at a word's start (`query.word_pattern`, the scan's test). The
index alone would not do: a tsvector keeps positions only up to 16,383 (a phrase deep in a long text
would be missed) and indexes each column's first `CAP` characters (`spans_search_long` lists the
spans with more, which are always read and tested). Attribute terms are tested in Python on the
candidates' attributes (`run_search.attribute_matches`, the scan's test): a key may need JSON
parsing that SQL cannot do without failing on a value that is not JSON.

One difference from SQLite's FTS5 stays: unicode61 removes diacritics (`cafe` finds "café"); the
`simple` configuration does not.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, text

from agentdesk.store.search.query import Query, words_of

INDEX = "spans_search"
CAP = 100_000
"""Characters of each column the index holds (migration 0019)."""


def _words(column: str) -> str:
    return (f"to_tsvector('simple'::regconfig, regexp_replace(left(coalesce({column}, ''), {CAP}), "
            "'[^[:alnum:]]+', ' ', 'g'))")


VECTOR = (f"(setweight({_words('name')}, 'A') || setweight({_words('input_text')}, 'B') || "
          f"setweight({_words('output_text')}, 'B') || setweight({_words('attributes')}, 'C'))")
"""The indexed expression, exactly as migration 0019 wrote it (the planner matches it by its form)."""
LONG = " OR ".join(f"length({c}) > {CAP}" for c in ("name", "input_text", "output_text", "attributes"))
"""The `spans_search_long` index's predicate, as written there."""

_INDEXED: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def has_index(engine: Engine) -> bool:
    """Whether this PostgreSQL database has migration 0019's index (asked once per engine)."""
    known = _INDEXED.get(engine)
    if known is None:
        with engine.connect() as conn:
            known = conn.execute(text("SELECT 1 FROM pg_indexes WHERE schemaname = 'public' AND indexname = :n"),
                                 {"n": INDEX}).first() is not None
        _INDEXED[engine] = known
    return known


def _lexemes(words: Sequence[str]) -> list[str]:
    """tsquery operands: each word, the last one a prefix. No weights: GIN keeps none, so a weighted query
    makes the server recompute every candidate's vector (a second at 100,000 spans); the patterns test
    the columns instead."""
    return [f"'{w}'{':*' if n == len(words) - 1 else ''}" for n, w in enumerate(words)]


def _pattern(words: Sequence[str]) -> str:
    """`query.word_pattern` as a PostgreSQL regular expression (matched case-insensitively with `~*`)."""
    return "(^|[^[:alnum:]])" + "[^[:alnum:]]+".join(words)


def text_tests(q: Query, params: dict[str, Any], table: str = "s") -> tuple[str | None, list[str]]:
    """(the index's condition, the conditions deciding) for the query's word terms: the index names the
    candidates, the terms' patterns decide. (None, []) for a query of column terms only."""
    operands: list[str] = []
    tests: list[str] = []
    for n, words in enumerate(q.text):
        operands += _lexemes(words)
        params[f"text{n}"] = _pattern(words)
        tests.append(f"({table}.name ~* :text{n} OR {table}.input_text ~* :text{n} "
                     f"OR {table}.output_text ~* :text{n})")
    for n, words in enumerate(q.names):
        operands += _lexemes(words)
        params[f"name{n}"] = _pattern(words)
        tests.append(f"{table}.name ~* :name{n}")
    for a in q.attributes:
        operands += [f"'{w}'" for w in words_of(a.key)] + _lexemes(a.words)
    if not operands:
        return None, []
    params["tsquery"] = " & ".join(operands)
    # VECTOR names the columns bare, as the index does: the statement reads spans alone
    return f"{VECTOR} @@ to_tsquery('simple'::regconfig, :tsquery)", tests


NO_SEQ_SCAN = "SET LOCAL enable_seqscan = off"
"""For the search's transaction: the planner misjudges how many rows a prefix query matches and may scan
the table instead, computing every span's vector (seconds at 100,000 spans) where the index answers."""


def statement(index: str | None, tests: Sequence[str], columns: str) -> str:
    """SELECT `columns` of the spans passing `tests` that the index names, and of the spans too long for
    the index (`LONG`) that it does not: each span once."""
    where = " AND ".join(tests) or "true"
    if index is None:
        return f"SELECT {columns} FROM spans s WHERE {where}"
    return (f"SELECT {columns} FROM spans s WHERE {index} AND {where} UNION ALL "
            f"SELECT {columns} FROM spans s WHERE ({LONG}) AND NOT ({index}) AND {where}")
