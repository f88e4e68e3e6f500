"""Migration 0006 (one profile per study, indexed foreign keys) over data: a 0005 database whose
studies hold several profiles upgrades by keeping each study's newest one, every trial kept; at
head a second profile for a study is refused; the downgrade keeps every row and restores 0005's
indexes. Every foreign key of every autotune table has an index.

Rows are written at 0005 through SQLAlchemy Core on the reflected tables (no ORM: the models
describe the head schema, not 0005's). Every test runs on SQLite and on PostgreSQL (``empty_db_url``).
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Connection, func, inspect, select
from sqlalchemy.exc import IntegrityError

from old_schema_rows import insert, insert_study, tables

from autotune.store import migrate, open_database, results
from autotune.store.tables import DeploymentProfileRecord, StudyRecord

BEFORE = "0005_performance_model"
REVISION = "0006_one_profile_per_study"
NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.timezone.utc)
EARLIER = NOW - dt.timedelta(hours=1)
PROFILES = "autotune_deployment_profiles"


def add_study(connection: Connection, hardware: int, target: int, name: str) -> int:
    return insert(
        connection, tables(connection)["autotune_tuning_studies"], name=name, optuna_study_name=name,
        hardware_id=hardware, target_model_id=target, engine="embedded", objective="throughput", search_space={},
        slo={}, workload_name="w", workload_fingerprint="0" * 64, status="complete", created_at=NOW,
    )


def add_trial(connection: Connection, study: int, number: int, tps: float) -> int:
    return insert(
        connection, tables(connection)["autotune_measurements"], study_id=study, trial_number=number, method="mtp",
        depth=2, batch_size=4, state="complete", tokens_per_s=tps, acceptance_by_position=[], extra={},
        created_at=NOW,
    )


def add_profile(connection: Connection, ids: dict[str, int], study: int, measurement: int, tps: float,
                created_at: dt.datetime) -> int:
    profiles = tables(connection)[PROFILES]
    axis = "concurrency" if "concurrency" in profiles.c else "batch_size"  # named so since 0009
    return insert(
        connection, profiles, study_id=study, hardware_id=ids["hardware"],
        target_model_id=ids["target"], measurement_id=measurement, method="mtp", depth=2, objective="throughput",
        tokens_per_s=tps, details={}, created_at=created_at, **{axis: 4, f"per_{axis}": []},
    )


def write_0005_rows(connection: Connection) -> dict[str, int]:
    """Three studies as 0005 allowed them: one profile, three profiles (two written in the same
    instant), none; two trials each."""
    assert "uq_autotune_deployment_profiles_study_id" not in {  # really the old schema
        c["name"] for c in inspect(connection).get_unique_constraints(PROFILES)
    }
    hardware, target, single = insert_study(connection, NOW)
    ids = {"hardware": hardware, "target": target, "single": single}
    ids["several"] = add_study(connection, hardware, target, "several")
    ids["none"] = add_study(connection, hardware, target, "none")
    for study in ("single", "several", "none"):
        ids[f"{study}.0"] = add_trial(connection, ids[study], 0, 100.0)
        ids[f"{study}.1"] = add_trial(connection, ids[study], 1, 200.0)
    ids["single.profile"] = add_profile(connection, ids, ids["single"], ids["single.1"], 200.0, NOW)
    several = ids["several"]
    ids["several.oldest"] = add_profile(connection, ids, several, ids["several.0"], 100.0, EARLIER)
    ids["several.tie_low"] = add_profile(connection, ids, several, ids["several.0"], 150.0, NOW)
    ids["several.newest"] = add_profile(connection, ids, several, ids["several.1"], 200.0, NOW)
    return ids


def profile_rows(connection: Connection) -> list[tuple]:
    profiles = tables(connection)[PROFILES]
    return [tuple(row) for row in connection.execute(
        select(profiles.c.id, profiles.c.study_id, profiles.c.measurement_id, profiles.c.tokens_per_s)
        .order_by(profiles.c.id)
    )]


def trial_counts(connection: Connection) -> dict[int, int]:
    measurements = tables(connection)["autotune_measurements"]
    query = select(measurements.c.study_id, func.count()).group_by(measurements.c.study_id)
    return dict(tuple(row) for row in connection.execute(query))


def test_duplicate_profiles_upgrade_to_the_newest_with_every_trial_kept(empty_db_url: str) -> None:
    with open_database(empty_db_url, migrate=False) as database:
        assert migrate.upgrade(database.engine, BEFORE).current == BEFORE
        with database.engine.begin() as connection:
            ids = write_0005_rows(connection)
        status = migrate.upgrade(database.engine)
        assert status.is_head and status.current == migrate.head_revision()  # through REVISION
        migrate.check(database.engine)  # the rebuilt table (SQLite batch mode) matches the models

        with database.engine.begin() as connection:
            assert profile_rows(connection) == [
                (ids["single.profile"], ids["single"], ids["single.1"], 200.0),
                (ids["several.newest"], ids["several"], ids["several.1"], 200.0),  # latest time, then highest id
            ]
            assert trial_counts(connection) == {ids["single"]: 2, ids["several"]: 2, ids["none"]: 2}

        # The constraint now holds what only code held: a second profile for a study is refused ...
        with pytest.raises(IntegrityError):
            with database.engine.begin() as connection:
                add_profile(connection, ids, ids["single"], ids["single.0"], 100.0, NOW)

    with open_database(empty_db_url) as database:  # ... and the tuner's way, replacing it, still works.
        with database.session() as session:
            for study_id, measurement in ((ids["single"], ids["single.0"]), (ids["none"], ids["none.1"])):
                results.save_profile(
                    session, session.get(StudyRecord, study_id), results.ProfileEntry(
                        measurement_id=measurement, method="mtp",
                        draft_model_id=None, depth=2, concurrency=4, tokens_per_s=123.0, tpot_ms_p50=1.0, speedup=None,
                        per_concurrency=[], details={}),
                )
        with database.session() as session:
            stored = session.scalars(select(DeploymentProfileRecord).order_by(DeploymentProfileRecord.id)).all()
            assert [(p.study_id, p.measurement_id, p.tokens_per_s) for p in stored] == [
                (ids["single"], ids["single.0"], 123.0),
                (ids["several"], ids["several.1"], 200.0),
                (ids["none"], ids["none.1"], 123.0),
            ]
            assert stored[0].id == ids["single.profile"]  # replaced in place


def index_names(connection: Connection) -> set[str]:
    return {index["name"] for index in inspect(connection).get_indexes(PROFILES)}


def unique_names(connection: Connection) -> set[str]:
    return {c["name"] for c in inspect(connection).get_unique_constraints(PROFILES)}


def test_downgrade_to_0005_keeps_every_row_and_its_indexes(empty_db_url: str) -> None:
    with open_database(empty_db_url, migrate=False) as database:
        migrate.upgrade(database.engine, BEFORE)
        with database.engine.begin() as connection:
            ids = write_0005_rows(connection)
        migrate.upgrade(database.engine)
        with database.engine.begin() as connection:
            at_head = profile_rows(connection)
            assert {"ix_autotune_deployment_profiles_measurement_id",
                    "ix_autotune_deployment_profiles_draft_model_id"} <= index_names(connection)
            assert "uq_autotune_deployment_profiles_study_id" in unique_names(connection)

        assert migrate.downgrade(database.engine, BEFORE).current == BEFORE

        with database.engine.begin() as connection:
            assert profile_rows(connection) == at_head
            assert trial_counts(connection) == {ids["single"]: 2, ids["several"]: 2, ids["none"]: 2}
            names = index_names(connection)
            assert "ix_autotune_deployment_profiles_study_id" in names
            assert not {"ix_autotune_deployment_profiles_measurement_id",
                        "ix_autotune_deployment_profiles_draft_model_id"} & names
            assert "uq_autotune_deployment_profiles_study_id" not in unique_names(connection)
            # 0005 again: a study may hold two profiles (what the next upgrade resolves).
            second = add_profile(connection, ids, ids["single"], ids["single.0"], 90.0, EARLIER)

        assert migrate.upgrade(database.engine).is_head  # and up again: the older duplicate goes
        migrate.check(database.engine)
        with database.engine.begin() as connection:
            assert profile_rows(connection) == at_head and second not in {row[0] for row in at_head}


def test_every_foreign_key_has_an_index(empty_db_url: str) -> None:
    """Each foreign key's columns lead some index (a unique constraint's or the primary key's
    counts): deleting a parent row, or joining from it, never scans the child table."""
    with open_database(empty_db_url) as database:
        with database.engine.connect() as connection:
            inspector = inspect(connection)
            checked = []
            for table in sorted(name for name in inspector.get_table_names() if name.startswith("autotune_")):
                leading = [index["column_names"] for index in inspector.get_indexes(table)]
                leading += [c["column_names"] for c in inspector.get_unique_constraints(table)]
                leading.append(inspector.get_pk_constraint(table)["constrained_columns"])
                for key in inspector.get_foreign_keys(table):
                    columns = key["constrained_columns"]
                    assert any(index[:len(columns)] == columns for index in leading), (table, columns)
                    checked.append((table, *columns))
    assert len(checked) == 15  # every foreign key of the schema was seen
    assert {("autotune_deployment_profiles", "measurement_id"),
            ("autotune_deployment_profiles", "draft_model_id")} <= set(checked)
