"""Reading a foreign database's rows quickly: plain dicts straight from the driver cursor.

Every foreign source and the table follower read through these, inside the
connection and transaction their caller opened, so one read sees one snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection

Row = dict[str, Any]
JSON_EXTRACT = re.compile(r"\bjson_extract\(([A-Za-z_][\w.]*), ('[^']*')\)")


@lru_cache(maxsize=1024)
def json_guarded(sql: str) -> str:
    """`sql` with every `json_extract(column, 'path')` answering NULL for a value that is not JSON.

    SQLite fails the whole statement on one malformed JSON value ("malformed JSON"), so one bad
    row would hide every other; guarded, that row reads as if the field were absent and its
    mapping marks it. `json_valid` costs little: SQLite caches the parse for the `json_extract`
    that follows on the same value.
    """
    return JSON_EXTRACT.sub(lambda m: f"(CASE WHEN json_valid({m[1]}) THEN json_extract({m[1]}, {m[2]}) END)", sql)


def guard_statement(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                    executemany: bool) -> tuple[str, Any]:
    """A `before_cursor_execute` hook (retval=True) that guards every statement a foreign engine runs."""
    return json_guarded(statement), parameters


def rows(conn: Connection, sql: str, **params: Any) -> list[Row]:
    """Rows as dicts, straight from the driver cursor (same connection and transaction).

    A derived timeline reads tens of thousands of rows; SQLAlchemy's row objects cost more
    than the query itself, and every statement here is plain SQLite SQL with `:name` binds.
    """
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(json_guarded(sql), params)
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
