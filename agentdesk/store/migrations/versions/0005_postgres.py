"""postgres: NOTIFY on change-log commits, group roles, grants, append-only audit (PostgreSQL only)

Revision ID: 0005_postgres
Revises: 0003
Create Date: 2026-12-01 22:30:00

On SQLite this revision does nothing: its DDL is PostgreSQL's (a statement trigger
with a transition table, cluster roles, grants). The SQL is written out here, not
imported, so the revision stays what it was when later code changes. The lead
re-chains it at merge.
"""
from __future__ import annotations

from alembic import op

revision = '0005_postgres'
down_revision = '0003'
branch_labels = None
depends_on = None

CHANNEL = "agentdesk_changes"
ROLES = ("agentdesk_viewer", "agentdesk_operator", "agentdesk_admin")
AUDIT_TABLES = ("audit_log",)

UPGRADE = [
    # The bus: one NOTIFY per inserting statement, carrying only the highest seq it wrote
    # (a few bytes, far under the 8000-byte payload limit). NOTIFY is transactional: it is
    # delivered on commit and dropped on rollback; listeners re-read the change log.
    f"""
    CREATE OR REPLACE FUNCTION agentdesk_notify_changes() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', (SELECT max(seq)::text FROM new_rows));
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER change_log_notify AFTER INSERT ON change_log
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION agentdesk_notify_changes()
    """,
    # Group roles are cluster-wide: create them once, whichever database migrates first.
    """
    DO $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentdesk_viewer') THEN
            CREATE ROLE agentdesk_viewer NOLOGIN;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentdesk_operator') THEN
            CREATE ROLE agentdesk_operator NOLOGIN IN ROLE agentdesk_viewer;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentdesk_admin') THEN
            CREATE ROLE agentdesk_admin NOLOGIN IN ROLE agentdesk_operator;
        END IF;
    END $$
    """,
    # The audit records the database login, set by the server: the client cannot claim another.
    "ALTER TABLE audit_log ADD COLUMN db_login text",
    """
    CREATE OR REPLACE FUNCTION agentdesk_audit_login() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.db_login := session_user;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER audit_log_login BEFORE INSERT ON audit_log
        FOR EACH ROW EXECUTE FUNCTION agentdesk_audit_login()
    """,
    # Grants: viewers read; operators write (agents' runtime writes and operators' decisions and
    # edits), but only ever append to the audit; admins also change rules and prune the change log.
    "GRANT USAGE ON SCHEMA public TO agentdesk_viewer",
    "GRANT SELECT ON ALL TABLES IN SCHEMA public TO agentdesk_viewer",
    "GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO agentdesk_operator",
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO agentdesk_operator",
    "REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM agentdesk_operator",
    # Operators keep UPDATE on rules: applying a rule bumps its hit count (changing one is checked for admin).
    "REVOKE INSERT, DELETE ON approval_rules FROM agentdesk_operator",
    "REVOKE DELETE ON change_log FROM agentdesk_operator",
    "REVOKE INSERT, UPDATE, DELETE ON alembic_version, agentdesk_meta FROM agentdesk_operator",
    "GRANT INSERT, DELETE ON approval_rules TO agentdesk_admin",
    "GRANT DELETE ON change_log TO agentdesk_admin",
    # Tables later revisions add: readable by viewers and writable by operators unless a revision says otherwise.
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO agentdesk_viewer",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT INSERT, UPDATE, DELETE ON TABLES TO agentdesk_operator",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO agentdesk_operator",
]

DOWNGRADE = [
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM agentdesk_viewer, agentdesk_operator",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM agentdesk_operator",
    "REVOKE ALL ON ALL TABLES IN SCHEMA public FROM agentdesk_viewer, agentdesk_operator, agentdesk_admin",
    "REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM agentdesk_operator",
    "DROP TRIGGER IF EXISTS audit_log_login ON audit_log",
    "DROP FUNCTION IF EXISTS agentdesk_audit_login()",
    "ALTER TABLE audit_log DROP COLUMN IF EXISTS db_login",
    "DROP TRIGGER IF EXISTS change_log_notify ON change_log",
    "DROP FUNCTION IF EXISTS agentdesk_notify_changes()",
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in DOWNGRADE:  # the group roles stay: they are the cluster's, other stores may use them
        op.execute(statement)
