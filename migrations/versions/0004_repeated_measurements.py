"""Repeated measurements: phase, repetitions and 95 % intervals on trials and profiles.

Measurements get ``phase`` (screening: one pass per Optuna trial; confirmation: the repeated,
paired protocol of engines/protocol.py), ``repetitions`` and ``intervals`` (JSON: per figure
``{"value", "low", "high", "n", "confidence"}``); rows stored before this revision read as one
screening pass (n = 1, no interval). The unique trial number becomes unique within its phase.
Deployment profiles get ``repetitions`` and ``intervals`` for the figures they report. The
throughput index gains ``phase`` after ``state``: `profiles best` asks for confirmed rows first.

Revision ID: 0004_repeated_measurements
Revises: 0003_profile_query_index
Create Date: 2026-12-03 11:40:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0004_repeated_measurements'
down_revision = '0003_profile_query_index'
branch_labels = None
depends_on = None

UNIQUE = 'uq_autotune_measurements_trial'
THROUGHPUT = 'ix_autotune_measurements_throughput'
THROUGHPUT_0003 = ['study_id', 'state', 'tokens_per_s', 'batch_size', 'tpot_ms_p50']
THROUGHPUT_0004 = ['study_id', 'state', 'phase', 'tokens_per_s', 'batch_size', 'tpot_ms_p50']


def upgrade() -> None:
    with op.batch_alter_table('autotune_measurements', schema=None) as batch_op:
        batch_op.add_column(sa.Column('phase', sa.String(length=16), server_default='screening', nullable=False))
        batch_op.add_column(sa.Column('repetitions', sa.Integer(), server_default='1', nullable=False))
        batch_op.add_column(sa.Column('intervals', sa.JSON(), nullable=True))
        batch_op.drop_constraint(UNIQUE, type_='unique')
        batch_op.create_unique_constraint(UNIQUE, ['study_id', 'phase', 'trial_number'])
        batch_op.drop_index(THROUGHPUT)
        batch_op.create_index(THROUGHPUT, THROUGHPUT_0004, unique=False)
    with op.batch_alter_table('autotune_deployment_profiles', schema=None) as batch_op:
        batch_op.add_column(sa.Column('repetitions', sa.Integer(), server_default='1', nullable=False))
        batch_op.add_column(sa.Column('intervals', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('autotune_deployment_profiles', schema=None) as batch_op:
        batch_op.drop_column('intervals')
        batch_op.drop_column('repetitions')
    op.execute("DELETE FROM autotune_measurements WHERE phase <> 'screening'")
    with op.batch_alter_table('autotune_measurements', schema=None) as batch_op:
        batch_op.drop_constraint(UNIQUE, type_='unique')
        batch_op.create_unique_constraint(UNIQUE, ['study_id', 'trial_number'])
        batch_op.drop_index(THROUGHPUT)
        batch_op.create_index(THROUGHPUT, THROUGHPUT_0003, unique=False)
        batch_op.drop_column('intervals')
        batch_op.drop_column('repetitions')
        batch_op.drop_column('phase')
