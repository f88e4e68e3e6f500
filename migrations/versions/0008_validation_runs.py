"""Validation runs: a profile's export served under a load generator (issue 26, `autotune validate`).

``autotune_validation_runs`` holds one row per validation of a deployment profile: engine and its
version, runs per point, the concurrency levels, and the servers' figures with their intervals as
JSON. Rows go with their profile (ON DELETE CASCADE), as the profile's own measurements go with
its study.

Revision ID: 0008_validation_runs
Revises: 0007_jobs
Create Date: 2026-12-05 04:10:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0008_validation_runs'
down_revision = '0007_jobs'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('autotune_validation_runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('profile_id', sa.Integer(), nullable=False),
    sa.Column('engine', sa.String(length=16), nullable=False),
    sa.Column('engine_version', sa.String(length=64), nullable=False),
    sa.Column('runs', sa.Integer(), nullable=False),
    sa.Column('concurrency', sa.JSON(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['profile_id'], ['autotune_deployment_profiles.id'],
                            name=op.f('fk_autotune_validation_runs_profile_id_autotune_deployment_profiles'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_validation_runs'))
    )
    with op.batch_alter_table('autotune_validation_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_validation_runs_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_validation_runs_profile_id'), ['profile_id'], unique=False)


def downgrade() -> None:
    op.drop_table('autotune_validation_runs')
