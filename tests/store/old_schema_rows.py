"""Writing rows into an older schema, for the migration-over-data tests: SQLAlchemy Core on the
reflected tables (no ORM: the models describe the head schema, not the old one)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, MetaData


def tables(connection: Connection) -> dict:
    """Our tables as the database has them now."""
    metadata = MetaData()
    metadata.reflect(connection, only=lambda name, _m: name.startswith("autotune_"))
    return metadata.tables


def insert(connection: Connection, table, **values) -> int:  # noqa: ANN001 - a reflected Table
    return connection.execute(table.insert().values(**values).returning(table.c.id)).scalar_one()


def insert_study(connection: Connection, now: dt.datetime) -> tuple[int, int, int]:
    """A hardware profile, a target model and a complete study on them: their ids."""
    t = tables(connection)
    hardware = insert(
        connection, t["autotune_hardware_profiles"], fingerprint="f" * 16, name="old cpu", device_type="cpu",
        device_count=1, memory_total_bytes=1 << 30, spec={}, created_at=now,
    )
    target = insert(
        connection, t["autotune_model_artifacts"], fingerprint="a" * 64, name="target", role="target",
        source="builtin:target", num_params=10, num_mtp_modules=1, vocab_size=259, config={}, created_at=now,
    )
    study = insert(
        connection, t["autotune_tuning_studies"], name="old", optuna_study_name="old", hardware_id=hardware,
        target_model_id=target, engine="embedded", objective="throughput", search_space={}, slo={},
        workload_name="w", workload_fingerprint="0" * 64, status="complete", created_at=now,
    )
    return hardware, target, study
