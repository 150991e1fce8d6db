"""context checks per statement: an agent's context appends are checked once a statement, not once a row

Revision ID: 0026_context_statement_checks
Revises: 0025_search_external_content
Create Date: 2026-12-06 18:45:00

Migration 0012 made an agent login append context only: new items (never covering, summarising or removing
one) and an item's first revision (never a second). It checked that in a BEFORE INSERT trigger on each row of
`context_items` and `context_item_revisions`, and each check first asked whether the writer is the owner (who
may do anything): a PL/pgSQL call and a role lookup per row. An import of a 100,000-span trace appends 76,160
items and as many revisions, so that was 152,320 calls, about 1 s of the server's 8 s (measured: the import's
writing took 10.2-11.7 s with them, 8.6-10.4 s without, three pairs), and PostgreSQL's import of the trace
stood at 1.14-1.39x SQLite's against issue 21's target of 1.3x.

The same checks now run once per statement, AFTER it, over its rows (a transition table, `added`): the owner
question is asked once; an item row that covers, summarises or removes, or an item that has more than one
revision once the statement's rows are in (a second revision, or two in one statement), refuses the whole
statement with the same sentence as before. A refusal still undoes the statement: an error in an AFTER
trigger aborts it. The checks run as the writer (not SECURITY DEFINER), as 0012's did.

PostgreSQL only; SQLite has no logins. The SQL is written out here, not imported, so the revision stays what
it was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0026_context_statement_checks'
down_revision = '0025_search_external_content'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"

UPGRADE = [
    "DROP TRIGGER IF EXISTS context_items_appended ON public.context_items",
    "DROP TRIGGER IF EXISTS context_item_revisions_appended ON public.context_item_revisions",
    "DROP FUNCTION IF EXISTS public.agentdesk_context_appended()",
    f"""
    CREATE FUNCTION public.agentdesk_context_items_appended() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        IF NOT public.agentdesk_is_owner(current_user)
           AND EXISTS (SELECT 1 FROM added a WHERE a.compaction_id IS NOT NULL OR a.summary_of IS NOT NULL
                                                   OR a.removed) THEN
            PERFORM public.agentdesk_refuse('covering or removing context', 'operator (through the functions)');
        END IF;
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_context_revisions_appended() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        IF NOT public.agentdesk_is_owner(current_user)
           AND EXISTS (SELECT 1 FROM (SELECT DISTINCT a.item_id FROM added a) n
                       WHERE (SELECT count(*) FROM public.context_item_revisions r WHERE r.item_id = n.item_id) > 1)
        THEN
            PERFORM public.agentdesk_refuse('revising a context item', 'operator (through agentdesk_edit_item)');
        END IF;
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER context_items_appended AFTER INSERT ON public.context_items
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT
        EXECUTE FUNCTION public.agentdesk_context_items_appended()
    """,
    """
    CREATE TRIGGER context_item_revisions_appended AFTER INSERT ON public.context_item_revisions
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT
        EXECUTE FUNCTION public.agentdesk_context_revisions_appended()
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_context_items_appended() FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_context_revisions_appended() FROM PUBLIC",
]

DOWNGRADE = [
    "DROP TRIGGER IF EXISTS context_items_appended ON public.context_items",
    "DROP TRIGGER IF EXISTS context_item_revisions_appended ON public.context_item_revisions",
    "DROP FUNCTION IF EXISTS public.agentdesk_context_items_appended()",
    "DROP FUNCTION IF EXISTS public.agentdesk_context_revisions_appended()",
    f"""
    CREATE FUNCTION public.agentdesk_context_appended() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        IF public.agentdesk_is_owner(current_user) THEN
            RETURN NEW;
        END IF;
        -- NEW's fields are read only under the table that has them (PL/pgSQL does not short-circuit AND)
        IF TG_TABLE_NAME = 'context_items' THEN
            IF NEW.compaction_id IS NOT NULL OR NEW.summary_of IS NOT NULL OR NEW.removed THEN
                PERFORM public.agentdesk_refuse('covering or removing context', 'operator (through the functions)');
            END IF;
        ELSIF EXISTS (SELECT 1 FROM public.context_item_revisions r WHERE r.item_id = NEW.item_id) THEN
            PERFORM public.agentdesk_refuse('revising a context item', 'operator (through agentdesk_edit_item)');
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER context_items_appended BEFORE INSERT ON public.context_items
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_context_appended()
    """,
    """
    CREATE TRIGGER context_item_revisions_appended BEFORE INSERT ON public.context_item_revisions
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_context_appended()
    """,
]


def _run(bind: sa.Connection, statement: str) -> None:
    """One statement through the driver, no parameters: function bodies hold % and : that must stay as written."""
    cursor = bind.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(statement)
    finally:
        cursor.close()


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in UPGRADE:
        _run(bind, statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in DOWNGRADE:
        _run(bind, statement)
