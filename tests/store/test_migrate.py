"""Migrations: upgrade to head, downgrade to base, models agree with migrations, Optuna coexists."""

from __future__ import annotations

import optuna
import pytest
from sqlalchemy import create_engine, inspect, text

from autotune.errors import DatabaseError
from autotune.store import open_database
from autotune.store import migrate
from autotune.store.tables import VERSION_TABLE, Base

OUR_TABLES = set(Base.metadata.tables)


def table_names(url: str) -> set[str]:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_open_creates_schema_at_head(empty_db_url: str) -> None:
    with open_database(empty_db_url) as database:
        status = migrate.schema_status(database.engine)
    assert status.is_head and status.known
    assert OUR_TABLES | {VERSION_TABLE} <= table_names(empty_db_url)


def test_upgrade_downgrade_roundtrip(empty_db_url: str) -> None:
    with open_database(empty_db_url, migrate=False) as database:
        assert migrate.current_revision(database.engine) is None
        assert migrate.upgrade(database.engine).is_head
        assert migrate.downgrade(database.engine, "base").current is None
        assert not (OUR_TABLES & table_names(empty_db_url))
        assert migrate.upgrade(database.engine, "head").current == migrate.head_revision()
    assert OUR_TABLES <= table_names(empty_db_url)


def test_models_and_migrations_agree(empty_db_url: str) -> None:
    with open_database(empty_db_url) as database:
        migrate.check(database.engine)  # raises DatabaseError on any difference


def test_check_detects_drift(empty_sqlite_url: str) -> None:
    with open_database(empty_sqlite_url) as database:
        with database.engine.begin() as connection:
            connection.execute(text("DROP INDEX ix_autotune_hardware_profiles_name"))
        with pytest.raises(DatabaseError, match="disagree"):
            migrate.check(database.engine)


def test_optuna_tables_coexist(empty_db_url: str) -> None:
    """Optuna's RDB storage and our schema share one database without touching each other."""
    storage_url = empty_db_url.replace("postgresql://", "postgresql+psycopg://")
    storage = optuna.storages.RDBStorage(storage_url)
    study = optuna.create_study(storage=storage, study_name="coexist")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    optuna_tables = table_names(empty_db_url)
    assert {"studies", "trials", "alembic_version"} <= optuna_tables
    storage.remove_session()
    storage.engine.dispose()

    with open_database(empty_db_url) as database:
        migrate.check(database.engine)  # Optuna's tables are not seen as drift
        migrate.downgrade(database.engine, "base")
    assert optuna_tables - OUR_TABLES <= table_names(empty_db_url)
    reloaded = optuna.load_study(study_name="coexist", storage=storage_url)
    assert len(reloaded.trials) == 2


def test_unknown_revision_is_refused_and_nothing_written(empty_db_url: str) -> None:
    with open_database(empty_db_url) as database:
        with database.engine.begin() as connection:
            connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'ffff_from_future'"))
    for action in (lambda e: migrate.upgrade(e), lambda e: migrate.downgrade(e, "base")):
        with open_database(empty_db_url, migrate=False) as database:
            with pytest.raises(DatabaseError, match="unknown to this autotune"):
                action(database.engine)
    with pytest.raises(DatabaseError, match="newer version"):
        open_database(empty_db_url)
    assert OUR_TABLES <= table_names(empty_db_url)
    with open_database(empty_db_url, migrate=False) as database:
        assert migrate.current_revision(database.engine) == "ffff_from_future"


def test_older_revision_is_refused_until_upgraded(empty_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_database(empty_db_url):
        pass
    # Pretend this autotune ships a newer head than the database's revision.
    monkeypatch.setattr(migrate, "head_revision", lambda: "0002_future")
    with pytest.raises(DatabaseError, match="autotune db upgrade"):
        open_database(empty_db_url)


def test_migrations_ship_with_the_package() -> None:
    path = migrate.migrations_dir()
    assert path.endswith("migrations")
    assert migrate.head_revision() == "0009_concurrency"
