"""Migration 0009 (issue 38: the axis is concurrency) over data: a 0008 database's ``batch_size``
columns and the product's JSON keys (at any depth: a study's space, a trial's extra, a profile's
table and details, a cost profile's points, a queued job's request) come out under the new names
with their values; an engine's own keys (``max_batch_size``, ``num_speculative_tokens_per_batch_size``)
and every other table stay as they were; the indexes cover the new column; the downgrade gives the
0008 rows back unchanged. Every test runs on SQLite and on PostgreSQL (``empty_db_url``); a
database that today's main really wrote is upgraded in test_batch_size_era.py.

Rows are written at 0008 through SQLAlchemy Core on the reflected tables (old_schema_rows).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Connection, inspect, select

from old_schema_rows import insert, insert_study, tables

from autotune.store import migrate, open_database

BEFORE = "0008_validation_runs"
NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.timezone.utc)
ENGINE_KEYS = {"max_batch_size": 8, "num_speculative_tokens_per_batch_size": [[1, 8, 2]]}  # not ours: kept
# The documents as 0008 stores them, and as 0009 must: (table, column) -> (old, new).
DOCUMENTS: dict[tuple[str, str], tuple[Any, Any]] = {
    ("autotune_tuning_studies", "search_space"): (
        {"methods": ["none", "mtp"], "max_depth": 2, "batch_sizes": [1, 2]},
        {"methods": ["none", "mtp"], "max_depth": 2, "concurrencies": [1, 2]},
    ),
    ("autotune_measurements", "extra"): (
        {"confirmation": {"round": 1, "batch_size": 2}, "measurement": {"window": {"n": 6}}, **ENGINE_KEYS},
        {"confirmation": {"round": 1, "concurrency": 2}, "measurement": {"window": {"n": 6}}, **ENGINE_KEYS},
    ),
    ("autotune_deployment_profiles", "details"): (
        {"trial": {"batch_size": 2, "label": "mtp@2 b2"},
         "verdict": [{"method": "mtp", "best_batch_size": 2, "by_batch_size": [{"batch_size": 1, "depth": 2}]}]},
        {"trial": {"concurrency": 2, "label": "mtp@2 b2"},
         "verdict": [{"method": "mtp", "best_concurrency": 2, "by_concurrency": [{"concurrency": 1, "depth": 2}]}]},
    ),
    ("autotune_cost_profiles", "points"): (
        [{"method": "none", "batch_size": 1, "step_s": 0.01}, {"method": "none", "batch_size": 2, "step_s": 0.02}],
        [{"method": "none", "concurrency": 1, "step_s": 0.01}, {"method": "none", "concurrency": 2, "step_s": 0.02}],
    ),
    ("autotune_cost_profiles", "settings"): ({"batch_sizes": [1, 2], "steps": 4}, {"concurrencies": [1, 2], "steps": 4}),
    ("autotune_jobs", "request"): ({"batch_sizes": [1, 8], "max_depth": 2}, {"concurrencies": [1, 8], "max_depth": 2}),
}
PER_BATCH_SIZE = [{"batch_size": 1, "method": "mtp", "depth": 2}, {"batch_size": 2, "method": "none", "depth": 0}]
PER_CONCURRENCY = [{"concurrency": 1, "method": "mtp", "depth": 2}, {"concurrency": 2, "method": "none", "depth": 0}]
MODEL_CONFIG = {"batch_size": 32, "max_batch_size": 64}  # a model's own config: not a document of ours


def old(key: tuple[str, str]) -> Any:
    return DOCUMENTS[key][0]


def write_0008_rows(connection: Connection) -> dict[str, int]:
    t = tables(connection)
    hardware, target, study = insert_study(connection, NOW)
    connection.execute(t["autotune_tuning_studies"].update().values(
        search_space=old(("autotune_tuning_studies", "search_space"))))
    connection.execute(t["autotune_model_artifacts"].update().values(config=MODEL_CONFIG))
    measurement = insert(
        connection, t["autotune_measurements"], study_id=study, trial_number=0, method="mtp", depth=2, batch_size=2,
        state="complete", tokens_per_s=100.0, acceptance_by_position=[], phase="confirmation", repetitions=3,
        extra=old(("autotune_measurements", "extra")), created_at=NOW,
    )
    profile = insert(
        connection, t["autotune_deployment_profiles"], study_id=study, hardware_id=hardware, target_model_id=target,
        measurement_id=measurement, method="mtp", depth=2, batch_size=2, objective="throughput", tokens_per_s=100.0,
        per_batch_size=PER_BATCH_SIZE, details=old(("autotune_deployment_profiles", "details")), created_at=NOW,
    )
    insert(connection, t["autotune_cost_profiles"], hardware_id=hardware, engine="embedded", target_model_id=target,
           key="k" * 32, source="timed", points=old(("autotune_cost_profiles", "points")),
           settings=old(("autotune_cost_profiles", "settings")), created_at=NOW)
    insert(connection, t["autotune_jobs"], status="queued", request=old(("autotune_jobs", "request")), study_name="s",
           cancel_requested=False, attempts=0, progress={}, log_tail=[], created_at=NOW)
    validation = {"concurrency": [1, 2], "servers": []}  # 0008 said concurrency already: left as it is
    insert(connection, t["autotune_validation_runs"], profile_id=profile, engine="vllm", engine_version="0.32.0",
           runs=1, concurrency=[1, 2], result=validation, created_at=NOW)
    return {"study": study, "measurement": measurement, "profile": profile}


def document(connection: Connection, table: str, column: str) -> Any:
    return connection.execute(select(tables(connection)[table].c[column])).scalar_one()


def columns(connection: Connection, table: str) -> set[str]:
    return {c["name"] for c in inspect(connection).get_columns(table)}


def index_columns(connection: Connection) -> dict[str, list[str]]:
    return {i["name"]: i["column_names"] for i in inspect(connection).get_indexes("autotune_measurements")}


def assert_0008(connection: Connection) -> None:
    assert {"batch_size"} <= columns(connection, "autotune_measurements") and "concurrency" not in columns(
        connection, "autotune_measurements")
    assert {"batch_size", "per_batch_size"} <= columns(connection, "autotune_deployment_profiles")
    for (table, column), (before, _after) in DOCUMENTS.items():
        assert document(connection, table, column) == before, (table, column)
    assert document(connection, "autotune_deployment_profiles", "per_batch_size") == PER_BATCH_SIZE
    assert index_columns(connection)["ix_autotune_measurements_config"] == ["study_id", "method", "batch_size", "depth"]


def test_0008_rows_upgrade_to_concurrency_and_back(empty_db_url: str) -> None:
    with open_database(empty_db_url, migrate=False) as database:
        assert migrate.upgrade(database.engine, BEFORE).current == BEFORE
        with database.engine.begin() as connection:
            ids = write_0008_rows(connection)
            assert_0008(connection)

        assert migrate.upgrade(database.engine).is_head
        migrate.check(database.engine)  # the renamed columns and rebuilt indexes match the models
        with database.engine.begin() as connection:
            profiles, measurements = (tables(connection)[name] for name in (
                "autotune_deployment_profiles", "autotune_measurements"))
            assert connection.execute(select(measurements.c.id, measurements.c.concurrency)).all() == [
                (ids["measurement"], 2)]
            assert connection.execute(select(profiles.c.id, profiles.c.concurrency, profiles.c.per_concurrency)).all() \
                == [(ids["profile"], 2, PER_CONCURRENCY)]
            for (table, column), (_before, after) in DOCUMENTS.items():
                assert document(connection, table, column) == after, (table, column)
            assert document(connection, "autotune_model_artifacts", "config") == MODEL_CONFIG
            assert document(connection, "autotune_validation_runs", "result") == {"concurrency": [1, 2], "servers": []}
            indexes = index_columns(connection)
            assert indexes["ix_autotune_measurements_config"] == ["study_id", "method", "concurrency", "depth"]
            assert indexes["ix_autotune_measurements_throughput"] == [
                "study_id", "state", "phase", "tokens_per_s", "concurrency", "tpot_ms_p50"]

        assert migrate.downgrade(database.engine, BEFORE).current == BEFORE
        with database.engine.begin() as connection:
            assert_0008(connection)
            assert document(connection, "autotune_model_artifacts", "config") == MODEL_CONFIG
        assert migrate.upgrade(database.engine).is_head  # and up again
        migrate.check(database.engine)
