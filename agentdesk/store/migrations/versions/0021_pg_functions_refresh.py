"""pg functions refresh: a database that ran an earlier 0008_pg_functions gets the functions head defines

Revision ID: 0021_pg_functions_refresh
Revises: 0019_pg_search
Create Date: 2026-12-06 07:30:00

On SQLite, one repair of the same kind: `0006_search` built the span index from store/search/fts.py, which
changed after 0006 landed (eccca4c: triggers that only mark written spans dirty, instead of a contentless
index kept by triggers on every write). A store that ran the earlier 0006 has `span_fts` and no
`span_search_dirty`: search scans it as if it had no index, while its triggers still index every write. Such a
store gets the index a store made at head has (sql/0021/sqlite_search.sql); any other store is left alone.

On PostgreSQL:

`0008_pg_functions` was edited in place in three commits after it was first committed (3892fd8 → c341d74 →
ac3927d → 74b1842), so a database keeps the 0008 it ran. What each older one leaves at 0014, beside a
database made at head (tests/migrations/test_edited_0008.py builds each):

- c341d74 or ac3927d: `agentdesk_audit_macs_ok(text[], text[])` (returns booleans, ignores the login), no
  `agentdesk_audit_macs_ok(text[], text[], text[])`, no `agentdesk_audit_anchors_ok`, and an
  `agentdesk_audit_write` that 0012 derived from the older appender: it signs a record without the login, so a
  db_login changed afterwards goes unseen.
- 3892fd8 (the first): only the audit functions, so 0012 cannot run at all; `migrations/repairs.py` brings
  such a database to the final 0008 before 0012 (sql/0021/first_0008.sql); it then holds what the final 0008
  makes, and needs nothing here.

This revision drops the old `agentdesk_audit_macs_ok(text[], text[])` and runs `CREATE OR REPLACE` from the
versioned files in sql/0021/ (each the function as head prints it with pg_get_functiondef, then its grants)
for a function that is missing, or whose body is one an older 0008 left behind (`DRIFTED`, md5 of prosrc). A
function in any other state is left alone: what a later revision (chained after this one or before it)
defines is never put back to 0014's body, so the revision is correct wherever the lead chains it.

The SQL files are read from this revision's own fixed folder, so the revision stays what it was when later
code changes; migrations/landed.sha256 holds their hashes beside this file's (tests/migrations/test_landed.py).
"""
from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = '0021_pg_functions_refresh'
down_revision = '0019_pg_search'
branch_labels = None
depends_on = None

SQL = Path(__file__).resolve().parent.parent / "sql" / "0021"

OBSOLETE = ("agentdesk_audit_macs_ok(text[], text[])",)
"""Signatures only an older 0008 made (head's has a third argument, the logins)."""

DRIFTED: dict[str, tuple[str, frozenset[str]]] = {
    "agentdesk_audit_write.sql": ("agentdesk_audit_write(text, text, text, text, text, text)",
                                  frozenset({"c190c5eaac8788b117ef3c43422764c3"})),
    "agentdesk_audit_macs_ok.sql": ("agentdesk_audit_macs_ok(text[], text[], text[])", frozenset()),
    "agentdesk_audit_anchors_ok.sql": ("agentdesk_audit_anchors_ok(bigint[], text[], text[])", frozenset()),
}
"""File -> (the function it defines, md5 of the bodies an older 0008 leaves it with): it is run when the
function is missing or has one of those bodies."""


def _run(bind: sa.Connection, statement: str) -> None:
    """Through the driver with no parameters: function bodies hold % and : that must stay as written."""
    cursor = bind.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(statement)
    finally:
        cursor.close()


def _needs_refresh(bind: sa.Connection, function: str, drifted: frozenset[str]) -> bool:
    body = bind.execute(sa.text("SELECT md5(p.prosrc) FROM pg_proc p WHERE p.oid = to_regprocedure(:f)"),
                        {"f": f"public.{function}"}).scalar()
    return body is None or body in drifted


SQLITE_OLD_INDEX = "SELECT 1 FROM sqlite_master WHERE name = 'span_fts'"
SQLITE_NEW_INDEX = "SELECT 1 FROM sqlite_master WHERE name = 'span_search_dirty'"


def _sqlite_search_index(bind: sa.Connection) -> None:
    if bind.exec_driver_sql(SQLITE_OLD_INDEX).first() is None or bind.exec_driver_sql(SQLITE_NEW_INDEX).first():
        return
    script = (SQL / "sqlite_search.sql").read_text(encoding="utf-8").replace("\r\n", "\n")
    for statement in script.split("\n;\n"):
        if any(line and not line.startswith("--") for line in statement.strip().splitlines()):
            bind.exec_driver_sql(statement)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _sqlite_search_index(bind)
    if bind.dialect.name != "postgresql":
        return
    for function in OBSOLETE:
        _run(bind, f"DROP FUNCTION IF EXISTS public.{function}")
    for name, (function, drifted) in DRIFTED.items():
        if _needs_refresh(bind, function, drifted):
            # as committed (LF): a checkout that made it CRLF would put a \r in every body line
            _run(bind, (SQL / name).read_text(encoding="utf-8").replace("\r\n", "\n"))


def downgrade() -> None:
    """Nothing to undo: head's functions are what 0014 defines too, so they stay."""
