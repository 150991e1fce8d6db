-- For a SQLite store that ran 0006_search before eccca4c: the span index as it was then (a contentless span_fts
-- kept by triggers on every write, no span_search_dirty) becomes the index a store made at head has (triggers that
-- only mark written spans dirty, every span marked so the indexer re-indexes it). 0006 built the index from
-- store/search/fts.py, which changed after it landed. Run by 0021_pg_functions_refresh only on such a store.
-- Statements end with a line holding only ';'. Never edit: this file is part of revision 0021_pg_functions_refresh.

DROP TRIGGER IF EXISTS span_search_delete
;

DROP TRIGGER IF EXISTS span_search_update
;

DROP TRIGGER IF EXISTS span_search_insert
;

DROP TABLE IF EXISTS span_fts
;

DROP TABLE IF EXISTS span_search_rows
;

DROP INDEX IF EXISTS span_search_columns
;

CREATE TABLE span_search_rows (rowid INTEGER PRIMARY KEY, span_id VARCHAR(64) NOT NULL UNIQUE, run_id VARCHAR(64) NOT NULL, started_at FLOAT NOT NULL, attributes TEXT)
;

CREATE TABLE span_search_dirty (span_id VARCHAR(64) PRIMARY KEY) WITHOUT ROWID
;

CREATE INDEX span_search_columns ON spans (run_id, kind, status, started_at, ended_at, id)
;

CREATE VIRTUAL TABLE span_fts USING fts5(name, input_text, output_text, attrs, tokenize="unicode61 remove_diacritics 2")
;

CREATE TRIGGER span_search_insert AFTER INSERT ON spans BEGIN INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id); END
;

CREATE TRIGGER span_search_update AFTER UPDATE OF id, name, input_text, output_text, attributes, run_id, started_at ON spans BEGIN
        INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id);
        INSERT OR IGNORE INTO span_search_dirty(span_id) SELECT old.id WHERE old.id <> new.id;
    END
;

CREATE TRIGGER span_search_delete AFTER DELETE ON spans BEGIN INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (old.id); END
;

INSERT OR IGNORE INTO span_search_dirty(span_id) SELECT id FROM spans
;
