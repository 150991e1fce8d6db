"""search external content: the SQLite span index keeps no copy of the text it indexes (issue 22)

Revision ID: 0025_search_external_content
Revises: 0024_rule_applier
Create Date: 2026-12-06 12:30:00

Until now `span_fts` was a regular FTS5 table, so it stored its own copy of every indexed text
(`span_fts_content`, ~1.7 KB a span on the 100,000-span OTel trace), and `span_search_rows` a copy of each
span's attributes (~0.55 KB a span) for `key:value` terms. Together they took an indexed store from 1.8 to
4.7 KB a span. This revision makes the index a *contentless* FTS5 table (`content=''`) whose indexed values
a view gives, `span_fts_source`, and drops the attributes copy (`key:value` terms read the span row:
store/search/attributes.py). The view is the index's content kept outside it, for the indexer alone: FTS5 is
not told of it, since FTS5 cannot read a view that calls json_each ("SQL logic error") and a plain sqlite3
connection (a `.dump`, Python's `iterdump`) cannot prepare one that calls `agentdesk_text`; a contentless
table reads as NULLs there, and takes 'delete' with the values, 'delete-all' and 'integrity-check' alike.

Why the view holds more than the spans: a contentless FTS5 row can only be removed by repeating the exact
values it was indexed with (SQLite 3.40 has no `contentless_delete`), and the indexer removes a span's row *after*
the span changed or vanished. So the span triggers keep, in `span_search_stale`, the values an indexed span had
before its first change since it was indexed (INSERT OR IGNORE: a second change keeps the first copy), and the
view gives, per index row, those kept values when there are some and the span's current values otherwise: what
the index holds, always. The indexer deletes by the view's values, then drops the kept copy. The triggers only
copy column values: they call no function, so a plain `sqlite3` shell (or another runtime's tool) writing spans
keeps the index correct; only reading the view needs agentdesk's `agentdesk_text` (the attributes are stored
compressed), and only the indexer reads it.

An indexed span row replaced without its delete trigger (INSERT OR REPLACE, or UPDATE OR REPLACE onto its id,
with recursive triggers off) leaves no values to delete by: the insert and update triggers then keep a `lost`
mark instead, and the indexer clears the whole index and marks every span dirty (store/search/indexer.py).
It does the same when the SQLite library differs from the one that built the index (`span_search_meta`): the
view's attribute words come from SQLite's JSON functions, whose text of a number or a nested value another
version might write differently, and a delete must repeat the indexed words exactly.

The view computes the attribute words as the indexer did before (`fts.attrs_sql`), but writes JSON true and
false as `true` and `false` (json_each gives 1 and 0), as the scan reads them. The rebuild is 0006's:
everything dropped and made again, every span marked dirty; the indexer (not this revision) tokenizes them.
SQLite only: on PostgreSQL nothing changes (its word index is the server's, 0019). The SQL is written out
here, not imported.
"""
from __future__ import annotations

from alembic import op

revision = '0025_search_external_content'
down_revision = '0024_rule_applier'
branch_labels = None
depends_on = None


def _attrs(row: str) -> str:
    """A row's attributes as "key value key value" words ('' for anything but a JSON object)."""
    attrs = f"agentdesk_text({row}.attributes)"
    value = "CASE type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE coalesce(value, '') END"
    return (f"CASE WHEN json_valid({attrs}) AND json_type({attrs}) = 'object' "
            f"THEN coalesce((SELECT group_concat(key || ' ' || {value}, ' ') "
            f"FROM json_each({attrs})), '') ELSE '' END")


def _keep(row: str) -> str:
    """Keep the values an indexed span had before this first change since it was indexed."""
    return (f"INSERT OR IGNORE INTO span_search_stale(rowid, name, input_text, output_text, attributes) "
            f"SELECT rowid, {row}.name, {row}.input_text, {row}.output_text, {row}.attributes "
            f"FROM span_search_rows WHERE span_id = {row}.id;")


def _lost(condition: str = "") -> str:
    """An index row whose span row was overwritten without its delete trigger: its values are gone."""
    return (f"INSERT OR IGNORE INTO span_search_stale(rowid, lost) "
            f"SELECT rowid, 1 FROM span_search_rows WHERE span_id = new.id{condition};")


