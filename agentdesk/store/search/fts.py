"""The SQLite full-text index over spans: its tables' names, and the DDL migration 0006 ran.

Indexing is kept *off the write path*. The only thing a write to `spans` pays is
one `INSERT OR IGNORE` of the span's id into `span_search_dirty` (triggers on
insert, on update of an indexed column, on delete), plus, for a span already
indexed, a copy of the values it was indexed with (below); `store.search.indexer`
drains the dirty set later in short transactions (the window's background job, or
a search before it runs). A search never returns a stale or missing hit: it takes
the index's answer for the spans *not* dirty and scans the dirty ones from their
current values (`run_search`).

`span_fts` is a *contentless* FTS5 table (`content=''`, migration 0025) over a span's
name, input text, output text and attributes (as "key value" words): it stores the
words' positions, not the text. Its content is kept outside it, as the view
`span_fts_source`: for each index row, the values the span was indexed with. That is the span's current values, unless
the span changed (or vanished) since it was indexed; then it is the copy the span
triggers kept in `span_search_stale` at its first change (INSERT OR IGNORE: a second
change keeps the first copy). Why keep copies: SQLite 3.40 has no
`contentless_delete`, so an FTS5 row is removed by repeating the exact values it was
indexed with (other values corrupt the index), and the indexer re-indexes a span
*after* it changed. The triggers only copy columns, calling no function, so a plain
`sqlite3` shell writing spans keeps the index correct; the view reads the attributes
through `agentdesk_text` (they are stored compressed), which only agentdesk's
connections have. Only the indexer reads it, in its own statements, and hands the
values to FTS5's 'delete' command. FTS5 is not told of the view (no `content=`):
it could not read it (on its json_each, FTS5's own reads fail with "SQL logic
error"), and a plain connection reading `span_fts` (a `.dump`, `iterdump`) could not
prepare it; a contentless table reads as NULLs there. Copies exist only between a
change and the next indexing. When a
row cannot be removed exactly (a span row overwritten without its delete trigger
leaves a `lost` mark; another SQLite library, whose JSON functions might write the
view's attribute words differently, built the index) the indexer empties the index
and marks every span dirty.

Its rowids come from `span_search_rows`, a stable integer per span id: `spans`
has no INTEGER PRIMARY KEY, so its own rowids may change on VACUUM and cannot key
the index. `span_search_rows` also keeps each span's run and start, so a query of
words never touches the span rows; an attribute term reads the candidates' span rows
for the exact check (`attributes`), and `span_search_columns` covers the column terms
(kind, status, duration). SQLite only: other dialects have no FTS5 (PostgreSQL has its
own word index, `pg_index`).

Migration 0006 built the first index from this module (`CREATE`, `MARK_ALL`, `DROP`,
`install`, `remove` below); they stay exactly as 0006 ran them
(tests/migrations/test_landed.py), and later revisions carry their own SQL.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, text

TOKENIZER = "unicode61 remove_diacritics 2"
ROWS_TABLE = "span_search_rows"
FTS_TABLE = "span_fts"
SOURCE_VIEW = "span_fts_source"
"""The index's content: per index row, the values it was indexed with (migration 0025)."""
STALE_TABLE = "span_search_stale"
"""Index rowid -> the values its span had when indexed, kept by the triggers at the span's first change
since (or a `lost` mark when an overwrite left none); the indexer drops them as it re-indexes."""
META_TABLE = "span_search_meta"
"""key -> value; 'sqlite_version': the SQLite library that built the index (the indexer starts it again under
another: the source view's attribute words come from SQLite's JSON functions, and a delete repeats them)."""
DIRTY_TABLE = "span_search_dirty"
"""Span ids written since they were last indexed (inserted, changed or deleted)."""
COLUMNS_INDEX = "span_search_columns"
"""Covers kind, status, start, end and id per run: column-only queries never read the (large) span rows."""
INDEXED_COLUMNS = "id, name, input_text, output_text, attributes, run_id, started_at"
"""The span columns the index copies: an update of any other column (status, ended_at) marks nothing."""
INDEXES = frozenset({COLUMNS_INDEX})
TABLES = frozenset({ROWS_TABLE, FTS_TABLE, DIRTY_TABLE, STALE_TABLE, META_TABLE,
                    *(f"{FTS_TABLE}_{part}" for part in ("data", "idx", "docsize", "config", "content"))})
"""Every table the index adds (FTS5 keeps its index in shadow tables), outside the ORM's metadata."""
TRIGGERS = ("span_search_insert", "span_search_update", "span_search_delete")


def has_index(engine: Engine) -> bool:
    """Whether this engine's database carries the span index (SQLite at migration 0006 or later)."""
    if engine.dialect.name != "sqlite":
        return False
    with engine.connect() as conn:
        return conn.execute(text("SELECT 1 FROM sqlite_master WHERE name = :n"),
                            {"n": DIRTY_TABLE}).first() is not None


# -- what migration 0006_search ran (frozen: a change here would change 0006 for stores made from now on) --
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
