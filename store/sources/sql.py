"""Reading a foreign database's rows quickly: plain dicts straight from the driver cursor.

Every foreign source and the table follower read through these, inside the
connection and transaction their caller opened, so one read sees one snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

Row = dict[str, Any]


def rows(conn: Connection, sql: str, **params: Any) -> list[Row]:
    """Rows as dicts, straight from the driver cursor (same connection and transaction).

    A derived timeline reads tens of thousands of rows; SQLAlchemy's row objects cost more
    than the query itself, and every statement here is plain SQLite SQL with `:name` binds.
    """
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        cursor.close()


def one(conn: Connection, sql: str, **params: Any) -> Row | None:
    found = rows(conn, sql, **params)
    return found[0] if found else None


def parent_chain(conn: Connection, start: str, parent_sql: str) -> tuple[str, ...]:
    """`start` and its ancestors, from the top down, following `parent_sql` (`:id` → a `parent` column).

    A cycle in foreign data ends the chain instead of looping.
    """
    chain: list[str] = []
    current: str | None = start
    while current is not None and current not in chain:
        chain.append(current)
        found = one(conn, parent_sql, id=current)
        current = found["parent"] if found else None
    return tuple(reversed(chain))


def marks(prefix: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """`:p0, :p1, ...` and their bindings, for `IN (...)` over a list of values (`NULL` when empty)."""
    names = {f"{prefix}{n}": v for n, v in enumerate(values)}
    return ", ".join(f":{k}" for k in names) or "NULL", names
