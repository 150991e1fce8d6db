"""Which lensagent schema a database has: 0.1.0 or 0.1.2, and which optional columns exist.

0.1.2 added eight columns and five tables (reference §1.1). A fresh 0.1.2 database has the
new `workspaces` and `results` columns *first*; a 0.1.0 database upgraded in place got them
by `ADD COLUMN`, at the *end*. So nothing here or in the queries reads a column by position:
every optional column is selected by name when `pragma_table_info` lists it, and as `NULL`
under the same name when it does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import Connection, text

NEW_TABLES = frozenset(
    {
        "todo_reminder_state",
        "working_context_items",
        "working_contexts",
        "context_compactions",
        "purge_cleanups",
    }
)
NEW_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "workspaces": ("executor_ref", "executor_id"),
    "model_attempts": ("request_json", "observation_json"),
    "calls": ("continuation_json", "auto_review_json"),
    "results": ("capture", "stored"),
}


@dataclass(frozen=True, slots=True)
class Layout:
    version: str
    tables: frozenset[str]
    columns: Mapping[str, frozenset[str]]
    """Columns of the tables whose columns differ between versions."""

    def has(self, table: str, column: str | None = None) -> bool:
        if column is None:
            return table in self.tables
        return column in self.columns.get(table, frozenset())

    def col(self, table: str, column: str, alias: str) -> str:
        """`alias.column`, or `NULL AS column` when this database's table lacks it."""
        return f"{alias}.{column}" if self.has(table, column) else f"NULL AS {column}"

    @property
    def missing(self) -> list[str]:
        """The 0.1.2 additions this database lacks, for the operator ("" on a full 0.1.2)."""
        gone = [t for t in sorted(NEW_TABLES) if t not in self.tables]
        gone += [f"{t}.{c}" for t, cols in NEW_COLUMNS.items() for c in cols if not self.has(t, c)]
        return gone


def read_layout(conn: Connection) -> Layout:
    tables = frozenset(r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'")))
    columns = {
        table: frozenset(r[0] for r in conn.execute(text(f"SELECT name FROM pragma_table_info('{table}')")))
        for table in NEW_COLUMNS
    }
    return Layout(version_of(tables), tables, columns)


def version_of(tables: frozenset[str]) -> str:
    """0.1.2 added `context_compactions` (and four more tables); without it the database is 0.1.0."""
    return "0.1.2" if "context_compactions" in tables else "0.1.0"
