"""The performance model's store: acceptance and cost profiles (upserts, unique keys, listings,
cascades) and the prediction kept with each trial. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from autotune.store import open_database, performance, repository, results
from autotune.store.tables import (
    AcceptanceProfileRecord,
    CostProfileRecord,
    HardwareRecord,
    ModelRecord,
    StudyRecord,
)

WORKLOAD = "0" * 64
PREDICTION = {
    "tokens_per_s": {"value": 500.0, "low": 450.0, "high": 560.0},
    "tpot_ms_p50": {"value": 2.0, "low": 1.8, "high": 2.3},
    "sigma": 0.05,
    "source": "timed",
}


@pytest.fixture
def database(db_url):
    with open_database(db_url) as database:
        yield database


def model(session, fingerprint: str, role: str = "target") -> int:  # noqa: ANN001 - a Session
    return results.upsert_model(
        session, results.ModelEntry(
            fingerprint=fingerprint, name=f"{role}-{fingerprint[:4]}", role=role, source=f"builtin:{role}",
            num_params=10, num_mtp_modules=1 if role == "target" else 0, vocab_size=259, config={}),
    ).id


def hardware(session, fingerprint: str = "f" * 16) -> HardwareRecord:  # noqa: ANN001 - a Session
    record = repository.upsert_hardware(
        session, fingerprint=fingerprint, name=f"cpu-{fingerprint[:4]}", device_type="cpu", device_count=1,
        memory_total_bytes=1 << 30, spec={},
    )
    session.flush()  # upsert_hardware leaves the insert pending: the tests need its id
    return record


def positions(*counts: tuple[int, int]) -> list[dict]:
    return [{"steps": steps, "accepted": accepted} for steps, accepted in counts]


def save_acceptance(session, target: int, proposer: str, workload_fingerprint: str = WORKLOAD,  # noqa: ANN001
                    **overrides) -> AcceptanceProfileRecord:
    values = dict(draft_model_id=None, workload_name="w", max_depth=2, positions=positions((100, 80), (80, 50)),
                  sources=[1])
    key = performance.AcceptanceKey(target, proposer, workload_fingerprint)
    return performance.save_acceptance(session, key, **{**values, **overrides})


def save_costs(session, hardware_id: int, target: int, key: str = "k" * 64, engine: str = "embedded",  # noqa: ANN001
               **overrides) -> CostProfileRecord:
    values = dict(source="timed", points=[{"concurrency": 1, "tokens": 1, "ms": 2.0}], settings={"rounds": 3},
                  duration_s=4.5)
    profile_key = performance.CostProfileKey(hardware_id, engine, target, key)
    return performance.save_cost_profile(session, profile_key, **{**values, **overrides})


# -- acceptance ---------------------------------------------------------------------------------


def test_saving_acceptance_again_replaces_the_pooled_counts(database) -> None:
    with database.session() as session:
        target, draft = model(session, "a" * 64), model(session, "d" * 64, "draft")
        first = save_acceptance(session, target, f"draft:{'d' * 64}", draft_model_id=draft)
        first_id, first_updated = first.id, first.updated_at
    with database.session() as session:
        # The caller pooled a second measurement in: its totals replace the row's, same row.
        again = save_acceptance(
            session, target, f"draft:{'d' * 64}", draft_model_id=draft, max_depth=3, workload_name="w2",
            positions=positions((200, 170), (170, 110), (110, 40)), sources=[1, 2],
        )
        assert again.id == first_id
    with database.session() as session:
        found = performance.find_acceptance(session, performance.AcceptanceKey(target, f"draft:{'d' * 64}", WORKLOAD))
        assert found is not None and found.id == first_id
        assert (found.max_depth, found.workload_name, found.sources) == (3, "w2", [1, 2])
        assert found.positions == positions((200, 170), (170, 110), (110, 40))
        assert found.draft_model_id == draft
        assert _utc(found.updated_at) >= _utc(first_updated)
        assert len(performance.acceptance_profiles(session)) == 1
        # Another proposer or workload is another profile; an unknown one is None.
        assert performance.find_acceptance(session, performance.AcceptanceKey(target, "mtp", WORKLOAD)) is None
        assert save_acceptance(session, target, "mtp").id != first_id
        assert save_acceptance(session, target, "mtp", workload_fingerprint="1" * 64).id != first_id
    with database.session() as session:
        assert len(performance.acceptance_profiles(session)) == 3


def test_acceptance_needs_one_entry_per_draft_position(database) -> None:
    with database.session() as session:
        target = model(session, "a" * 64)
        with pytest.raises(ValueError, match="one entry per draft position"):
            save_acceptance(session, target, "mtp", max_depth=3)


def test_acceptance_profiles_list_most_recently_updated_first(database) -> None:
    with database.session() as session:
        target, other = model(session, "a" * 64), model(session, "b" * 64)
        mtp = save_acceptance(session, target, "mtp").id
        ngram = save_acceptance(session, target, "ngram").id
        elsewhere = save_acceptance(session, target, "mtp", workload_fingerprint="1" * 64).id
        foreign = save_acceptance(session, other, "mtp").id
    with database.session() as session:
        assert [r.id for r in performance.acceptance_profiles(session)] == [foreign, elsewhere, ngram, mtp]
        save_acceptance(session, target, "mtp", sources=[1, 7])  # re-saved: now the most recent
    with database.session() as session:
        assert [r.id for r in performance.acceptance_profiles(session)] == [mtp, foreign, elsewhere, ngram]
        assert [r.id for r in performance.acceptance_profiles(session, target_model_id=target)] == [
            mtp, elsewhere, ngram,
        ]
        assert [r.id for r in performance.acceptance_profiles(session, workload_fingerprint=WORKLOAD)] == [
            mtp, foreign, ngram,
        ]
        assert [
            r.id for r in performance.acceptance_profiles(session, target_model_id=other, workload_fingerprint="1" * 64)
        ] == []


def test_acceptance_key_is_unique(database) -> None:
    with database.session() as session:
        target = model(session, "a" * 64)
        save_acceptance(session, target, "mtp")
    row = dict(
        target_model_id=target, proposer="mtp", draft_model_id=None, workload_fingerprint=WORKLOAD,
        workload_name="w", max_depth=1, positions=[], sources=[], updated_at=dt.datetime.now(dt.timezone.utc),
    )
    with pytest.raises(IntegrityError, match="uq_autotune_acceptance_profiles_key|UNIQUE constraint"):
        with database.engine.begin() as connection:
            connection.execute(AcceptanceProfileRecord.__table__.insert().values(**row))
    with database.engine.begin() as connection:  # another workload is fine
        connection.execute(AcceptanceProfileRecord.__table__.insert().values(**{**row, "workload_fingerprint": "1" * 64}))


# -- step costs ---------------------------------------------------------------------------------


def test_saving_costs_again_replaces_them_under_the_same_key(database) -> None:
    with database.session() as session:
        machine, target = hardware(session).id, model(session, "a" * 64)
        first = save_costs(session, machine, target, source="roofline", duration_s=None)
        first_id = first.id
    with database.session() as session:
        again = save_costs(
            session, machine, target, points=[{"concurrency": 4, "tokens": 3, "ms": 5.0}], settings={"rounds": 5},
            duration_s=12.0,
        )
        assert again.id == first_id
        other_key = save_costs(session, machine, target, key="x" * 64).id
        other_engine = save_costs(session, machine, target, engine="trtllm").id
        assert len({first_id, other_key, other_engine}) == 3
    with database.session() as session:
        found = performance.find_cost_profile(
            session, performance.CostProfileKey(machine, "embedded", target, "k" * 64)
        )
        assert found is not None and found.id == first_id
        assert (found.source, found.points, found.settings, found.duration_s) == (
            "timed", [{"concurrency": 4, "tokens": 3, "ms": 5.0}], {"rounds": 5}, 12.0,
        )
        assert performance.find_cost_profile(
            session, performance.CostProfileKey(machine, "embedded", target, "y" * 64)
        ) is None
        with pytest.raises(ValueError, match="unknown cost profile source"):
            save_costs(session, machine, target, source="guessed")


def test_cost_profiles_list_newest_first(database) -> None:
    with database.session() as session:
        machine, other_machine = hardware(session).id, hardware(session, "e" * 16).id
        target, other = model(session, "a" * 64), model(session, "b" * 64)
        first = save_costs(session, machine, target).id
        second = save_costs(session, machine, other).id
        third = save_costs(session, other_machine, target).id
    with database.session() as session:
        assert [r.id for r in performance.cost_profiles(session)] == [third, second, first]
        save_costs(session, machine, target, settings={"rounds": 9})  # replaced: now the newest
    with database.session() as session:
        assert [r.id for r in performance.cost_profiles(session)] == [first, third, second]
        assert [r.id for r in performance.cost_profiles(session, hardware_id=machine)] == [first, second]
        assert [r.id for r in performance.cost_profiles(session, target_model_id=target)] == [first, third]
        assert [r.id for r in performance.cost_profiles(session, hardware_id=other_machine, target_model_id=other)] == []


def test_cost_key_is_unique(database) -> None:
    with database.session() as session:
        machine, target = hardware(session).id, model(session, "a" * 64)
        save_costs(session, machine, target)
    row = dict(
        hardware_id=machine, engine="embedded", target_model_id=target, key="k" * 64, source="timed", points=[],
        settings={}, duration_s=None, created_at=dt.datetime.now(dt.timezone.utc),
    )
    with pytest.raises(IntegrityError, match="uq_autotune_cost_profiles_key|UNIQUE constraint"):
        with database.engine.begin() as connection:
            connection.execute(CostProfileRecord.__table__.insert().values(**row))
    with database.engine.begin() as connection:  # another engine is fine
        connection.execute(CostProfileRecord.__table__.insert().values(**{**row, "engine": "trtllm"}))


# -- cascades -----------------------------------------------------------------------------------


def test_deleting_models_and_hardware_cascades_to_their_profiles(database) -> None:
    with database.session() as session:
        machine = hardware(session)
        target, draft, kept = model(session, "a" * 64), model(session, "d" * 64, "draft"), model(session, "b" * 64)
        study = results.create_study(
            session, results.StudyEntry(
                name="s", optuna_study_name="s", hardware=machine, target=session.get(ModelRecord, target),
                engine="embedded", objective="throughput", search_space={}, slo={}, workload_name="w",
                workload_fingerprint=WORKLOAD),
        )
        study_id, machine_id = study.id, machine.id
        save_acceptance(session, target, "mtp")
        with_draft = save_acceptance(session, kept, f"draft:{'d' * 64}", draft_model_id=draft).id
        save_costs(session, machine_id, target)
        kept_costs = save_costs(session, hardware(session, "e" * 16).id, kept).id
        on_machine = save_costs(session, machine_id, kept).id

    # The study references its target: delete the study, then the model; its profiles go with it.
    with database.session() as session:
        session.execute(delete(StudyRecord).where(StudyRecord.id == study_id))
        session.execute(delete(ModelRecord).where(ModelRecord.id == target))
    with database.session() as session:
        assert [r.id for r in performance.acceptance_profiles(session)] == [with_draft]
        assert {r.id for r in performance.cost_profiles(session)} == {kept_costs, on_machine}

    # A deleted draft leaves its proposer's profile in place (the fingerprint is in ``proposer``).
    with database.session() as session:
        session.execute(delete(ModelRecord).where(ModelRecord.id == draft))
    with database.session() as session:
        (profile,) = performance.acceptance_profiles(session)
        assert (profile.id, profile.draft_model_id, profile.proposer) == (with_draft, None, f"draft:{'d' * 64}")

    # A deleted machine kind takes its step costs along; other machines' stay.
    with database.session() as session:
        session.execute(delete(HardwareRecord).where(HardwareRecord.id == machine_id))
    with database.session() as session:
        assert [r.id for r in performance.cost_profiles(session)] == [kept_costs]
        assert session.scalars(select(AcceptanceProfileRecord.id)).all() == [with_draft]


# -- predictions --------------------------------------------------------------------------------


def test_predictions_round_trip_through_trials(database) -> None:
    measured = {
        "method": "mtp", "depth": 2, "concurrency": 4, "draft": None, "tokens_per_s": 480.0, "tpot_ms_p50": 2.1,
        **{name: None for name in results.FIGURE_COLUMNS if name not in ("tokens_per_s", "tpot_ms_p50")},
        "acceptance_by_position": [0.8, 0.6],
    }
    with database.session() as session:
        machine, target = hardware(session), model(session, "a" * 64)
        study_id = results.create_study(
            session, results.StudyEntry(
                name="s", optuna_study_name="s", hardware=machine, target=session.get(ModelRecord, target),
                engine="embedded", objective="throughput", search_space={}, slo={}, workload_name="w",
                workload_fingerprint=WORKLOAD),
        ).id
        common = dict(method="mtp", depth=2, concurrency=4)
        results.record_trial(session, study_id, results.TrialEntry(
            trial_number=0, state="complete", measurement=measured,
                             prediction=PREDICTION, **common))
        results.record_trial(session, study_id, results.TrialEntry(
            trial_number=1, state="complete", measurement=measured, **common))
        # A prediction is kept even when the trial did not run: a wrong "it fits" is worth seeing.
        results.record_trial(session, study_id, results.TrialEntry(
            trial_number=2, state="infeasible", reason="needs 9 GiB",
                             prediction={"source": "roofline"}, **common))
    with database.session() as session:
        rows = {row.trial_number: row for row in results.study_rows(session, study_id)}
    assert rows[0].prediction == PREDICTION
    assert rows[0].tokens_per_s == 480.0 and rows[0].prediction["tokens_per_s"]["value"] == 500.0
    assert rows[1].prediction is None  # stored as SQL NULL, not JSON null
    assert rows[2].prediction == {"source": "roofline"}
    assert rows[0].to_dict()["prediction"] == PREDICTION
    with database.engine.connect() as connection:
        table = results.MeasurementRecord.__table__
        nulls = connection.execute(select(table.c.trial_number).where(table.c.prediction.is_(None))).scalars().all()
    assert nulls == [1]


def _utc(value: dt.datetime) -> dt.datetime:
    """SQLite returns naive timestamps (stored as UTC)."""
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
