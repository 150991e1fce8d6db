"""pg search: a full-text index over spans on PostgreSQL (tsvector, GIN), kept off the write path (issue 21)

Revision ID: 0019_pg_search
Revises: 0018_notes
Create Date: 2026-12-06 07:10:00

PostgreSQL only (a no-op on SQLite, whose FTS5 index is 0006's). The same shape as SQLite's: a write to
`spans` only marks the span dirty, an indexer tokenizes later, and a search takes the index's answer for
spans not dirty and tests the dirty ones as they are now (`store/search/pg_index.py`).

Why not an index on an expression of `spans`: every insert then tokenizes four columns and updates the
GIN index in the writer's statement, ~80 us a span, which made an import of 100,000 spans ~8 s longer
(measured with COPY; the import must stay within 1.3x of SQLite's).

- `span_words (span_id, words)`: each span's words as a tsvector, GIN-indexed. A word is a run of letters
  and digits (everything else, `_` and `.` included, only separates words), as SQLite's unicode61
  tokenizer and the scan's `query.WORD` split them; the `simple` configuration lowercases and keeps every
  word. Each column is indexed up to its first 100,000 characters (a tsvector holds at most 1 MB: an
  indexer must never fail on a long text); `spans_search_long` lists the spans with more, which a search
  always tests as they are.
- `span_words_dirty (span_id)`: spans written since they were last indexed. Statement-level triggers on
  `spans` (insert, update, delete) add the statement's ids in one INSERT from their transition table: a
  COPY of 20,000 spans pays one statement, not 20,000 trigger calls. Every stored span starts dirty.
- `agentdesk_index_words(target_run, max_rows)`: indexes up to `max_rows` (1..10,000) dirty spans (of one
  run, or any), from their current rows, and clears their marks; dirty rows another indexer holds are
  skipped. SECURITY DEFINER: it writes only these two derived tables, so every level may run it (a window's
  background indexer runs as whoever opened it). EXECUTE: viewers, operators, admins, agents.
- `agentdesk_span_words_mark_new()` / `_mark_old()`: the trigger functions (SECURITY DEFINER: a login
  that may insert spans may not write the dirty set itself). Nobody calls them by name: no EXECUTE.

Grants: every level reads both tables (SELECT); nobody writes them but these functions.
"""
from __future__ import annotations

from alembic import op

revision = '0019_pg_search'
down_revision = '0018_notes'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"
GROUPS = "agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent"
CAP = 100_000
"""Characters of each column indexed."""


def _words(column: str) -> str:
    return (f"to_tsvector('simple'::regconfig, regexp_replace(left(coalesce({column}, ''), {CAP}), "
            "'[^[:alnum:]]+', ' ', 'g'))")


VECTOR = (f"setweight({_words('s.name')}, 'A') || setweight({_words('s.input_text')}, 'B') || "
          f"setweight({_words('s.output_text')}, 'B') || setweight({_words('s.attributes')}, 'C')")
LONG = " OR ".join(f"length({c}) > {CAP}" for c in ("name", "input_text", "output_text", "attributes"))

UPGRADE = [
    "CREATE TABLE public.span_words (span_id VARCHAR(64) PRIMARY KEY, words tsvector NOT NULL)",
    "CREATE INDEX span_words_search ON public.span_words USING gin (words)",
    "CREATE TABLE public.span_words_dirty (span_id VARCHAR(64) PRIMARY KEY)",
    "INSERT INTO public.span_words_dirty (span_id) SELECT id FROM public.spans",
    f"CREATE INDEX spans_search_long ON public.spans (run_id) WHERE {LONG}",
    f"""CREATE FUNCTION public.agentdesk_span_words_mark_new() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER {SAFE} AS $$
    BEGIN
        INSERT INTO public.span_words_dirty (span_id) SELECT id FROM changed ON CONFLICT DO NOTHING;
        RETURN NULL;
    END $$""",
    f"""CREATE FUNCTION public.agentdesk_span_words_mark_old() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER {SAFE} AS $$
    BEGIN
        INSERT INTO public.span_words_dirty (span_id) SELECT id FROM gone ON CONFLICT DO NOTHING;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER span_words_insert AFTER INSERT ON public.spans REFERENCING NEW TABLE AS changed "
    "FOR EACH STATEMENT EXECUTE FUNCTION public.agentdesk_span_words_mark_new()",
    "CREATE TRIGGER span_words_update AFTER UPDATE ON public.spans REFERENCING NEW TABLE AS changed "
    "FOR EACH STATEMENT EXECUTE FUNCTION public.agentdesk_span_words_mark_new()",
    "CREATE TRIGGER span_words_delete AFTER DELETE ON public.spans REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION public.agentdesk_span_words_mark_old()",
    f"""CREATE FUNCTION public.agentdesk_index_words(target_run text, max_rows integer) RETURNS integer
        LANGUAGE plpgsql SECURITY DEFINER {SAFE} AS $$
    DECLARE
        picked text[];
    BEGIN
        IF max_rows IS NULL OR max_rows < 1 OR max_rows > 10000 THEN
            RAISE EXCEPTION 'agentdesk: spans are indexed 1 to 10000 at a time, not %', max_rows
                USING ERRCODE = '22023';
        END IF;
        SELECT array_agg(p.span_id) INTO picked FROM (
            SELECT d.span_id FROM public.span_words_dirty d
            WHERE target_run IS NULL
               OR EXISTS (SELECT 1 FROM public.spans s WHERE s.id = d.span_id AND s.run_id = target_run)
            LIMIT max_rows FOR UPDATE SKIP LOCKED) p;
        IF picked IS NULL THEN
            RETURN 0;
        END IF;
        DELETE FROM public.span_words WHERE span_id = ANY (picked);
        INSERT INTO public.span_words (span_id, words)
            SELECT s.id, {VECTOR} FROM public.spans s WHERE s.id = ANY (picked);
        DELETE FROM public.span_words_dirty WHERE span_id = ANY (picked);
        RETURN cardinality(picked);
    END $$""",
    f"REVOKE ALL ON public.span_words, public.span_words_dirty FROM PUBLIC, {GROUPS}",
    f"GRANT SELECT ON public.span_words, public.span_words_dirty TO {GROUPS}",
    "REVOKE ALL ON FUNCTION public.agentdesk_span_words_mark_new() FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_span_words_mark_old() FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_index_words(text, integer) FROM PUBLIC",
    f"GRANT EXECUTE ON FUNCTION public.agentdesk_index_words(text, integer) TO {GROUPS}",
]

DOWNGRADE = [
    "DROP TRIGGER IF EXISTS span_words_insert ON public.spans",
    "DROP TRIGGER IF EXISTS span_words_update ON public.spans",
    "DROP TRIGGER IF EXISTS span_words_delete ON public.spans",
    "DROP FUNCTION IF EXISTS public.agentdesk_index_words(text, integer)",
    "DROP FUNCTION IF EXISTS public.agentdesk_span_words_mark_new()",
    "DROP FUNCTION IF EXISTS public.agentdesk_span_words_mark_old()",
    "DROP INDEX IF EXISTS public.spans_search_long",
    "DROP TABLE IF EXISTS public.span_words_dirty",
    "DROP TABLE IF EXISTS public.span_words",
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in DOWNGRADE:
        op.execute(statement)
