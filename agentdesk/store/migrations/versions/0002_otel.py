"""OpenTelemetry import: orphaned spans waiting for their parents, and OTel resources

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 19:55:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('otel_resources',
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('attributes', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    op.create_table('otel_orphans',
    sa.Column('span_id', sa.String(length=64), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('parent_id', sa.String(length=64), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.ForeignKeyConstraint(['span_id'], ['spans.id'], ),
    sa.PrimaryKeyConstraint('span_id')
    )
    with op.batch_alter_table('otel_orphans', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_otel_orphans_parent_id'), ['parent_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_otel_orphans_run_id'), ['run_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('otel_orphans', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_otel_orphans_run_id'))
        batch_op.drop_index(batch_op.f('ix_otel_orphans_parent_id'))
    op.drop_table('otel_orphans')
    op.drop_table('otel_resources')
