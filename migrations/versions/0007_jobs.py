"""Jobs: the tunes queued through the service (issue 23).

``autotune_jobs`` holds each job's request, state, progress, log tail and result, on SQLite and
PostgreSQL alike. On PostgreSQL the queue itself is procrastinate's, whose tables are not
created here but by procrastinate's schema manager when ``autotune serve`` or ``autotune worker``
starts (:mod:`autotune.jobs.pgqueue`): they follow procrastinate's version, not ours.

Revision ID: 0007_jobs
Revises: 0006_one_profile_per_study
Create Date: 2026-12-05 00:30:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0007_jobs'
down_revision = '0006_one_profile_per_study'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('autotune_jobs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('request', sa.JSON(), nullable=False),
    sa.Column('study_name', sa.String(length=255), nullable=False),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('worker', sa.String(length=255), nullable=True),
    sa.Column('queue_job_id', sa.BigInteger(), nullable=True),
    sa.Column('progress', sa.JSON(), nullable=False),
    sa.Column('log_tail', sa.JSON(), nullable=False),
    sa.Column('profile_id', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_jobs'))
    )
    with op.batch_alter_table('autotune_jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_autotune_jobs_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_autotune_jobs_status'), ['status'], unique=False)


def downgrade() -> None:
    op.drop_table('autotune_jobs')
