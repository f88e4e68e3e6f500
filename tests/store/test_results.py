"""Tuning results in the database: studies, trial rows with speedups, profiles, listings."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from autotune.analysis.intervals import Estimate
from autotune.errors import ConfigurationError, DatabaseError
from autotune.store import open_database, repository, results


def measurement(method: str, depth: int, concurrency: int, tokens_per_s: float) -> dict:
    """What Measurement.to_dict() holds (the columns, plus fields that go to extra)."""
    return {
        "method": method, "depth": depth, "concurrency": concurrency, "draft": None, "tokens_per_s": tokens_per_s,
        "requests_per_s": 1.0, "ttft_ms_p50": 5.0, "ttft_ms_p90": 6.0, "ttft_ms_p99": 7.0, "tpot_ms_p50": 1.0,
        "tpot_ms_p90": 2.0, "tpot_ms_p99": 3.0, "acceptance_rate": 0.5 if depth else None,
        "acceptance_length": 1.5 if depth else 1.0, "acceptance_by_position": [0.5] * depth,
        "drafted_tokens": 10 * depth, "accepted_tokens": 5 * depth, "peak_memory_bytes": 1000 + depth,
        "wall_time_s": 20 / tokens_per_s, "target_passes": 10, "memory_kind": "cpu_weights_and_caches",
    }


@pytest.fixture
def database(db_url):
    with open_database(db_url) as database:
        yield database


def make_study(database, name: str = "s1") -> int:
    with database.session() as session:
        hardware = repository.upsert_hardware(
            session, fingerprint="f" * 16, name="test cpu", device_type="cpu", device_count=1,
            memory_total_bytes=1 << 30, spec={},
        )
        target = results.upsert_model(
            session, results.ModelEntry(
                fingerprint="a" * 64, name="target", role="target", source="builtin:target", num_params=10,
                num_mtp_modules=1, vocab_size=259, config={"d_model": 8}),
        )
        study = results.create_study(
            session, results.StudyEntry(
                name=name, optuna_study_name=name, hardware=hardware, target=target, engine="embedded",
                objective="throughput", search_space={"methods": ["none"]}, slo={}, workload_name="w",
                workload_fingerprint="0" * 64),
        )
        return study.id


def record(database, study_id, number, method, depth, batch, tps=None, state="complete", reason=None, **kwargs):
    """Store one trial; ``kwargs`` go to record_trial (phase, repetitions, intervals, speedup)."""
    with database.session() as session:
        results.record_trial(
            session, study_id, results.TrialEntry(
                trial_number=number, method=method, depth=depth, concurrency=batch, state=state,
                reason=reason, measurement=measurement(method, depth, batch, tps) if state == "complete" else None,
                extra={"model_loads": 1}, **kwargs),
        )


def rows(database, study_id):
    with database.session() as session:
        return {row.trial_number: row for row in results.study_rows(session, study_id)}


def test_models_are_stored_once_per_fingerprint(database) -> None:
    make_study(database)
    with database.session() as session:
        again = results.upsert_model(
            session, results.ModelEntry(fingerprint="a" * 64, name="renamed", role="draft", source="/x", num_params=1,
            num_mtp_modules=0, vocab_size=1, config={}),
        )
        assert again.name == "target"


def test_a_row_names_its_draft_by_label_and_fingerprint(database) -> None:
    study_id = make_study(database)
    with database.session() as session:
        draft = results.upsert_model(
            session, results.ModelEntry(
                fingerprint="d" * 64, name="small draft", role="draft", source="/models/small", num_params=5,
                num_mtp_modules=0, vocab_size=259, config={}),
        )
        draft_id = draft.id
    record(database, study_id, 0, "none", 0, 1, 100.0)
    record(database, study_id, 1, "draft", 2, 1, 150.0, draft="small", draft_model_id=draft_id)
    baseline, drafted = rows(database, study_id)[0], rows(database, study_id)[1]
    assert (baseline.draft, baseline.draft_fingerprint) == (None, None)
    assert (drafted.draft, drafted.draft_fingerprint) == ("small", "d" * 64)
    assert drafted.config_label == "draft:small@2" and drafted.extra["draft"] == "small"  # extra as stored
    listed = drafted.to_dict()  # ``autotune trials --json``: the label once, no fingerprint
    assert listed["draft"] == "small" and "draft" not in listed["extra"] and "draft_fingerprint" not in listed


def test_speedups_are_stored_as_measured_never_filled_from_a_baseline(database) -> None:
    study_id = make_study(database)
    record(database, study_id, 0, "mtp", 2, 4, tps=300.0)  # screening: one pass, no speedup
    record(database, study_id, 1, "none", 0, 4, tps=200.0)  # a baseline at the same concurrency
    record(database, study_id, 2, "draft", 3, 4, tps=100.0)  # stored after it: still nothing filled in
    record(database, study_id, 3, "ngram", 2, 1, tps=50.0, speedup=1.2)  # a paired speedup, kept as given
    record(database, study_id, 4, "draft", 8, 4, state="infeasible", reason="needs 9 GiB")
    stored = rows(database, study_id)
    assert [stored[n].speedup for n in range(5)] == [None, None, None, 1.2, None]
    assert stored[0].estimate("speedup") is None and stored[3].estimate("speedup").value == 1.2
    assert stored[0].acceptance_by_position == [0.5, 0.5]
    assert stored[0].extra["measurement"]["target_passes"] == 10
    assert (stored[4].state, stored[4].reason, stored[4].tokens_per_s) == ("infeasible", "needs 9 GiB", None)
    assert stored[4].estimate("tokens_per_s") is None  # not measured: no estimate at all


def test_confirmation_rows_carry_repetitions_and_intervals(database) -> None:
    study_id = make_study(database)
    tokens = {"value": 290.0, "low": 280.0, "high": 300.0, "n": 5, "confidence": 0.95}
    speedup = {"value": 1.45, "low": 1.4, "high": 1.5, "n": 5, "confidence": 0.95}
    record(database, study_id, 0, "mtp", 2, 4, tps=300.0)
    record(
        database, study_id, 0, "mtp", 2, 4, tps=290.0, phase="confirmation", repetitions=5, speedup=1.45,
        intervals={"tokens_per_s": tokens, "speedup": speedup},
    )
    with database.session() as session:
        screening, confirmation = results.study_rows(session, study_id)  # screening first, then confirmation
    assert (screening.phase, screening.repetitions, screening.intervals, screening.confirmed) == (
        "screening", 1, {}, False,
    )
    assert screening.estimate("tokens_per_s") == Estimate.single(300.0)
    assert (confirmation.phase, confirmation.repetitions, confirmation.confirmed) == ("confirmation", 5, True)
    assert confirmation.intervals == {"tokens_per_s": tokens, "speedup": speedup}
    assert confirmation.estimate("tokens_per_s") == Estimate(290.0, 280.0, 300.0, 5)
    assert confirmation.estimate("speedup") == Estimate(1.45, 1.4, 1.5, 5)
    # A figure without an interval of its own reads as one run, even on a confirmation row.
    assert confirmation.estimate("tpot_ms_p50") == Estimate.single(1.0)


def test_a_trial_is_stored_once(database) -> None:
    study_id = make_study(database)
    record(database, study_id, 0, "none", 0, 1, tps=10.0)
    with pytest.raises(DatabaseError) as raised:
        record(database, study_id, 0, "none", 0, 1, tps=10.0)
    assert isinstance(raised.value.__cause__, IntegrityError)


def test_a_trial_number_is_unique_within_its_phase(database) -> None:
    study_id = make_study(database)
    record(database, study_id, 3, "mtp", 2, 1, tps=10.0)  # screening
    record(database, study_id, 3, "mtp", 2, 1, tps=11.0, phase="confirmation", repetitions=3)  # same number: fine
    for phase in ("screening", "confirmation"):
        with pytest.raises(DatabaseError) as raised:
            record(database, study_id, 3, "mtp", 2, 1, tps=12.0, phase=phase)
        assert isinstance(raised.value.__cause__, IntegrityError), phase
    other = make_study(database, "s2")
    record(database, other, 3, "mtp", 2, 1, tps=10.0, phase="confirmation")  # another study: fine
    assert [(r.phase, r.tokens_per_s) for r in rows_list(database, study_id)] == [
        ("screening", 10.0), ("confirmation", 11.0),
    ]


def rows_list(database, study_id):
    with database.session() as session:
        return results.study_rows(session, study_id)


def test_states_and_measurements_must_agree(database) -> None:
    study_id = make_study(database)
    with database.session() as session, pytest.raises(ValueError, match="needs its measurement"):
        results.record_trial(session, study_id, results.TrialEntry(
            trial_number=0, method="none", depth=0, concurrency=1, state="complete"))
    with database.session() as session, pytest.raises(ValueError, match="unknown trial state"):
        results.record_trial(session, study_id, results.TrialEntry(
            trial_number=0, method="none", depth=0, concurrency=1, state="lost"))
    with database.session() as session, pytest.raises(ValueError, match="unknown phase 'bogus'"):
        results.record_trial(
            session, study_id, results.TrialEntry(
                trial_number=0, method="none", depth=0, concurrency=1, state="failed", reason="x",
                phase="bogus"),
        )
    assert rows_list(database, study_id) == []  # nothing stored by the refused calls


def test_profile_keeps_repetitions_and_intervals(database) -> None:
    study_id = make_study(database)
    interval = {"value": 20.0, "low": 19.0, "high": 21.0, "n": 4, "confidence": 0.95}
    for repetitions, intervals in ((4, {"tokens_per_s": interval}), (1, None)):  # the second replaces the first
        with database.session() as session:
            results.save_profile(
                session, session.get(results.StudyRecord, study_id), results.ProfileEntry(
                    measurement_id=None, method="none",
                    draft_model_id=None, depth=0, concurrency=1, tokens_per_s=20.0, tpot_ms_p50=1.0, speedup=None,
                    per_concurrency=[], details={}, repetitions=repetitions, intervals=intervals),
            )
        with database.session() as session:
            profile = results.study_profile(session, study_id)
            assert (profile.repetitions, profile.intervals) == (repetitions, intervals)


def test_profile_is_replaced_not_duplicated(database) -> None:
    study_id = make_study(database)
    record(database, study_id, 0, "none", 0, 1, tps=10.0)
    for tokens_per_s, label in ((10.0, "none c1"), (20.0, "mtp@1 c1")):
        with database.session() as session:
            study = session.get(results.StudyRecord, study_id)
            results.save_profile(
                session, study, results.ProfileEntry(
                    measurement_id=None, method="none", draft_model_id=None, depth=0, concurrency=1,
                    tokens_per_s=tokens_per_s, tpot_ms_p50=1.0, speedup=1.0, per_concurrency=[{"concurrency": 1}],
                    details={"label": label}),
            )
    with database.session() as session:
        assert results.study_profile(session, study_id).tokens_per_s == 20.0
        assert session.query(results.DeploymentProfileRecord).count() == 1


def test_listings(database) -> None:
    first = make_study(database, "first")
    record(database, first, 0, "none", 0, 1, tps=10.0)
    record(database, first, 1, "mtp", 1, 1, state="failed", reason="timeout")
    make_study(database, "second")
    with database.session() as session:
        results.set_study_status(session, first, "complete")
        summaries = results.list_studies(session)
        assert [s.name for s in summaries] == ["second", "first"]
        done = summaries[1]
        assert (done.status, done.trials_complete, done.trials_failed, done.trials_infeasible) == ("complete", 1, 1, 0)
        assert done.finished_at is not None and done.to_dict()["target"] == "target"
        assert [row.label for row in results.study_trials(session, "first")] == ["none c1", "mtp@1 c1"]
        with pytest.raises(ConfigurationError, match="no study named 'third'.*known studies: second, first"):
            results.study_trials(session, "third")
        with pytest.raises(ValueError):
            results.set_study_status(session, first, "paused")
