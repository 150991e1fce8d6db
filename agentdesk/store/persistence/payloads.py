"""Large text payloads stored compressed on SQLite: the span's attributes JSON (docs/architecture.md, "Storage").

A model call's attributes carry its whole message history (`gen_ai.input.messages`) as JSON text: most of a
span's bytes, and very repetitive. On SQLite a value of at least `THRESHOLD` bytes is stored as a BLOB of one
marker byte (`DEFLATE`) and a raw deflate stream, when that is smaller; anything else stays TEXT. SQLite keeps
a value's type per row, so rows written before this (TEXT) read as they always did, and a reader tells the two
apart by the type alone: TEXT is the text, a BLOB starts with its codec's marker. The marker leaves room for
another codec later without touching old rows.

PostgreSQL stores the text as it is: it already compresses large values (TOAST), and its server functions and
GIN word index read the column as text.

Readers get text back three ways: the ORM column type (`PackedText`) unpacks on every select; raw driver rows
go through `unpack`; SQL that needs the JSON (`json_extract`, `json_each`) wraps the column in `SQL_TEXT(...)`,
a function every agentdesk SQLite connection registers (`register`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Dialect, Text
from sqlalchemy.types import TypeDecorator

from agentdesk.store.persistence.deflate import DEFLATE, THRESHOLD, pack, unpack

__all__ = ["DEFLATE", "PACKED", "SQL_TEXT", "THRESHOLD", "PackedText", "pack", "pack_rows", "register", "sql_text",
           "unpack"]

SQL_TEXT = "agentdesk_text"
"""The SQLite function that reads a stored payload as text: `agentdesk_text(spans.attributes)`."""


PACKED = frozenset({("spans", "attributes")})
"""The (table, column) pairs stored packed on SQLite; the ORM knows them by their `PackedText` type."""


def pack_rows(table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows for a raw SQLite insert into `table`, with its packed columns packed (the rows as they are if none)."""
    where = [n for n, column in enumerate(columns) if (table, column) in PACKED]
    if not where:
        return rows
    for n in where:  # slices, not a test per value: this runs for every span an import writes
        rows = [(*row[:n], pack(row[n]), *row[n + 1:]) for row in rows]
    return rows


def register(conn: sqlite3.Connection) -> None:
    """Make `agentdesk_text(x)` callable in this connection's SQL (deterministic, so indexes may use it)."""
    conn.create_function(SQL_TEXT, 1, unpack, deterministic=True)


def sql_text(column: str) -> str:
    """SQL reading `column` as text on SQLite: `agentdesk_text(column)`."""
    return f"{SQL_TEXT}({column})"


class PackedText(TypeDecorator[str]):
    """A TEXT column whose large values are stored compressed on SQLite (`pack`), read back as text."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> Any:
        return pack(value) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return unpack(value)
