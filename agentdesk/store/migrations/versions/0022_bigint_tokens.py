"""bigint tokens: a run's token sums as BIGINT on PostgreSQL, as SQLite's INTEGER already holds them

Revision ID: 0022_bigint_tokens
Revises: 0021_pg_functions_refresh
Create Date: 2026-12-06 08:30:00

`runs.input_tokens` / `runs.output_tokens` hold the sum over the run's spans. SQLite's INTEGER is 64-bit,
PostgreSQL's 32-bit: a long run passes 2**31 - 1 (2.1 billion) tokens (40,000 model calls averaging 60,000
tokens of context do), which SQLite stores and PostgreSQL refused ("integer out of range"), so the same
trace imported on one backend and failed on the other (bench/timeline_bench.py's generator hit it first).
The spans' own counts stay INTEGER: one model call past two billion tokens is not a thing, and widening
them would rewrite the largest table of every team database on upgrade; `runs` is one row a run.

No view, function or index uses these columns (0008-0021 define none; the server functions never write
run sums), and grants are on the table, so the type change keeps them. A view a team added on these
columns would make the ALTER fail with PostgreSQL's own sentence naming it: drop it, upgrade, recreate it.
SQLite: nothing to do. Downgrade: back to INTEGER, sums past its range clamped to 2**31 - 1.
"""
from __future__ import annotations

from alembic import op

revision = '0022_bigint_tokens'
down_revision = '0021_pg_functions_refresh'
branch_labels = None
depends_on = None

UPGRADE = ("ALTER TABLE public.runs ALTER COLUMN input_tokens TYPE bigint, "
           "ALTER COLUMN output_tokens TYPE bigint")

DOWNGRADE = ("ALTER TABLE public.runs "
             "ALTER COLUMN input_tokens TYPE integer USING least(input_tokens, 2147483647)::integer, "
             "ALTER COLUMN output_tokens TYPE integer USING least(output_tokens, 2147483647)::integer")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(UPGRADE)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(DOWNGRADE)
