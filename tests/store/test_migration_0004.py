"""Migration 0004 (repeated measurements) over data: rows written at 0003 survive the upgrade and
read as one screening pass; the downgrade drops confirmation rows and restores the old constraint.

Rows are written at 0003 through SQLAlchemy Core on the reflected tables (no ORM: the models
describe the head schema, not 0003's). Every test runs on SQLite and on PostgreSQL (``empty_db_url``).
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Connection, inspect, select
from sqlalchemy.exc import IntegrityError

from old_schema_rows import insert, insert_study, tables

from autotune.store import migrate, open_database, results
from autotune.store.tables import DeploymentProfileRecord

BEFORE = "0003_profile_query_index"
REVISION = "0004_repeated_measurements"
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)




def write_0003_rows(connection: Connection) -> dict[str, int]:
    """A hardware profile, a target model, a study, two measurements and a profile, as 0003 stored them."""
    t = tables(connection)
    assert "phase" not in t["autotune_measurements"].c  # really the old schema
    hardware, target, study = insert_study(connection, NOW)
    measurement = dict(
        study_id=study, method="none", depth=0, batch_size=4, state="complete", acceptance_by_position=[],
        extra={}, created_at=NOW,
    )
    baseline = insert(connection, t["autotune_measurements"], trial_number=0, tokens_per_s=200.0, **measurement)
    mtp = insert(
        connection, t["autotune_measurements"], trial_number=1, tokens_per_s=300.0, speedup=1.5,
        **{**measurement, "method": "mtp", "depth": 2},
    )
    profile = insert(
        connection, t["autotune_deployment_profiles"], study_id=study, hardware_id=hardware, target_model_id=target,
        measurement_id=mtp, method="mtp", depth=2, batch_size=4, objective="throughput", tokens_per_s=300.0,
        speedup=1.5, per_batch_size=[], details={}, created_at=NOW,
    )
    return {"study": study, "baseline": baseline, "mtp": mtp, "profile": profile}


def unique_constraints(connection: Connection) -> dict[str, list[str]]:
    return {
        c["name"]: c["column_names"] for c in inspect(connection).get_unique_constraints("autotune_measurements")
    }


def test_rows_from_0003_read_as_one_screening_pass(empty_db_url: str) -> None:
    with open_database(empty_db_url, migrate=False) as database:
        assert migrate.upgrade(database.engine, BEFORE).current == BEFORE
        with database.engine.begin() as connection:
            ids = write_0003_rows(connection)
        status = migrate.upgrade(database.engine)
        assert status.is_head and status.current == migrate.head_revision()  # through REVISION
        migrate.check(database.engine)  # the rebuilt table (SQLite batch mode) matches the models

    with open_database(empty_db_url) as database:  # at head: opens without complaint
        with database.session() as session:
            rows = results.study_rows(session, ids["study"])
            assert [(r.trial_number, r.measurement_id) for r in rows] == [(0, ids["baseline"]), (1, ids["mtp"])]
            for row in rows:
                assert (row.phase, row.repetitions, row.intervals, row.confirmed) == ("screening", 1, {}, False)
                estimate = row.estimate("tokens_per_s")
                assert estimate is not None and estimate.value == row.tokens_per_s
                assert estimate.n == 1 and not estimate.has_interval and (estimate.low, estimate.high) == (None, None)
            # Speedups stored before 0004 are kept as they were; none is invented for the baseline row.
            assert [r.speedup for r in rows] == [None, 1.5]
            assert rows[0].estimate("speedup") is None
            assert rows[1].estimate("speedup").n == 1

            profile = session.get(DeploymentProfileRecord, ids["profile"])
            assert (profile.repetitions, profile.intervals, profile.tokens_per_s) == (1, None, 300.0)

            # New rows fit in next to the old ones: a confirmation row may reuse trial number 1.
            results.record_trial(
                session, ids["study"], results.TrialEntry(
                    trial_number=1, method="mtp", depth=2, concurrency=4, state="failed",
                    reason="oom", phase="confirmation"),
            )
        with database.session() as session:
            assert [(r.phase, r.trial_number) for r in results.study_rows(session, ids["study"])] == [
                ("screening", 0), ("screening", 1), ("confirmation", 1),
            ]


def trial(session, study_id: int, number: int, tps: float, **kwargs) -> int:  # noqa: ANN001 - a Session
    measurement = {
        "method": "mtp", "depth": 2, "concurrency": 4, "draft": None, "tokens_per_s": tps, "tpot_ms_p50": 1.0,
        **{name: None for name in results.FIGURE_COLUMNS if name not in ("tokens_per_s", "tpot_ms_p50")},
    }
    measurement["acceptance_by_position"] = []
    return results.record_trial(
        session, study_id, results.TrialEntry(
            trial_number=number, method="mtp", depth=2, concurrency=4, state="complete",
            measurement=measurement, **kwargs),
    ).id


def make_study(session) -> int:  # noqa: ANN001 - a Session
    from autotune.store import repository

    hardware = repository.upsert_hardware(
        session, fingerprint="f" * 16, name="cpu", device_type="cpu", device_count=1, memory_total_bytes=1 << 30,
        spec={},
    )
    target = results.upsert_model(
        session, results.ModelEntry(
            fingerprint="a" * 64, name="target", role="target", source="builtin:target", num_params=10,
            num_mtp_modules=1, vocab_size=259, config={}),
    )
    return results.create_study(
        session, results.StudyEntry(
            name="s", optuna_study_name="s", hardware=hardware, target=target, engine="embedded",
            objective="throughput", search_space={}, slo={}, workload_name="w", workload_fingerprint="0" * 64),
    ).id


def test_downgrade_to_0003_drops_confirmation_rows(empty_db_url: str) -> None:
    interval = {"value": 290.0, "low": 280.0, "high": 300.0, "n": 5, "confidence": 0.95}
    with open_database(empty_db_url) as database:
        with database.engine.begin() as connection:
            assert unique_constraints(connection)["uq_autotune_measurements_trial"] == [
                "study_id", "phase", "trial_number",
            ]
        with database.session() as session:
            study_id = make_study(session)
            first = trial(session, study_id, 0, 200.0)
            screening = trial(session, study_id, 1, 300.0)
            confirmation = trial(
                session, study_id, 1, 290.0, phase="confirmation", repetitions=5, speedup=1.45,
                intervals={"tokens_per_s": interval},
            )
            profile = results.save_profile(
                session, session.get(results.StudyRecord, study_id), results.ProfileEntry(
                    measurement_id=screening, method="mtp",
                    draft_model_id=None, depth=2, concurrency=4, tokens_per_s=290.0, tpot_ms_p50=1.0, speedup=1.45,
                    per_concurrency=[], details={}, repetitions=5, intervals={"tokens_per_s": interval}),
            )
            profile_id = profile.id

        assert migrate.downgrade(database.engine, BEFORE).current == BEFORE

        with database.engine.begin() as connection:
            t = tables(connection)
            for table in ("autotune_measurements", "autotune_deployment_profiles"):
                assert not {"phase", "repetitions", "intervals"} & set(t[table].c.keys()), table
            measurements, profiles = t["autotune_measurements"], t["autotune_deployment_profiles"]
            kept = connection.execute(
                select(measurements.c.id, measurements.c.trial_number).order_by(measurements.c.id)
            ).all()
            assert [tuple(row) for row in kept] == [(first, 0), (screening, 1)]  # the confirmation row is gone
            assert confirmation not in {row.id for row in kept}
            assert connection.execute(
                select(profiles.c.tokens_per_s, profiles.c.speedup).where(profiles.c.id == profile_id)
            ).one() == (290.0, 1.45)
            assert unique_constraints(connection)["uq_autotune_measurements_trial"] == ["study_id", "trial_number"]

        # 0003's constraint is back: one row per trial number in a study.
        with pytest.raises(IntegrityError):
            with database.engine.begin() as connection:
                connection.execute(measurements.insert().values(
                    study_id=study_id, trial_number=1, method="mtp", depth=2, batch_size=4, state="failed",
                    acceptance_by_position=[], extra={}, created_at=NOW,
                ))

        assert migrate.upgrade(database.engine).is_head  # and up again
        migrate.check(database.engine)


def test_migrating_keeps_profiles_linked_to_their_trials(empty_db_url: str) -> None:
    """0004 rebuilds autotune_measurements on SQLite (batch mode: copy, DROP, rename). With the
    foreign keys on that every autotune connection sets, the DROP must not fire the profiles'
    ``measurement_id ... ON DELETE SET NULL``: a profile keeps its chosen trial, up and down."""
    with open_database(empty_db_url, migrate=False) as database:
        migrate.upgrade(database.engine, BEFORE)
        with database.engine.begin() as connection:
            ids = write_0003_rows(connection)
        migrate.upgrade(database.engine)
        with database.session() as session:
            assert session.get(DeploymentProfileRecord, ids["profile"]).measurement_id == ids["mtp"], "upgrade"
        migrate.downgrade(database.engine, BEFORE)
        with database.engine.begin() as connection:
            profiles = tables(connection)["autotune_deployment_profiles"]
            linked = select(profiles.c.measurement_id).where(profiles.c.id == ids["profile"])
            assert connection.execute(linked).scalar_one() == ids["mtp"], "downgrade"
