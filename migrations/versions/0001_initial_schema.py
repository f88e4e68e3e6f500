"""Initial schema: hardware profiles and probes, models, studies, measurements, deployment profiles.

Revision ID: 0001_initial
Revises: (none)
Create Date: 2026-12-02 18:45:18.858519
"""

from alembic import op
import sqlalchemy as sa


revision = '0001_initial'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('autotune_hardware_profiles',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('device_type', sa.String(length=16), nullable=False),
    sa.Column('device_count', sa.Integer(), nullable=False),
    sa.Column('memory_total_bytes', sa.BigInteger(), nullable=False),
    sa.Column('spec', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_hardware_profiles')),
    sa.UniqueConstraint('fingerprint', name=op.f('uq_autotune_hardware_profiles_fingerprint'))
    )
    with op.batch_alter_table('autotune_hardware_profiles', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_hardware_profiles_name'), ['name'], unique=False)

    op.create_table('autotune_model_artifacts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('num_params', sa.BigInteger(), nullable=True),
    sa.Column('num_mtp_modules', sa.Integer(), nullable=False),
    sa.Column('vocab_size', sa.Integer(), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_model_artifacts')),
    sa.UniqueConstraint('fingerprint', name=op.f('uq_autotune_model_artifacts_fingerprint'))
    )
    with op.batch_alter_table('autotune_model_artifacts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_model_artifacts_name'), ['name'], unique=False)

    op.create_table('autotune_hardware_probes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('hardware_id', sa.Integer(), nullable=False),
    sa.Column('method_version', sa.Integer(), nullable=False),
    sa.Column('quick', sa.Boolean(), nullable=False),
    sa.Column('duration_s', sa.Float(), nullable=False),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['hardware_id'], ['autotune_hardware_profiles.id'], name=op.f('fk_autotune_hardware_probes_hardware_id_autotune_hardware_profiles'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_hardware_probes'))
    )
    with op.batch_alter_table('autotune_hardware_probes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_hardware_probes_hardware_id'), ['hardware_id'], unique=False)

    op.create_table('autotune_tuning_studies',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('optuna_study_name', sa.String(length=255), nullable=False),
    sa.Column('hardware_id', sa.Integer(), nullable=False),
    sa.Column('target_model_id', sa.Integer(), nullable=False),
    sa.Column('engine', sa.String(length=32), nullable=False),
    sa.Column('objective', sa.String(length=32), nullable=False),
    sa.Column('search_space', sa.JSON(), nullable=False),
    sa.Column('slo', sa.JSON(), nullable=False),
    sa.Column('workload_name', sa.String(length=255), nullable=False),
    sa.Column('workload_fingerprint', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['hardware_id'], ['autotune_hardware_profiles.id'], name=op.f('fk_autotune_tuning_studies_hardware_id_autotune_hardware_profiles')),
    sa.ForeignKeyConstraint(['target_model_id'], ['autotune_model_artifacts.id'], name=op.f('fk_autotune_tuning_studies_target_model_id_autotune_model_artifacts')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_tuning_studies')),
    sa.UniqueConstraint('name', name=op.f('uq_autotune_tuning_studies_name'))
    )
    with op.batch_alter_table('autotune_tuning_studies', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_tuning_studies_hardware_id'), ['hardware_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_tuning_studies_target_model_id'), ['target_model_id'], unique=False)

    op.create_table('autotune_measurements',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('trial_number', sa.Integer(), nullable=False),
    sa.Column('method', sa.String(length=16), nullable=False),
    sa.Column('draft_model_id', sa.Integer(), nullable=True),
    sa.Column('depth', sa.Integer(), nullable=False),
    sa.Column('batch_size', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('tokens_per_s', sa.Float(), nullable=True),
    sa.Column('requests_per_s', sa.Float(), nullable=True),
    sa.Column('ttft_ms_p50', sa.Float(), nullable=True),
    sa.Column('ttft_ms_p90', sa.Float(), nullable=True),
    sa.Column('ttft_ms_p99', sa.Float(), nullable=True),
    sa.Column('tpot_ms_p50', sa.Float(), nullable=True),
    sa.Column('tpot_ms_p90', sa.Float(), nullable=True),
    sa.Column('tpot_ms_p99', sa.Float(), nullable=True),
    sa.Column('acceptance_rate', sa.Float(), nullable=True),
    sa.Column('acceptance_length', sa.Float(), nullable=True),
    sa.Column('acceptance_by_position', sa.JSON(), nullable=False),
    sa.Column('drafted_tokens', sa.BigInteger(), nullable=True),
    sa.Column('accepted_tokens', sa.BigInteger(), nullable=True),
    sa.Column('peak_memory_bytes', sa.BigInteger(), nullable=True),
    sa.Column('wall_time_s', sa.Float(), nullable=True),
    sa.Column('speedup', sa.Float(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['draft_model_id'], ['autotune_model_artifacts.id'], name=op.f('fk_autotune_measurements_draft_model_id_autotune_model_artifacts')),
    sa.ForeignKeyConstraint(['study_id'], ['autotune_tuning_studies.id'], name=op.f('fk_autotune_measurements_study_id_autotune_tuning_studies'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_measurements')),
    sa.UniqueConstraint('study_id', 'trial_number', name='uq_autotune_measurements_trial')
    )
    with op.batch_alter_table('autotune_measurements', schema=None) as batch_op:
        batch_op.create_index('ix_autotune_measurements_config', ['study_id', 'method', 'batch_size', 'depth'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_measurements_draft_model_id'), ['draft_model_id'], unique=False)

    op.create_table('autotune_deployment_profiles',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('hardware_id', sa.Integer(), nullable=False),
    sa.Column('target_model_id', sa.Integer(), nullable=False),
    sa.Column('measurement_id', sa.Integer(), nullable=True),
    sa.Column('method', sa.String(length=16), nullable=False),
    sa.Column('draft_model_id', sa.Integer(), nullable=True),
    sa.Column('depth', sa.Integer(), nullable=False),
    sa.Column('batch_size', sa.Integer(), nullable=False),
    sa.Column('objective', sa.String(length=32), nullable=False),
    sa.Column('tokens_per_s', sa.Float(), nullable=True),
    sa.Column('tpot_ms_p50', sa.Float(), nullable=True),
    sa.Column('speedup', sa.Float(), nullable=True),
    sa.Column('per_batch_size', sa.JSON(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['draft_model_id'], ['autotune_model_artifacts.id'], name=op.f('fk_autotune_deployment_profiles_draft_model_id_autotune_model_artifacts')),
    sa.ForeignKeyConstraint(['hardware_id'], ['autotune_hardware_profiles.id'], name=op.f('fk_autotune_deployment_profiles_hardware_id_autotune_hardware_profiles')),
    sa.ForeignKeyConstraint(['measurement_id'], ['autotune_measurements.id'], name=op.f('fk_autotune_deployment_profiles_measurement_id_autotune_measurements'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['study_id'], ['autotune_tuning_studies.id'], name=op.f('fk_autotune_deployment_profiles_study_id_autotune_tuning_studies'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['target_model_id'], ['autotune_model_artifacts.id'], name=op.f('fk_autotune_deployment_profiles_target_model_id_autotune_model_artifacts')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_deployment_profiles'))
    )
    with op.batch_alter_table('autotune_deployment_profiles', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_deployment_profiles_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_deployment_profiles_hardware_id'), ['hardware_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_deployment_profiles_method'), ['method'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_deployment_profiles_study_id'), ['study_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_deployment_profiles_target_model_id'), ['target_model_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('autotune_deployment_profiles', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_autotune_deployment_profiles_target_model_id'))
        batch_op.drop_index(batch_op.f('ix_autotune_deployment_profiles_study_id'))
        batch_op.drop_index(batch_op.f('ix_autotune_deployment_profiles_method'))
        batch_op.drop_index(batch_op.f('ix_autotune_deployment_profiles_hardware_id'))
        batch_op.drop_index(batch_op.f('ix_autotune_deployment_profiles_created_at'))

    op.drop_table('autotune_deployment_profiles')
    with op.batch_alter_table('autotune_measurements', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_autotune_measurements_draft_model_id'))
        batch_op.drop_index('ix_autotune_measurements_config')

    op.drop_table('autotune_measurements')
    with op.batch_alter_table('autotune_tuning_studies', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_autotune_tuning_studies_target_model_id'))
        batch_op.drop_index(batch_op.f('ix_autotune_tuning_studies_hardware_id'))

    op.drop_table('autotune_tuning_studies')
    with op.batch_alter_table('autotune_hardware_probes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_autotune_hardware_probes_hardware_id'))

    op.drop_table('autotune_hardware_probes')
    with op.batch_alter_table('autotune_model_artifacts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_autotune_model_artifacts_name'))

    op.drop_table('autotune_model_artifacts')
    with op.batch_alter_table('autotune_hardware_profiles', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_autotune_hardware_profiles_name'))

    op.drop_table('autotune_hardware_profiles')
