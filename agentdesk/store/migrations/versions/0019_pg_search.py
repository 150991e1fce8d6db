"""pg search: a full-text index over spans on PostgreSQL (tsvector, GIN), as 0006 gave SQLite (issue 21)

Revision ID: 0019_pg_search
Revises: 0014_anchor_location
Create Date: 2026-12-06 07:10:00

PostgreSQL only (a no-op on SQLite, whose FTS5 index is 0006's):

- `spans_search`: a GIN index over each span's words, the name weighted A, input and output text B,
  attributes C. A word is a run of letters and digits (everything else, `_` and `.` included, only
  separates words), as SQLite's unicode61 tokenizer and the scan's `query.WORD` split them; the
  `simple` configuration lowercases and keeps every word (no stop words, no stemming). Each column is
  indexed up to its first 100,000 characters: a tsvector holds at most 1 MB, and a span's insert must
  never fail because its text is long.
- `spans_search_long`: the (few) spans with a column longer than that, by run, so a search reads them
  too and finds what lies past the indexed part (`store/search/pg_index.py` checks every candidate's
  text with the query's own pattern anyway).

The expressions are written out here, not imported: `store/search/pg_index.py` repeats them (the planner
uses the index only for the same expression) and tests/test_search_backends.py checks the two agree.
Indexes need no grants: every level that may read spans may search them; writers pay the vector on
insert (GIN's pending list batches the index's own work).
"""
from __future__ import annotations

from alembic import op

revision = '0019_pg_search'
down_revision = '0014_anchor_location'
branch_labels = None
depends_on = None

CAP = 100_000
"""Characters of each column indexed."""


def _words(column: str) -> str:
    return (f"to_tsvector('simple'::regconfig, regexp_replace(left(coalesce({column}, ''), {CAP}), "
            "'[^[:alnum:]]+', ' ', 'g'))")


VECTOR = (f"(setweight({_words('name')}, 'A') || setweight({_words('input_text')}, 'B') || "
          f"setweight({_words('output_text')}, 'B') || setweight({_words('attributes')}, 'C'))")
LONG = " OR ".join(f"length({c}) > {CAP}" for c in ("name", "input_text", "output_text", "attributes"))


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"CREATE INDEX IF NOT EXISTS spans_search ON public.spans USING gin ({VECTOR})")
    op.execute(f"CREATE INDEX IF NOT EXISTS spans_search_long ON public.spans (run_id) WHERE {LONG}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS public.spans_search_long")
    op.execute("DROP INDEX IF EXISTS public.spans_search")
