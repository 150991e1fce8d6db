"""PostgreSQL specifics: the engine and its errors, the LISTEN/NOTIFY listener, roles.

Everything that only exists on a server database lives here, so the rest of the
store stays portable (as `store/persistence/sqlite.py` does for SQLite).
"""
