"""presence: who is looking at which approval, for the window's "also looking" line (PostgreSQL only)

Revision ID: 0009_presence
Revises: 0008_pg_functions
Create Date: 2026-12-02 04:40:00

One row per database login: the approval it last looked at and when (the window
writes it when the operator selects an approval and every 10 s while it stays
selected). Rows older than 30 s count as gone; nothing deletes them but their
own login (readers filter on the server's clock). Row-level security lets a login
insert, change or delete only its own row (login = session_user, which is also
the column's default), whatever client it uses; everyone in agentdesk_viewer may
read all rows and keep their own. A row trigger NOTIFYs `agentdesk_presence` with
approval ids only (the one left and the one now looked at) when a login arrives,
moves or leaves, not on every heartbeat. Presence is not product data: not in the
change log, not audited. On SQLite (one user) this revision does nothing. The SQL
is written out here, not imported, so the revision stays what it was. The lead
re-chains it at merge.
"""
from __future__ import annotations

from alembic import op

revision = '0009_presence'
down_revision = '0008_pg_functions'
branch_labels = None
depends_on = None

CHANNEL = "agentdesk_presence"
LIVE_S = 30

UPGRADE = [
    """
    CREATE TABLE presence (
        login text PRIMARY KEY DEFAULT session_user,
        approval_id text NOT NULL,
        seen_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    "CREATE INDEX ix_presence_approval ON presence (approval_id, seen_at)",
    "ALTER TABLE presence ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY presence_read ON presence FOR SELECT USING (true)",
    "CREATE POLICY presence_insert ON presence FOR INSERT WITH CHECK (login = session_user)",
    "CREATE POLICY presence_update ON presence FOR UPDATE USING (login = session_user) "
    "WITH CHECK (login = session_user)",
    "CREATE POLICY presence_delete ON presence FOR DELETE USING (login = session_user)",
    # Looking is reading: viewers show up too. The operators' default grants (0005) are narrowed to this.
    "REVOKE ALL ON presence FROM agentdesk_viewer, agentdesk_operator, agentdesk_admin",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON presence TO agentdesk_viewer",
    f"""
    CREATE OR REPLACE FUNCTION agentdesk_presence_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            PERFORM pg_notify('{CHANNEL}', OLD.approval_id);
        ELSIF TG_OP = 'INSERT' THEN
            PERFORM pg_notify('{CHANNEL}', NEW.approval_id);
        ELSIF OLD.approval_id IS DISTINCT FROM NEW.approval_id
              OR OLD.seen_at < now() - interval '{LIVE_S} seconds' THEN
            PERFORM pg_notify('{CHANNEL}', OLD.approval_id || ' ' || NEW.approval_id);
        END IF;
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER presence_notify AFTER INSERT OR UPDATE OR DELETE ON presence
        FOR EACH ROW EXECUTE FUNCTION agentdesk_presence_notify()
    """,
]

DOWNGRADE = [
    "DROP TABLE IF EXISTS presence",
    "DROP FUNCTION IF EXISTS agentdesk_presence_notify()",
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
