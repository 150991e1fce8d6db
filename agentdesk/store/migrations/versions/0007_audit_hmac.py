"""audit hmac: a signature column on audit records and the store's identity

Revision ID: 0007_audit_hmac
Revises: 0006_search
Create Date: 2026-12-01 22:30:00

`audit_log.mac` holds the HMAC-SHA256 of each record's hash under the store's
audit key (kept outside the database, see store/keys.py); records written
before this revision keep NULL. `agentdesk_meta.store_id` names the store, so
its key and anchor file can be found again (docs/audit.md). It follows 0006_search.
"""
from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision = '0007_audit_hmac'
down_revision = '0006_search'
branch_labels = None
depends_on = None

META = sa.table('agentdesk_meta', sa.column('key', sa.String), sa.column('value', sa.Text))


def upgrade() -> None:
    with op.batch_alter_table('audit_log') as batch:
        batch.add_column(sa.Column('mac', sa.String(length=64), nullable=True))
    bind = op.get_bind()
    known = bind.execute(sa.select(META.c.value).where(META.c.key == 'store_id')).scalar()
    if known is None:
        op.execute(META.insert().values(key='store_id', value=uuid.uuid4().hex))


def downgrade() -> None:
    with op.batch_alter_table('audit_log') as batch:
        batch.drop_column('mac')
