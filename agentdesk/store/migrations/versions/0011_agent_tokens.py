"""agent tokens: the identities agents present to the HTTP gate instead of opening the store

Revision ID: 0011_agent_tokens
Revises: 0010_import_staging
Create Date: 2026-12-06 04:55:00

An agent process never holds the store: it talks to the receiver's agent API with a bearer token.
Only a hash of each token is kept (sha256 of 32 random bytes: nothing to brute-force), with who made it,
when, and when it was revoked; a revoked token is kept so the audit can still name it.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011_agent_tokens'
down_revision = '0010_import_staging'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('agent_tokens',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('revoked_at', sa.Float(), nullable=True),
    sa.Column('last_used_at', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_hash')
    )


def downgrade() -> None:
    op.drop_table('agent_tokens')
