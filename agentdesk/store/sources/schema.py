"""What detection knows of a SQLite file before any source opens it; each runtime's `recognise` reads it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Schema:
    tables: frozenset[str]
    user_version: int
    """`PRAGMA user_version` (0 when the writer never set it)."""
    migration: str | None = None
    """The newest `schema_migrations.version`, for runtimes that keep such a table (vgxness)."""
