"""The axis users deploy at is concurrency (issue 38): ``batch_size`` columns and JSON keys renamed.

Columns: ``autotune_measurements.batch_size`` and ``autotune_deployment_profiles.batch_size``
become ``concurrency``, ``autotune_deployment_profiles.per_batch_size`` becomes
``per_concurrency``; the two measurement indexes over the column are dropped and made again over
the new name (SQLite rebuilds the tables in batch mode). JSON: the keys the product wrote under the
old names inside the stored documents (a study's search space, a trial's extra and prediction, a
profile's table and details, a cost profile's points and settings, a queued job's request and
progress) are renamed with the same map, at any depth; no other key is touched, so an engine's own
keys (``max_batch_size``, ``num_speculative_tokens_per_batch_size``) stay as they are. Optuna's own
tables keep the parameter ``batch_size`` (autotune.search.space.OPTUNA_CONCURRENCY_KEY). The
downgrade renames everything back; validation runs (0008) always said concurrency and are left.

Revision ID: 0009_concurrency
Revises: 0008_validation_runs
Create Date: 2026-12-06 17:00:00
"""

from typing import Any

import sqlalchemy as sa
from alembic import op


revision = '0009_concurrency'
down_revision = '0008_validation_runs'
branch_labels = None
depends_on = None

MEASUREMENTS = 'autotune_measurements'
PROFILES = 'autotune_deployment_profiles'
# The keys as named until 0008 -> since 0009 (frozen here: later code may rename more, this may not).
KEYS = {
    'batch_size': 'concurrency', 'batch_sizes': 'concurrencies', 'per_batch_size': 'per_concurrency',
    'by_batch_size': 'by_concurrency', 'best_batch_size': 'best_concurrency',
    'bytes_by_batch_size': 'bytes_by_concurrency',
}
# The JSON columns that hold documents the product wrote (table -> columns, named as at 0009).
DOCUMENTS = {
    'autotune_tuning_studies': ['search_space', 'slo'],
    MEASUREMENTS: ['extra', 'intervals', 'prediction'],
    PROFILES: ['per_concurrency', 'intervals', 'details'],
    'autotune_cost_profiles': ['points', 'settings'],
    'autotune_jobs': ['request', 'progress'],
}
INDEXES = {  # the measurement indexes over the column, as 0001 and 0004 made them (old column name)
    'ix_autotune_measurements_config': ['study_id', 'method', 'batch_size', 'depth'],
    'ix_autotune_measurements_throughput': ['study_id', 'state', 'phase', 'tokens_per_s', 'batch_size', 'tpot_ms_p50'],
}


def _renamed(value: Any, keys: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {keys.get(k, k): _renamed(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, keys) for v in value]
    return value


def _rename_keys(keys: dict[str, str]) -> None:
    """Rewrite every stored document whose keys ``keys`` renames (row by row: both databases)."""
    connection = op.get_bind()
    for name, columns in DOCUMENTS.items():
        table = sa.table(name, sa.column('id', sa.Integer), *(sa.column(c, sa.JSON) for c in columns))
        for row in connection.execute(sa.select(table)).mappings().all():
            changed = {c: new for c in columns if (new := _renamed(row[c], keys)) != row[c]}
            if changed:
                connection.execute(table.update().where(table.c.id == row['id']).values(**changed))


def _columns(old: str, new: str, old_list: str, new_list: str) -> None:
    """Rename the columns ``old`` -> ``new`` (and the profiles' table ``old_list`` -> ``new_list``),
    the measurement indexes made again over the new name."""
    with op.batch_alter_table(MEASUREMENTS, schema=None) as batch_op:
        for index in INDEXES:
            batch_op.drop_index(index)
        batch_op.alter_column(old, new_column_name=new, existing_type=sa.Integer(), existing_nullable=False)
    with op.batch_alter_table(MEASUREMENTS, schema=None) as batch_op:
        for index, columns in INDEXES.items():
            batch_op.create_index(index, [new if c == 'batch_size' else c for c in columns], unique=False)
    with op.batch_alter_table(PROFILES, schema=None) as batch_op:
        batch_op.alter_column(old, new_column_name=new, existing_type=sa.Integer(), existing_nullable=False)
        batch_op.alter_column(old_list, new_column_name=new_list, existing_type=sa.JSON(), existing_nullable=False)


def upgrade() -> None:
    _columns('batch_size', 'concurrency', 'per_batch_size', 'per_concurrency')
    _rename_keys(KEYS)


def downgrade() -> None:
    _rename_keys({new: old for old, new in KEYS.items()})
    _columns('concurrency', 'batch_size', 'per_concurrency', 'per_batch_size')
