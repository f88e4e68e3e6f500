"""Performance model: acceptance and cost profiles, and the prediction stored with each trial.

A trial's speed is predicted from two profiles kept apart because they vary with different
things: ``autotune_acceptance_profiles`` (how often a proposer's drafts are accepted, position by
position, for a target on a workload: the same on every machine) and ``autotune_cost_profiles``
(what an engine step of a target costs on one machine kind, timed or estimated from a roofline).
Measurements get ``prediction`` (JSON, nullable): what the model predicted before the trial ran,
so that measured and predicted figures can be compared; rows stored before this revision have none.

Revision ID: 0005_performance_model
Revises: 0004_repeated_measurements
Create Date: 2026-12-05 10:20:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0005_performance_model'
down_revision = '0004_repeated_measurements'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('autotune_acceptance_profiles',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('target_model_id', sa.Integer(), nullable=False),
    sa.Column('proposer', sa.String(length=80), nullable=False),
    sa.Column('draft_model_id', sa.Integer(), nullable=True),
    sa.Column('workload_fingerprint', sa.String(length=64), nullable=False),
    sa.Column('workload_name', sa.String(length=255), nullable=False),
    sa.Column('max_depth', sa.Integer(), nullable=False),
    sa.Column('positions', sa.JSON(), nullable=False),
    sa.Column('sources', sa.JSON(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['draft_model_id'], ['autotune_model_artifacts.id'], name=op.f('fk_autotune_acceptance_profiles_draft_model_id_autotune_model_artifacts'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['target_model_id'], ['autotune_model_artifacts.id'], name=op.f('fk_autotune_acceptance_profiles_target_model_id_autotune_model_artifacts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_acceptance_profiles')),
    sa.UniqueConstraint('target_model_id', 'proposer', 'workload_fingerprint', name='uq_autotune_acceptance_profiles_key')
    )
    with op.batch_alter_table('autotune_acceptance_profiles', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_acceptance_profiles_draft_model_id'), ['draft_model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_acceptance_profiles_target_model_id'), ['target_model_id'], unique=False)

    op.create_table('autotune_cost_profiles',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('hardware_id', sa.Integer(), nullable=False),
    sa.Column('engine', sa.String(length=32), nullable=False),
    sa.Column('target_model_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('points', sa.JSON(), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('duration_s', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['hardware_id'], ['autotune_hardware_profiles.id'], name=op.f('fk_autotune_cost_profiles_hardware_id_autotune_hardware_profiles'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['target_model_id'], ['autotune_model_artifacts.id'], name=op.f('fk_autotune_cost_profiles_target_model_id_autotune_model_artifacts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_cost_profiles')),
    sa.UniqueConstraint('hardware_id', 'engine', 'target_model_id', 'key', name='uq_autotune_cost_profiles_key')
    )
    with op.batch_alter_table('autotune_cost_profiles', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_cost_profiles_hardware_id'), ['hardware_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_cost_profiles_target_model_id'), ['target_model_id'], unique=False)

    # A nullable column without a default: SQLite adds it in place (no batch rebuild of the
    # measurements, so no profile can lose its trial), and existing rows read as "not predicted".
    with op.batch_alter_table('autotune_measurements', schema=None) as batch_op:
        batch_op.add_column(sa.Column('prediction', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('autotune_measurements', schema=None) as batch_op:
        batch_op.drop_column('prediction')

    with op.batch_alter_table('autotune_cost_profiles', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_autotune_cost_profiles_target_model_id'))
        batch_op.drop_index(batch_op.f('ix_autotune_cost_profiles_hardware_id'))

    op.drop_table('autotune_cost_profiles')
    with op.batch_alter_table('autotune_acceptance_profiles', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_autotune_acceptance_profiles_target_model_id'))
        batch_op.drop_index(batch_op.f('ix_autotune_acceptance_profiles_draft_model_id'))

    op.drop_table('autotune_acceptance_profiles')
