"""Search on PostgreSQL: the `span_words` GIN index finds candidates, the query's own patterns decide.

Migration 0019 keeps each span's words as a tsvector (name A, input and output text B, attributes C;
words split as `query.WORD` splits them), written by an indexer off the write path (`indexer`, the
server's `agentdesk_index_words`); spans written since are in `span_words_dirty` and tested as they
are. A query becomes, per term, the words' presence (`'read' & 'fil':*`: the last word a prefix, as
everywhere) for the index, and the term's pattern as a PostgreSQL regular expression for the answer:
the words in order, only non-word characters between them, the first at a word's start
(`query.word_pattern`, the scan's test). The index alone would not do: a tsvector keeps positions
only up to 16,383 (a phrase deep in a long text would be missed) and holds each column's first `CAP`
characters (`spans_search_long` lists the spans with more, which are always read and tested).
Attribute terms are tested in Python on the candidates' attributes (`run_search.attribute_matches`,
the scan's test): a key may need JSON parsing that SQL cannot do without failing on a value that is
not JSON.

One difference from SQLite's FTS5 stays: unicode61 removes diacritics (`cafe` finds "café"); the
`simple` configuration does not.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, text

from agentdesk.store.search.query import Query, words_of

WORDS, DIRTY = "span_words", "span_words_dirty"
"""Migration 0019's tables: each indexed span's words (GIN), and the spans written since they were indexed."""
CAP = 100_000
"""Characters of each column the index holds (migration 0019)."""
LONG = " OR ".join(f"length(s.{c}) > {CAP}" for c in ("name", "input_text", "output_text", "attributes"))
"""The spans too long for the index (the `spans_search_long` index's predicate): tested as they are."""
INDEX_SQL = "SELECT public.agentdesk_index_words(:run, :limit)"
"""Index up to :limit dirty spans (of :run, or any) on the server; answers how many (migration 0019)."""

_INDEXED: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def has_index(engine: Engine) -> bool:
    """Whether this PostgreSQL database has migration 0019's index (asked once per engine)."""
    known = _INDEXED.get(engine)
    if known is None:
        with engine.connect() as conn:
            known = conn.execute(text("SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tablename = :n"),
                                 {"n": WORDS}).first() is not None
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
    return "w.words @@ to_tsquery('simple'::regconfig, :tsquery)", tests


NO_SEQ_SCAN = "SET LOCAL enable_seqscan = off"
"""For tests that check the index is usable: on a small table the planner rightly reads it whole. Not for
searches: with the words precomputed a scan of `span_words` costs tens of milliseconds, and forcing index
paths made the planner's choices worse on fresh statistics (1.2 s instead of 0.7 s after an import)."""


def statement(index: str | None, scope: Sequence[str], tests: Sequence[str], columns: str) -> str:
    """SELECT `columns` (of spans `s`) within `scope` (a run, or every shown run) passing `tests`: the spans
    the index names that were not written since they were indexed, every dirty span (tested as it is now),
    and the spans too long for the index that it did not name; each span once."""
    where = " AND ".join([*scope, *tests]) or "true"
    if index is None:
        return f"SELECT {columns} FROM spans s WHERE {where}"
    fresh = f"NOT EXISTS (SELECT 1 FROM {DIRTY} d WHERE d.span_id = s.id)"
    # The dirty spans joined first, behind a fence (OFFSET 0), then tested: with the tests beside the join
    # the planner ran the patterns over the whole run and probed the dirty set after (0.4 s at 100,000 spans)
    dirty = (f"SELECT s.* FROM {DIRTY} d JOIN spans s ON s.id = d.span_id WHERE {' AND '.join(scope) or 'true'} "
             "OFFSET 0")
    return (f"SELECT {columns} FROM {WORDS} w JOIN spans s ON s.id = w.span_id WHERE {index} AND {fresh} "
            f"AND {where} "
            f"UNION ALL SELECT {columns} FROM ({dirty}) s WHERE {' AND '.join(tests) or 'true'} "
            f"UNION ALL SELECT {columns} FROM spans s WHERE ({LONG}) AND {fresh} AND NOT EXISTS "
            f"(SELECT 1 FROM {WORDS} w WHERE w.span_id = s.id AND {index}) AND {where}")
