"""One deployment profile per study, and an index on every foreign key of the profiles.

``autotune_deployment_profiles.study_id`` becomes unique (its plain index goes: the constraint's
own index serves the same lookups). Until now only code kept one profile per study (the tuner
replaces it under the study lock), so a database written by a race or by hand may hold several.
The upgrade then KEEPS THE NEWEST profile of each study (latest ``created_at``, the highest id
among equals: the one `profiles list`, newest first, already showed first) and deletes the older
ones, instead of failing on the constraint; the study's trials all stay. ``measurement_id`` and
``draft_model_id`` get the indexes every other foreign key has, so that deleting a trial or a
model does not scan the profiles. The downgrade restores 0005's indexes and keeps every row.

Revision ID: 0006_one_profile_per_study
Revises: 0005_performance_model
Create Date: 2026-12-03 20:00:00
"""

from alembic import op


revision = '0006_one_profile_per_study'
down_revision = '0005_performance_model'
branch_labels = None
depends_on = None

TABLE = 'autotune_deployment_profiles'
UNIQUE_STUDY = 'uq_autotune_deployment_profiles_study_id'
STUDY_INDEX = 'ix_autotune_deployment_profiles_study_id'
NEW_INDEXES = {
    'ix_autotune_deployment_profiles_measurement_id': 'measurement_id',
    'ix_autotune_deployment_profiles_draft_model_id': 'draft_model_id',
}
# Every profile that a newer one of the same study supersedes (portable SQL: SQLite and PostgreSQL).
DELETE_SUPERSEDED = f"""
DELETE FROM {TABLE} WHERE EXISTS (
    SELECT 1 FROM {TABLE} AS newer
    WHERE newer.study_id = {TABLE}.study_id
      AND (newer.created_at > {TABLE}.created_at OR (newer.created_at = {TABLE}.created_at AND newer.id > {TABLE}.id))
)
"""


def upgrade() -> None:
    op.execute(DELETE_SUPERSEDED)
    with op.batch_alter_table(TABLE, schema=None) as batch_op:
        batch_op.drop_index(STUDY_INDEX)
        batch_op.create_unique_constraint(UNIQUE_STUDY, ['study_id'])
        for name, column in NEW_INDEXES.items():
            batch_op.create_index(name, [column], unique=False)


def downgrade() -> None:
    with op.batch_alter_table(TABLE, schema=None) as batch_op:
        for name in NEW_INDEXES:
            batch_op.drop_index(name)
        batch_op.drop_constraint(UNIQUE_STUDY, type_='unique')
        batch_op.create_index(STUDY_INDEX, ['study_id'], unique=False)