DROP = (
    "DROP TRIGGER IF EXISTS span_search_insert",
    "DROP TRIGGER IF EXISTS span_search_update",
    "DROP TRIGGER IF EXISTS span_search_delete",
    "DROP TABLE IF EXISTS span_fts",
    "DROP VIEW IF EXISTS span_fts_source",
    "DROP TABLE IF EXISTS span_search_stale",
    "DROP TABLE IF EXISTS span_search_rows",
    "DROP TABLE IF EXISTS span_search_meta",
    "DELETE FROM span_search_dirty",
)

CREATE = (
    "CREATE TABLE span_search_rows (rowid INTEGER PRIMARY KEY, span_id VARCHAR(64) NOT NULL UNIQUE, "
    "run_id VARCHAR(64) NOT NULL, started_at INTEGER NOT NULL)",
    "CREATE TABLE span_search_stale (rowid INTEGER PRIMARY KEY, name TEXT, input_text TEXT, output_text TEXT, "
    "attributes TEXT, lost INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE span_search_meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)",
    "INSERT INTO span_search_meta (key, value) VALUES ('sqlite_version', sqlite_version())",
    f"""CREATE VIEW span_fts_source (rowid, name, input_text, output_text, attrs) AS
        SELECT r.rowid, s.name, s.input_text, s.output_text, {_attrs('s')}
        FROM span_search_rows r CROSS JOIN spans s ON s.id = r.span_id
        WHERE NOT EXISTS (SELECT 1 FROM span_search_stale k WHERE k.rowid = r.rowid)
        UNION ALL
        SELECT k.rowid, k.name, k.input_text, k.output_text, {_attrs('k')}
        FROM span_search_stale k WHERE NOT k.lost""",
    "CREATE VIRTUAL TABLE span_fts USING fts5(name, input_text, output_text, attrs, content='', "
    "tokenize=\"unicode61 remove_diacritics 2\")",
    f"""CREATE TRIGGER span_search_insert AFTER INSERT ON spans BEGIN
        {_lost()}
        INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id);
    END""",
    f"""CREATE TRIGGER span_search_update AFTER UPDATE OF id, name, input_text, output_text, attributes, run_id,
        started_at ON spans BEGIN
        {_keep('old')}
        {_lost(' AND new.id <> old.id')}
        INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id);
        INSERT OR IGNORE INTO span_search_dirty(span_id) SELECT old.id WHERE old.id <> new.id;
    END""",
    f"""CREATE TRIGGER span_search_delete AFTER DELETE ON spans BEGIN
        {_keep('old')}
        INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (old.id);
    END""",
    "INSERT OR IGNORE INTO span_search_dirty(span_id) SELECT id FROM spans",
)

OLD_CREATE = (  # the index as 0006 (through store/search/fts.py), 0021 and 0023 left it
    "CREATE TABLE span_search_rows (rowid INTEGER PRIMARY KEY, span_id VARCHAR(64) NOT NULL UNIQUE, "
    "run_id VARCHAR(64) NOT NULL, started_at FLOAT NOT NULL, attributes TEXT)",
    "CREATE VIRTUAL TABLE span_fts USING fts5(name, input_text, output_text, attrs, "
    "tokenize=\"unicode61 remove_diacritics 2\")",
    "CREATE TRIGGER span_search_insert AFTER INSERT ON spans BEGIN "
    "INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id); END",
    """CREATE TRIGGER span_search_update AFTER UPDATE OF id, name, input_text, output_text, attributes, run_id, started_at ON spans BEGIN
        INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id);
        INSERT OR IGNORE INTO span_search_dirty(span_id) SELECT old.id WHERE old.id <> new.id;
    END""",  # noqa: E501
    "CREATE TRIGGER span_search_delete AFTER DELETE ON spans BEGIN "
    "INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (old.id); END",
    "INSERT OR IGNORE INTO span_search_dirty(span_id) SELECT id FROM spans",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in (*DROP, *CREATE):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in (*DROP, *OLD_CREATE):
            op.execute(statement)
