"""search: a full-text index over spans (SQLite FTS5); triggers only mark written spans dirty

Revision ID: 0006_search
Revises: 0005_postgres
Create Date: 2026-12-01 22:30:00

Creates the index tables and the dirty-marking triggers, and marks every stored
span dirty: no tokenizing here (a big store would hold its upgrade for minutes);
the window's background indexer drains them, and a search scans what is still
dirty, so results are right from the first query. SQLite only: on another
dialect this revision changes nothing and search scans instead (docs/analysis.md). It follows 0005_postgres.
"""
from __future__ import annotations

from alembic import op

from agentdesk.store.search import fts

revision = '0006_search'
down_revision = '0005_postgres'
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        fts.install(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        fts.remove(bind)
