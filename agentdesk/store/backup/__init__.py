"""`agentdesk admin backup` / `restore` / `rebase-anchors`: a copy of the store that restores and verifies.

SQLite copies with SQLite's online backup API (the store stays live); PostgreSQL with pg_dump and
pg_restore, the audit key in a file of its own beside the dump. Both leave signed records in the
chain (a `store.backup` marker inside the copy, a `store.restore` record after it is back) so that
`verify` can tell a restore from a truncation (store/audit/restore.py; docs/postgres.md, "Backups").
"""
