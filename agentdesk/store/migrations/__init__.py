"""Alembic migrations shipped with the package; `store.database` runs them programmatically."""
