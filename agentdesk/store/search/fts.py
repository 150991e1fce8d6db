"""The SQLite full-text index over spans: its DDL, shared by migration 0006, the indexer and the search.

Indexing is kept *off the write path*. The only thing a write to `spans` pays is
one `INSERT OR IGNORE` of the span's id into `span_search_dirty` (triggers on
insert, on update of an indexed column, on delete); `store.search.indexer`
drains that set later in short transactions (the window's background job, or a
search before it runs). A search never returns a stale or missing hit: it takes
the index's answer for the spans *not* dirty and scans the dirty ones from their
current values (`run_search`).

`span_fts` is a regular (content-storing) FTS5 table over a span's name, input
text, output text and attributes (as "key value" words). Regular, not
contentless: SQLite 3.40 has no `contentless_delete`, so a contentless row can
only be removed by repeating the exact values it was indexed with, and the
indexer re-indexes a span *after* it changed (or vanished), when the old values
are gone. Keeping a copy of them would cost the same space as FTS5's own
content table, with more code; `DELETE FROM span_fts WHERE rowid = ?` needs none.
Its rowids come from `span_search_rows`, a stable integer per span id: `spans`
has no INTEGER PRIMARY KEY, so its own rowids may change on VACUUM and cannot key
the index. `span_search_rows` also keeps each span's run, start and attributes,
so a query of words and attribute terms never touches the span rows;
`span_search_columns` covers the column terms (kind, status, duration) the same way.
SQLite only: other dialects have no FTS5 and search by scanning.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, text

from agentdesk.store.persistence.payloads import sql_text

TOKENIZER = "unicode61 remove_diacritics 2"
ROWS_TABLE = "span_search_rows"
FTS_TABLE = "span_fts"
DIRTY_TABLE = "span_search_dirty"
"""Span ids written since they were last indexed (inserted, changed or deleted)."""
COLUMNS_INDEX = "span_search_columns"
"""Covers kind, status, start, end and id per run: column-only queries never read the (large) span rows."""
INDEXED_COLUMNS = "id, name, input_text, output_text, attributes, run_id, started_at"
"""The span columns the index copies: an update of any other column (status, ended_at) marks nothing."""
INDEXES = frozenset({COLUMNS_INDEX})
TABLES = frozenset({ROWS_TABLE, FTS_TABLE, DIRTY_TABLE,
                    *(f"{FTS_TABLE}_{part}" for part in ("data", "idx", "docsize", "config", "content"))})
"""Every table the index adds (FTS5 keeps its index in shadow tables), outside the ORM's metadata."""
TRIGGERS = ("span_search_insert", "span_search_update", "span_search_delete")


def attrs_sql(row: str) -> str:
    """SQL for a span row's attributes as "key value key value" text ('' for anything but a JSON object).

    The column is read through `agentdesk_text` (persistence/payloads.py): large attributes are stored compressed."""
    attrs = sql_text(f"{row}.attributes")
    return (f"CASE WHEN json_valid({attrs}) AND json_type({attrs}) = 'object' "
            f"THEN coalesce((SELECT group_concat(key || ' ' || coalesce(value, ''), ' ') "
            f"FROM json_each({attrs})), '') ELSE '' END")


def _mark(row: str) -> str:
    return f"INSERT OR IGNORE INTO {DIRTY_TABLE}(span_id) VALUES ({row}.id);"


CREATE = (
    f"CREATE TABLE {ROWS_TABLE} (rowid INTEGER PRIMARY KEY, span_id VARCHAR(64) NOT NULL UNIQUE, "
    f"run_id VARCHAR(64) NOT NULL, started_at FLOAT NOT NULL, attributes TEXT)",
    f"CREATE TABLE {DIRTY_TABLE} (span_id VARCHAR(64) PRIMARY KEY) WITHOUT ROWID",
    f"CREATE INDEX {COLUMNS_INDEX} ON spans (run_id, kind, status, started_at, ended_at, id)",
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(name, input_text, output_text, attrs, "
    f"tokenize=\"{TOKENIZER}\")",
    f"CREATE TRIGGER span_search_insert AFTER INSERT ON spans BEGIN {_mark('new')} END",
    f"""CREATE TRIGGER span_search_update AFTER UPDATE OF {INDEXED_COLUMNS} ON spans BEGIN
        {_mark('new')}
        INSERT OR IGNORE INTO {DIRTY_TABLE}(span_id) SELECT old.id WHERE old.id <> new.id;
    END""",
    f"CREATE TRIGGER span_search_delete AFTER DELETE ON spans BEGIN {_mark('old')} END",
)

MARK_ALL = f"INSERT OR IGNORE INTO {DIRTY_TABLE}(span_id) SELECT id FROM spans"
"""Every stored span is dirty after the migration: the indexer (not the migration) tokenizes them."""

DROP = (
    *(f"DROP TRIGGER IF EXISTS {name}" for name in TRIGGERS),
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
    f"DROP TABLE IF EXISTS {ROWS_TABLE}",
    f"DROP TABLE IF EXISTS {DIRTY_TABLE}",
    f"DROP INDEX IF EXISTS {COLUMNS_INDEX}",
)


def install(connection: Connection) -> None:
    """Create the index, its tables and the dirty-marking triggers; mark every stored span dirty."""
    for statement in (*CREATE, MARK_ALL):
        connection.exec_driver_sql(statement)


def remove(connection: Connection) -> None:
    for statement in DROP:
        connection.exec_driver_sql(statement)


def has_index(engine: Engine) -> bool:
    """Whether this engine's database carries the span index (SQLite at migration 0006 or later)."""
    if engine.dialect.name != "sqlite":
        return False
    with engine.connect() as conn:
        return conn.execute(text("SELECT 1 FROM sqlite_master WHERE name = :n"),
                            {"n": DIRTY_TABLE}).first() is not None
