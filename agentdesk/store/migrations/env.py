"""Alembic environment: always run against the connection the store hands over."""

from __future__ import annotations

from alembic import context

from agentdesk.store.migrations.repairs import repair_before_migrating
from agentdesk.store.persistence.schema import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only for `alembic revision --autogenerate` by developers
    from sqlalchemy import create_engine

    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "sqlite://")
    connection = engine.connect()

context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    repair_before_migrating(connection, context)  # a store that ran an edited or re-chained revision
    context.run_migrations()
