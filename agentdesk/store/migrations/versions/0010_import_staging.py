"""import staging: rows of a large trace still being imported, hidden from readers until it is whole

Revision ID: 0010_import_staging
Revises: 0009_presence
Create Date: 2026-12-02 05:25:00

An OTLP import writes a large trace in many short transactions (so an operator's
decision never waits behind it); the project, task, session, agents and run it
creates are named here from the first of them until the last ("the flip") deletes
the rows, and every reader skips what is named here. The lead re-chains at merge.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010_import_staging'
down_revision = '0009_presence'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('import_staging',
    sa.Column('entity_id', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('heartbeat_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('entity_id')
    )
    with op.batch_alter_table('import_staging', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_import_staging_run_id'), ['run_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('import_staging', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_import_staging_run_id'))
    op.drop_table('import_staging')
