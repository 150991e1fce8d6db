"""Repairs no revision can make, run by env.py before the migrations: a store that ran an edited revision.

Why not in a revision: each of these stores stops, or is refused as damaged, before it reaches a later
revision that could fix it.

- `0008_pg_functions` in its first committed form (3892fd8) made only the audit functions, and
  `0012_least_privilege` grants and rewrites the decision and context functions the final 0008 makes: such
  a database stops at 0012 ("function agentdesk_withdraw(...) does not exist"). Stamped between 0008 and
  0011 and lacking those functions, it gets the final 0008 (sql/0021/first_0008.sql, the audit key kept).
- Two revisions were re-chained after they landed on main: `0003` first followed `0001` (then `0002`) and
  `0009_presence` followed `0007_audit_hmac` (then `0008_pg_functions`). A store stamped 0003 in between
  never ran 0002 (and a later open refused it as damaged: no `otel_orphans`); one stamped 0009 never ran 0008
  (and 0012 stops on it). Stamped so and lacking the revision's tables, it runs that revision now.

0021_pg_functions_refresh then fixes what every older 0008 leaves. Nothing runs on any other store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection

FIRST_0008 = Path(__file__).resolve().parent / "sql" / "0021" / "first_0008.sql"
BEFORE_0012 = frozenset({"0008_pg_functions", "0009_presence", "0010_import_staging", "0011_agent_tokens"})
"""Stamps of a database that ran 0008 and not yet 0012 (the first revision that needs the final 0008)."""
FINAL_0008_MARK = "public.agentdesk_withdraw(text, text, text, text)"
"""A function every 0008 after the first makes, and 0012 and later keep."""


@dataclass(frozen=True)
class Skipped:
    """A revision a store may never have run although its stamp says so (it was inserted before a later one)."""

    revision: str
    stamps: frozenset[str]
    """Stamps such a store can have before the next revision that needs the skipped one would stop on it."""
    made: str
    """A table the revision makes: missing means it never ran."""
    dialect: str | None = None


SKIPPED = (
    Skipped("0002", frozenset({"0003"}), "otel_resources"),
    Skipped("0008_pg_functions", BEFORE_0012 - {"0008_pg_functions"}, "agentdesk_audit_key", "postgresql"),
)


def repair_before_migrating(conn: Connection, migrations: object) -> None:
    """`migrations`: alembic's EnvironmentContext (env.py's `context`), to run a skipped revision's upgrade."""
    stamp = _stamp(conn)
    if stamp is None:
        return
    for skipped in SKIPPED:
        if stamp in skipped.stamps and skipped.dialect in (None, conn.dialect.name) and not _has_table(
                conn, skipped.made):
            _run_revision(migrations, skipped.revision)
    if conn.dialect.name == "postgresql" and stamp in BEFORE_0012 and not conn.execute(
            text("SELECT to_regprocedure(:f) IS NOT NULL"), {"f": FINAL_0008_MARK}).scalar():
        _run_script(conn, FIRST_0008)


def _run_revision(migrations: object, revision: str) -> None:
    from alembic.operations import Operations
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrations.config).get_revision(revision)  # type: ignore[attr-defined]
    assert script is not None
    with Operations.context(migrations.get_context()):  # type: ignore[attr-defined]
        script.module.upgrade()


def _run_script(conn: Connection, path: Path) -> None:
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for statement in path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n;\n"):
            if any(line and not line.startswith("--") for line in statement.strip().splitlines()):
                cursor.execute(statement)  # no parameters: function bodies hold % and : as written
    finally:
        cursor.close()


def _has_table(conn: Connection, name: str) -> bool:
    from sqlalchemy import inspect

    return bool(inspect(conn).has_table(name))


def _stamp(conn: Connection) -> str | None:
    if not _has_table(conn, "alembic_version"):
        return None
    stamps = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return str(stamps[0]) if len(stamps) == 1 else None
