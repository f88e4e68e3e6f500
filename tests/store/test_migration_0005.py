"""Migration 0005 (performance model) over data: rows written at 0004 survive the upgrade with no
prediction; the downgrade drops the acceptance and cost profiles and the predictions, and keeps
every measurement and profile.

Rows are written at 0004 through SQLAlchemy Core on the reflected tables (no ORM: the models
describe the head schema, not 0004's). Every test runs on SQLite and on PostgreSQL (``empty_db_url``).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, inspect, select

from old_schema_rows import insert, insert_study, tables

from autotune.store import migrate, open_database, performance, results
from autotune.store.tables import DeploymentProfileRecord, MeasurementRecord

BEFORE = "0004_repeated_measurements"
REVISION = "0005_performance_model"
NEW_TABLES = {"autotune_acceptance_profiles", "autotune_cost_profiles"}
NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.timezone.utc)
INTERVAL = {"value": 290.0, "low": 280.0, "high": 300.0, "n": 5, "confidence": 0.95}
PREDICTION = {"tokens_per_s": {"value": 300.0, "low": 270.0, "high": 330.0}, "sigma": 0.05, "source": "timed"}




def write_0004_rows(connection: Connection) -> dict[str, int]:
    """Hardware, a target, a study with a screening and a confirmation trial, and its profile, as 0004 stored them."""
    t = tables(connection)
    assert "prediction" not in t["autotune_measurements"].c and not NEW_TABLES & set(t)  # really the old schema
    hardware, target, study = insert_study(connection, NOW)
    measurement = dict(
        study_id=study, trial_number=1, method="mtp", depth=2, batch_size=4, state="complete",
        acceptance_by_position=[0.8, 0.6], extra={}, created_at=NOW,
    )
    screening = insert(connection, t["autotune_measurements"], tokens_per_s=300.0, **measurement)
    confirmation = insert(
        connection, t["autotune_measurements"], tokens_per_s=290.0, speedup=1.45, phase="confirmation",
        repetitions=5, intervals={"tokens_per_s": INTERVAL}, **measurement,
    )
    profile = insert(
        connection, t["autotune_deployment_profiles"], study_id=study, hardware_id=hardware, target_model_id=target,
        measurement_id=confirmation, method="mtp", depth=2, batch_size=4, objective="throughput",
        tokens_per_s=290.0, speedup=1.45, repetitions=5, intervals={"tokens_per_s": INTERVAL}, per_batch_size=[],
        details={}, created_at=NOW,
    )
    return {
        "hardware": hardware, "target": target, "study": study, "screening": screening,
        "confirmation": confirmation, "profile": profile,
    }


def test_rows_from_0004_survive_with_no_prediction(empty_db_url: str) -> None:
    with open_database(empty_db_url, migrate=False) as database:
        assert migrate.upgrade(database.engine, BEFORE).current == BEFORE
        with database.engine.begin() as connection:
            ids = write_0004_rows(connection)
        status = migrate.upgrade(database.engine)
        assert status.is_head and status.current == migrate.head_revision()  # through REVISION
        migrate.check(database.engine)  # the new tables and column match the models

        with database.engine.begin() as connection:
            assert NEW_TABLES <= set(inspect(connection).get_table_names())
            measurements = tables(connection)["autotune_measurements"]
            kept = connection.execute(
                select(measurements.c.id, measurements.c.prediction).order_by(measurements.c.id)
            ).all()
            # Every row is there, its prediction SQL NULL (not a JSON null).
            assert [tuple(row) for row in kept] == [(ids["screening"], None), (ids["confirmation"], None)]
            assert connection.execute(
                select(measurements.c.id).where(measurements.c.prediction.is_(None)).order_by(measurements.c.id)
            ).scalars().all() == [ids["screening"], ids["confirmation"]]

    with open_database(empty_db_url) as database:  # at head: opens without complaint
        with database.session() as session:
            rows = results.study_rows(session, ids["study"])
            assert [(r.phase, r.measurement_id, r.prediction) for r in rows] == [
                ("screening", ids["screening"], None), ("confirmation", ids["confirmation"], None),
            ]
            assert rows[1].intervals == {"tokens_per_s": INTERVAL} and rows[1].repetitions == 5
            profile = session.get(DeploymentProfileRecord, ids["profile"])
            assert (profile.measurement_id, profile.repetitions, profile.tokens_per_s) == (ids["confirmation"], 5, 290.0)

            # New rows fit in next to the old ones.
            added = results.record_trial(
                session, ids["study"], results.TrialEntry(
                    trial_number=2, method="mtp", depth=3, concurrency=4, state="failed",
                    reason="oom", prediction=PREDICTION),
            ).id
            performance.save_acceptance(
                session, performance.AcceptanceKey(ids["target"], "mtp", "0" * 64), draft_model_id=None,
                workload_name="w", max_depth=1,
                positions=[{"steps": 10, "accepted": 8}], sources=[ids["screening"]],
            )
        with database.session() as session:
            predictions = {r.measurement_id: r.prediction for r in results.study_rows(session, ids["study"])}
            assert predictions == {ids["screening"]: None, ids["confirmation"]: None, added: PREDICTION}
            assert [p.sources for p in performance.acceptance_profiles(session)] == [[ids["screening"]]]


def test_downgrade_to_0004_drops_the_model_and_keeps_measurements(empty_db_url: str) -> None:
    with open_database(empty_db_url, migrate=False) as database:
        migrate.upgrade(database.engine, BEFORE)
        with database.engine.begin() as connection:
            ids = write_0004_rows(connection)
        migrate.upgrade(database.engine)
        with database.session() as session:
            predicted = results.record_trial(
                session, ids["study"], results.TrialEntry(
                    trial_number=2, method="mtp", depth=3, concurrency=4, state="failed",
                    reason="oom", prediction=PREDICTION),
            ).id
            session.get(MeasurementRecord, ids["screening"]).prediction = PREDICTION
            performance.save_acceptance(
                session, performance.AcceptanceKey(ids["target"], "mtp", "0" * 64), draft_model_id=None,
                workload_name="w", max_depth=2,
                positions=[{"steps": 10, "accepted": 8}, {"steps": 8, "accepted": 5}], sources=[ids["screening"]],
            )
            performance.save_cost_profile(
                session, performance.CostProfileKey(ids["hardware"], "embedded", ids["target"], "k" * 64),
                source="timed", points=[{"batch_size": 4, "ms": 2.0}], settings={}, duration_s=3.0,
            )

        assert migrate.downgrade(database.engine, BEFORE).current == BEFORE

        with database.engine.begin() as connection:
            t = tables(connection)
            assert not NEW_TABLES & set(t)
            measurements, profiles = t["autotune_measurements"], t["autotune_deployment_profiles"]
            assert "prediction" not in measurements.c
            kept = connection.execute(
                select(measurements.c.id, measurements.c.phase, measurements.c.tokens_per_s, measurements.c.intervals)
                .order_by(measurements.c.id)
            ).all()
            assert [tuple(row) for row in kept] == [
                (ids["screening"], "screening", 300.0, None),
                (ids["confirmation"], "confirmation", 290.0, {"tokens_per_s": INTERVAL}),
                (predicted, "screening", None, None),
            ]
            # The measurements were rebuilt (SQLite batch mode): the profile still points at its trial.
            assert connection.execute(
                select(profiles.c.measurement_id).where(profiles.c.id == ids["profile"])
            ).scalar_one() == ids["confirmation"]

        status = migrate.upgrade(database.engine)  # and up again: empty tables, no predictions
        assert status.is_head
        migrate.check(database.engine)
        with database.session() as session:
            assert performance.acceptance_profiles(session) == [] and performance.cost_profiles(session) == []
            assert [r.prediction for r in results.study_rows(session, ids["study"])] == [None, None, None]
