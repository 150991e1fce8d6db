"""Repairs a revision cannot make, run by env.py before the migrations: a database that ran an edited revision.

Why not in a revision: `0008_pg_functions` in its first committed form (3892fd8) made only the audit
functions, and `0012_least_privilege` grants and rewrites the decision and context functions the final 0008
makes, so such a database stops at 0012 with "function agentdesk_withdraw(...) does not exist" and never
reaches a later revision that could fix it. Before any revision runs, a database whose stamp is between 0008
and 0011 and that lacks those functions gets the final 0008 (sql/0021/first_0008.sql, part of revision
0021_pg_functions_refresh, which then fixes what every older 0008 leaves). Nothing runs on any other database.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection

FIRST_0008 = Path(__file__).resolve().parent / "sql" / "0021" / "first_0008.sql"
BEFORE_0012 = frozenset({"0008_pg_functions", "0009_presence", "0010_import_staging", "0011_agent_tokens"})
"""Stamps of a database that ran 0008 and not yet 0012 (the first revision that needs the final 0008)."""
FINAL_0008_MARK = "public.agentdesk_withdraw(text, text, text, text)"
"""A function every 0008 after the first makes, and 0012 and later keep."""


def repair_before_migrating(conn: Connection) -> None:
    if conn.dialect.name != "postgresql" or _stamp(conn) not in BEFORE_0012:
        return
    if conn.execute(text("SELECT to_regprocedure(:f) IS NOT NULL"), {"f": FINAL_0008_MARK}).scalar():
        return
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for statement in FIRST_0008.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n;\n"):
            if statement.strip() and not all(line.startswith("--") for line in statement.strip().splitlines()):
                cursor.execute(statement)  # no parameters: function bodies hold % and : as written
    finally:
        cursor.close()


def _stamp(conn: Connection) -> str | None:
    if conn.execute(text("SELECT to_regclass('public.alembic_version')")).scalar() is None:
        return None
    stamps = conn.execute(text("SELECT version_num FROM public.alembic_version")).scalars().all()
    return str(stamps[0]) if len(stamps) == 1 else None
