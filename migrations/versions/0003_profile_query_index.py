"""Index for `autotune profiles best`: a study's complete trials in throughput order.

On (study_id, state, tokens_per_s, batch_size, tpot_ms_p50): "the fastest complete trial of this
study at batch size B with TPOT p50 <= X" walks the index from the fastest trial down, checks
batch size and TPOT in the index itself and stops at the first fit (about 1 ms instead of 10-20 ms
with 100,000 trials; bench/bench_profiles_best.py).

Revision ID: 0003_profile_query_index
Revises: 0001_initial
Create Date: 2026-12-03 19:10:00
"""

from alembic import op


revision = '0003_profile_query_index'
down_revision = '0001_initial'
branch_labels = None
depends_on = None

INDEX = 'ix_autotune_measurements_throughput'
COLUMNS = ['study_id', 'state', 'tokens_per_s', 'batch_size', 'tpot_ms_p50']


def upgrade() -> None:
    with op.batch_alter_table('autotune_measurements', schema=None) as batch_op:
        batch_op.create_index(INDEX, COLUMNS, unique=False)


def downgrade() -> None:
    with op.batch_alter_table('autotune_measurements', schema=None) as batch_op:
        batch_op.drop_index(INDEX)
