"""integer nanoseconds: a span's start and end as integer nanoseconds since the epoch (issue 22)

Revision ID: 0023_integer_nanoseconds
Revises: 0022_bigint_tokens
Create Date: 2026-12-06 09:45:00

`spans.started_at` / `spans.ended_at` held float seconds. Near 1.7e9 s a double's step is ~238 ns, so an
OTLP time in nanoseconds came back changed by up to 128 ns (15,086 of 20,000 in a 10k-span export). Both
become integer nanoseconds: BIGINT on PostgreSQL, INTEGER (64-bit) on SQLite, under the same names.

Why the same names: the indexes (`spans_by_run`, 0021's `span_search_columns`), the SQLite search
triggers, PostgreSQL's column grants (0012) and every branch's SQL keep naming them; the unit changes,
and every reader converts at its edge through one set of helpers (store/text/times.py). docs/otel.md says more.

Each float becomes the nanosecond nearest the value it held (half up): its whole seconds times 10**9 plus
its fraction times 1e9, rounded: both parts are exact doubles, where `round(x * 1e9)` would round the
product to a multiple of 256 first. A value that is no readable time (negative, NaN, ±1e300, past 2255,
a word on SQLite) becomes -1, which every reader shows as an unreadable time. `store.text.times.ns_of_seconds`
is the same arithmetic in Python.

PostgreSQL: one ALTER ... TYPE bigint USING: the table is rewritten once, its indexes rebuilt; grants,
row-level security and the 0019 triggers (statement-level, on writes only) stay; no server function reads
span times (0008-0021). SQLite cannot change a column's type, and a REAL column turns every integer it
stores into a double, so each column is added anew as INTEGER, filled, the old one dropped and the new
one renamed (SQLite 3.35+); the indexes and the trigger naming the column are dropped first and made
again after. No table is dropped, so the foreign keys on spans.id stay satisfied throughout.
`span_search_rows.started_at` (0021's copy for search order) gets the new values too.
"""
from __future__ import annotations

from alembic import op

revision = '0023_integer_nanoseconds'
down_revision = '0022_bigint_tokens'
branch_labels = None
depends_on = None

UNREADABLE = -1


def _pg_ns(column: str) -> str:
    return (f"CASE WHEN {column} IS NULL THEN NULL "
            f"WHEN {column} >= 0 AND {column} < 9e9::float8 THEN floor({column})::bigint * 1000000000 + "
            f"floor(({column} - floor({column})) * 1e9::float8 + 0.5::float8)::bigint ELSE {UNREADABLE} END")


def _sqlite_ns(column: str) -> str:
    whole = f"CAST({column} AS INTEGER)"
    return (f"CASE WHEN {column} IS NULL THEN NULL "
            f"WHEN typeof({column}) IN ('real', 'integer') AND {column} >= 0 AND {column} < 9e9 "
            f"THEN {whole} * 1000000000 + CAST(({column} - {whole}) * 1e9 + 0.5 AS INTEGER) "
            f"ELSE {UNREADABLE} END")


PG_UPGRADE = (f"ALTER TABLE public.spans ALTER COLUMN started_at TYPE bigint USING {_pg_ns('started_at')}, "
              f"ALTER COLUMN ended_at TYPE bigint USING {_pg_ns('ended_at')}, "
              f"ALTER COLUMN started_at SET DEFAULT {UNREADABLE}")
PG_DOWNGRADE = ("ALTER TABLE public.spans ALTER COLUMN started_at DROP DEFAULT, "
                "ALTER COLUMN started_at TYPE double precision USING started_at / 1e9::float8, "
                "ALTER COLUMN ended_at TYPE double precision USING ended_at / 1e9::float8")

SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS span_search_update",
    "DROP INDEX IF EXISTS spans_by_run",
    "DROP INDEX IF EXISTS span_search_columns",
]
SQLITE_CREATE = [
    "CREATE INDEX spans_by_run ON spans (run_id, started_at)",
    "CREATE INDEX span_search_columns ON spans (run_id, kind, status, started_at, ended_at, id)",
    # 0021's trigger, as sql/0021/sqlite_search.sql made it
    """CREATE TRIGGER span_search_update AFTER UPDATE OF id, name, input_text, output_text, attributes, run_id, started_at ON spans BEGIN
        INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id);
        INSERT OR IGNORE INTO span_search_dirty(span_id) SELECT old.id WHERE old.id <> new.id;
    END""",  # noqa: E501
]
SEARCH_ROWS = ("UPDATE span_search_rows SET started_at = "
               "coalesce((SELECT s.started_at FROM spans s WHERE s.id = span_search_rows.span_id), {unreadable})")


def _sqlite_retype(column_type: str, expression: str) -> None:
    for statement in SQLITE_DROP:
        op.execute(statement)
    for column, not_null in (("started_at", True), ("ended_at", False)):
        # SQLite adds a NOT NULL column only with a default: -1, unreadable (the model says so too)
        default = f" NOT NULL DEFAULT {UNREADABLE if column_type == 'INTEGER' else 0}" if not_null else ""
        op.execute(f"ALTER TABLE spans ADD COLUMN {column}_new {column_type}{default}")
        op.execute(f"UPDATE spans SET {column}_new = {expression.format(column=column)}")
        op.execute(f"ALTER TABLE spans DROP COLUMN {column}")
        op.execute(f"ALTER TABLE spans RENAME COLUMN {column}_new TO {column}")
    for statement in SQLITE_CREATE:
        op.execute(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_UPGRADE)
        return
    _sqlite_retype("INTEGER", _sqlite_ns("{column}"))
    op.execute(SEARCH_ROWS.format(unreadable=UNREADABLE))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_DOWNGRADE)
        return
    _sqlite_retype("FLOAT", "{column} / 1e9")
    op.execute(SEARCH_ROWS.format(unreadable=0.0))
