"""Validations stored with their profile (migration 0008_validation_runs), on real SQLite files and on
PostgreSQL: the round trip of a result, newest first, deleted with the profile, and the migration's
upgrade and downgrade next to a profile that exists before it."""

from __future__ import annotations


from sqlalchemy import delete, inspect

import profile_factory as factory
from autotune.analysis.intervals import Estimate
from autotune.store import migrate, open_database
from autotune.store.tables import DeploymentProfileRecord, ValidationRunRecord
from autotune.validation.runner import load_validations, store_validation
from validation_support import a_result

TABLE = "autotune_validation_runs"


def a_profile(url: str) -> int:
    with open_database(url) as database, database.session() as session:
        hardware = factory.hardware(session, *factory.CPU)
        target = factory.model(session, "target", "t" * 16)
        return factory.study(session, "s", hardware, target, methods=("none", "mtp"), concurrencies=(1, 2)).id


def test_a_validation_round_trips_newest_first(db_url: str) -> None:
    profile_id = a_profile(db_url)
    first = store_validation(db_url, a_result(profile_id, minute=1))
    second = store_validation(db_url, a_result(profile_id, minute=2))
    assert first.id is not None and second.id == first.id + 1
    loaded = load_validations(db_url, profile_id)
    assert [v.id for v in loaded] == [second.id, first.id]
    assert loaded[0].to_dict() == second.to_dict()
    assert loaded[0].server("schedule").point(1).figure("output_tokens_per_s") == Estimate(95.0, 90.0, 100.0, 3)
    assert loaded[0].gaps[1] == Estimate(-0.05, -0.10, 0.0, 3)
    assert load_validations(db_url, profile_id + 1000) == []


def test_validations_go_with_their_profile(db_url: str) -> None:
    profile_id = a_profile(db_url)
    store_validation(db_url, a_result(profile_id))
    with open_database(db_url) as database, database.session() as session:
        session.execute(delete(DeploymentProfileRecord).where(DeploymentProfileRecord.id == profile_id))
    with open_database(db_url) as database, database.session() as session:
        assert session.query(ValidationRunRecord).count() == 0


def test_the_migration_adds_and_removes_the_table_only(empty_db_url: str) -> None:
    """A profile written at head (the models are head's), then the database taken down past 0008 and
    up through it: 0008 adds and removes its table alone, the profile stays."""
    profile_id = a_profile(empty_db_url)
    with open_database(empty_db_url, migrate=False) as database:
        assert migrate.downgrade(database.engine, "0007_jobs").current == "0007_jobs"
        assert TABLE not in inspect(database.engine).get_table_names()
        assert migrate.upgrade(database.engine, "0008_validation_runs").current == "0008_validation_runs"
        columns = {c["name"] for c in inspect(database.engine).get_columns(TABLE)}
        assert columns == {"id", "profile_id", "engine", "engine_version", "runs", "concurrency", "result",
                           "created_at"}
        migrate.upgrade(database.engine, "head")
    store_validation(empty_db_url, a_result(profile_id))
    with open_database(empty_db_url, migrate=False) as database:
        assert migrate.downgrade(database.engine, "0007_jobs").current == "0007_jobs"
        names = inspect(database.engine).get_table_names()
        assert TABLE not in names and "autotune_deployment_profiles" in names
    with open_database(empty_db_url, migrate=False) as database:  # upgraded again: the models match
        migrate.upgrade(database.engine, "head")
        migrate.check(database.engine)
        assert migrate.current_revision(database.engine) == migrate.head_revision()
    assert [v.profile_id for v in load_validations(empty_db_url, profile_id)] == []  # went with 0008's table
