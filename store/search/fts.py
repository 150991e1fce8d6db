"""The SQLite full-text index over spans: its DDL, shared by migration 0006 and the search.

`span_fts` is a contentless FTS5 table (it stores the index, not a second copy
of every text) over a span's name, input text, output text and attributes (as
"key value" words). Its rowids come from `span_search_rows`, a stable integer
per span id: `spans` has no INTEGER PRIMARY KEY, so its own rowids may change
on VACUUM and cannot key the index. Triggers keep both tables in step with
every write path (runtime, OTel import, receiver, simulator), and a contentless
row is removed with FTS5's 'delete' command and the old values, which the
triggers have. `span_search_rows` also keeps each span's run, start and attributes
(a copy: the price of attribute terms that never read a span row), so a
query of words and attribute terms never touches the span rows; `span_search_columns` covers
the column terms (kind, status, duration) the same way. SQLite only: other dialects have no FTS5 and search by scanning.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, text

TOKENIZER = "unicode61 remove_diacritics 2"
ROWS_TABLE = "span_search_rows"
FTS_TABLE = "span_fts"
COLUMNS_INDEX = "span_search_columns"
"""Covers kind, status, start, end and id per run: column-only queries never read the (large) span rows."""
INDEXES = frozenset({COLUMNS_INDEX})
TABLES = frozenset({ROWS_TABLE, FTS_TABLE, *(f"{FTS_TABLE}_{part}" for part in ("data", "idx", "docsize", "config"))})
"""Every table the index adds (FTS5 keeps its index in shadow tables), outside the ORM's metadata."""


def _attrs(row: str) -> str:
    """SQL for a span row's attributes as "key value key value" text ('' for anything but a JSON object)."""
    return (f"CASE WHEN json_valid({row}.attributes) AND json_type({row}.attributes) = 'object' "
            f"THEN coalesce((SELECT group_concat(key || ' ' || coalesce(value, ''), ' ') "
            f"FROM json_each({row}.attributes)), '') ELSE '' END")


def _values(row: str) -> str:
    return f"{row}.name, {row}.input_text, {row}.output_text, {_attrs(row)}"


def _rowid(row: str) -> str:
    return f"(SELECT rowid FROM {ROWS_TABLE} WHERE span_id = {row}.id)"


CREATE = (
    f"CREATE TABLE {ROWS_TABLE} (rowid INTEGER PRIMARY KEY, span_id VARCHAR(64) NOT NULL UNIQUE, "
    f"run_id VARCHAR(64) NOT NULL, started_at FLOAT NOT NULL, attributes TEXT)",
    f"CREATE INDEX {COLUMNS_INDEX} ON spans (run_id, kind, status, started_at, ended_at, id)",
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(name, input_text, output_text, attrs, "
    f"content='', tokenize=\"{TOKENIZER}\")",
    f"""CREATE TRIGGER span_search_insert AFTER INSERT ON spans BEGIN
        INSERT INTO {ROWS_TABLE}(span_id, run_id, started_at, attributes)
            VALUES (new.id, new.run_id, new.started_at, new.attributes);
        INSERT INTO {FTS_TABLE}(rowid, name, input_text, output_text, attrs)
            VALUES (last_insert_rowid(), {_values('new')});
    END""",
    f"""CREATE TRIGGER span_search_update
    AFTER UPDATE OF name, input_text, output_text, attributes, run_id, started_at ON spans BEGIN
        UPDATE {ROWS_TABLE} SET run_id = new.run_id, started_at = new.started_at, attributes = new.attributes
            WHERE span_id = old.id;
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, name, input_text, output_text, attrs)
            VALUES ('delete', {_rowid('old')}, {_values('old')});
        INSERT INTO {FTS_TABLE}(rowid, name, input_text, output_text, attrs)
            VALUES ({_rowid('new')}, {_values('new')});
    END""",
    f"""CREATE TRIGGER span_search_delete AFTER DELETE ON spans BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, name, input_text, output_text, attrs)
            VALUES ('delete', {_rowid('old')}, {_values('old')});
        DELETE FROM {ROWS_TABLE} WHERE span_id = old.id;
    END""",
)

BACKFILL = (
    f"INSERT INTO {ROWS_TABLE}(span_id, run_id, started_at, attributes) SELECT id, run_id, started_at, "
    f"attributes FROM spans "
    f"ORDER BY run_id, started_at",
    f"INSERT INTO {FTS_TABLE}(rowid, name, input_text, output_text, attrs) "
    f"SELECT r.rowid, {_values('s')} FROM {ROWS_TABLE} r JOIN spans s ON s.id = r.span_id",
)

DROP = (
    "DROP TRIGGER IF EXISTS span_search_delete",
    "DROP TRIGGER IF EXISTS span_search_update",
    "DROP TRIGGER IF EXISTS span_search_insert",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
    f"DROP TABLE IF EXISTS {ROWS_TABLE}",
    f"DROP INDEX IF EXISTS {COLUMNS_INDEX}",
)


def install(connection: Connection) -> None:
    """Create the index and its triggers, then index every span already stored."""
    for statement in CREATE + BACKFILL:
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
                            {"n": FTS_TABLE}).first() is not None
