"""approval trust: standing rules, rule decisions, requester heartbeat, approved hash

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 19:50:00

Chained onto 0001 on this branch; the lead re-chains it onto 0002 at merge.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('approval_rules',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('effect', sa.String(length=8), nullable=False),
    sa.Column('tool', sa.String(length=128), nullable=False),
    sa.Column('matcher', sa.Text(), nullable=False),
    sa.Column('project_id', sa.String(length=64), nullable=True),
    sa.Column('agent_id', sa.String(length=64), nullable=True),
    sa.Column('session_id', sa.String(length=64), nullable=True),
    sa.Column('expires_at', sa.Float(), nullable=True),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('created_by', sa.Text(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('hit_count', sa.Integer(), nullable=False),
    sa.Column('last_hit_at', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('rules_by_tool', 'approval_rules', ['tool', 'enabled'], unique=False)
    with op.batch_alter_table('approvals') as batch:
        batch.add_column(sa.Column('decided_by_rule', sa.String(length=64), nullable=True))
        batch.add_column(sa.Column('requester_heartbeat_at', sa.Float(), nullable=True))
        batch.add_column(sa.Column('approved_hash', sa.String(length=80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('approvals') as batch:
        batch.drop_column('approved_hash')
        batch.drop_column('requester_heartbeat_at')
        batch.drop_column('decided_by_rule')
    op.drop_index('rules_by_tool', table_name='approval_rules')
    op.drop_table('approval_rules')
