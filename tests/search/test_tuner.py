"""Tuning studies end to end: real Optuna studies on SQLite files, the real embedded engine in a
worker process, tiny random models."""

from __future__ import annotations

from dataclasses import replace

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy import func, select

from autotune.errors import ConfigurationError
from autotune.models.fit import MEMORY_MARGIN
from autotune.search import Slo, list_studies, study_trials, tune
from autotune.search.budget import finished_count
from autotune.search.setup import set_up_study
from autotune.search.samplers import SAMPLERS
from autotune.search.study import open_study, optuna_storage
from autotune.store import open_database, results
from autotune.search.asking import MAX_REPEATS
from autotune.store.tables import HardwareRecord, MeasurementRecord, ProbeRecord, StudyRecord

OPTUNA_STATE = {"complete": TrialState.COMPLETE, "infeasible": TrialState.PRUNED, "failed": TrialState.FAIL}



def screening(rows: list) -> list:
    """The screening rows (one per measured Optuna trial) of a study's stored rows."""
    return [row for row in rows if row.phase == "screening"]

def optuna_trials(options) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=options.study_name, storage=options.db_url).trials


def test_a_study_runs_stores_every_trial_and_continues(options) -> None:
    updates = []
    result = tune(replace(options, n_trials=4), progress=updates.append)

    assert (result.status, result.trials_this_run, result.analysis.counts.total) == ("complete", 4, 4)
    stored = study_trials(options.db_url, "tiny")
    rows = screening(stored)
    assert len(rows) == 4
    assert [row.label for row in rows[:2]] == ["none c1", "none c2"]  # baselines first
    trials = optuna_trials(options)
    for row in rows:
        trial = trials[row.trial_number]
        assert trial.state == OPTUNA_STATE[row.state]
        assert trial.user_attrs["config"] == row.label
    assert len(trials) == 4 + result.analysis.counts.repeated
    assert all(row.speedup is None for row in rows)  # one pass: no paired speedup to report
    confirmed = [row for row in stored if row.phase == "confirmation"]
    assert confirmed and all(row.speedup is not None and row.repetitions >= 3 for row in confirmed)
    assert {row.concurrency for row in confirmed if row.method == "none"} == {1, 2}  # a baseline in every round set
    assert result.profile.row.confirmed and result.profile.row.estimate("tokens_per_s").has_interval
    assert result.analysis.model_loads >= 1 and result.worker_starts >= 1
    assert [u.trials_done for u in updates if u.finished] == [1, 2, 3, 4]
    assert updates[0].current.startswith("timing step costs") and updates[0].finished is None
    assert updates[1].current == "none c1" and updates[1].finished is None

    with open_database(options.db_url) as database, database.session() as session:
        study = results.find_study(session, "tiny")
        profile = results.study_profile(session, study.id)
        assert profile.tokens_per_s == result.profile.row.tokens_per_s
        assert profile.details["label"] == result.profile.row.label
        assert [entry["concurrency"] for entry in profile.per_concurrency] == [1, 2]
    summary = list_studies(options.db_url)[0]
    assert (summary.name, summary.status, summary.trials_complete + summary.trials_failed) == ("tiny", "complete", 4)

    more = tune(replace(options, n_trials=6))  # the same name continues the study up to 6 trials
    assert (more.trials_this_run, more.analysis.counts.total) == (2, 6)
    assert tune(replace(options, n_trials=6)).trials_this_run == 0
    assert finished_count(optuna_trials(options)) == 6


def test_a_study_name_used_with_other_options_is_refused_and_nothing_written(options) -> None:
    setup = set_up_study(options)
    with open_database(options.db_url) as database:
        storage = optuna_storage(database, options)
        open_study(database, storage, setup, SAMPLERS["tpe"].optuna_sampler(0))
        storage.engine.dispose()

    def counts() -> tuple[int, ...]:
        with open_database(options.db_url) as database, database.session() as session:
            tables = (StudyRecord, MeasurementRecord, HardwareRecord, ProbeRecord)
            return tuple(session.scalar(select(func.count()).select_from(t)) for t in tables) + (
                len(optuna_trials(options)),
            )

    before = counts()
    for changes, what in (
        ({"max_depth": 3}, "different search space"),
        ({"objective": "pareto"}, "different objective"),
        ({"slo": Slo(tpot_ms=5.0)}, "different slo"),
        ({"hardware": replace(options.hardware, fingerprint="beef000000000000")}, "different hardware"),
    ):
        with pytest.raises(ConfigurationError, match=f"study 'tiny' exists with a {what}"):
            tune(replace(options, **changes))
    assert counts() == before


def test_an_optuna_study_autotune_did_not_create_is_refused(options) -> None:
    with open_database(options.db_url):
        pass
    optuna.create_study(study_name="tiny", storage=options.db_url)
    with pytest.raises(ConfigurationError, match="not created by this autotune search"):
        tune(options)


@pytest.mark.slow  # a whole study; the first test keeps one end to end in the quick tier
def test_grid_runs_every_point_once_and_records_what_does_not_fit(options, cpu_profile) -> None:
    memory = set_up_study(options).memory
    fitting = max(memory.required_bytes("none", 0, 2), memory.required_bytes("draft", 1, 1, "draft"))
    assert memory.required_bytes("draft", 1, 2, "draft") > fitting
    small = cpu_profile(ram_bytes=int(fitting / (1 - MEMORY_MARGIN)) + 1)
    grid = replace(options, methods=("draft",), max_depth=1, sampler="grid", n_trials=None, hardware=small)

    result = tune(grid)

    rows = {row.label: row for row in result.rows}
    assert sorted(rows) == ["draft:draft@1 c1", "draft:draft@1 c2", "none c1", "none c2"]
    infeasible = rows["draft:draft@1 c2"]
    assert infeasible.state == "infeasible" and "GiB" in infeasible.reason
    assert infeasible.extra["model_loads"] == 0 and infeasible.tokens_per_s is None
    assert optuna_trials(options)[infeasible.trial_number].state == TrialState.PRUNED
    assert result.status == "complete" and result.n_trials == 4


@pytest.mark.slow  # a whole study; the first test keeps one end to end in the quick tier
@pytest.mark.usefixtures("quiet_machine")
def test_repeats_are_answered_without_measuring_and_a_spent_space_stops(options) -> None:
    # Two points only: the baseline and ngram@1. Once both are measured the sampler can only
    # repeat them; the repeats are answered from the first results, then the study stops.
    result = tune(replace(options, methods=("ngram",), max_depth=1, concurrencies=(1,), n_trials=4, sampler="random"))
    assert [row.label for row in screening(result.rows)] == ["none c1", "ngram@1 c1"]
    assert result.status == "complete" and result.worker_starts == 4  # step timings, two trials, one confirmation
    counts = result.to_dict()["counts"]
    assert (counts["total"], counts["repeated"]) == (2, MAX_REPEATS)
    trials = optuna_trials(options)
    repeats = [trial for trial in trials if "repeat_of" in trial.user_attrs]
    assert len(repeats) == MAX_REPEATS
    for repeat in repeats:
        original = trials[repeat.user_attrs["repeat_of"]]
        assert (repeat.params, repeat.values, repeat.state) == (original.params, original.values, original.state)


@pytest.mark.slow  # a whole study; the first test keeps one end to end in the quick tier
def test_a_space_of_the_baseline_alone_stops_after_the_baselines(options) -> None:
    result = tune(replace(options, methods=("none",), n_trials=10))
    assert [row.label for row in screening(result.rows)] == ["none c1", "none c2"]
    assert result.status == "complete"


@pytest.mark.slow  # a whole study; the first test keeps one end to end in the quick tier
def test_engine_failures_are_stored_and_count_against_the_budget(options) -> None:
    result = tune(replace(options, trial_timeout_s=0.01))  # nothing can answer that fast
    assert {row.state for row in result.rows} == {"failed"}
    assert all("no answer within 0.01 s" in row.reason and row.extra["failure"] == "timeout" for row in result.rows)
    assert len(result.rows) == 6 and result.status == "complete"
    assert result.profile is None and result.analysis.summary[0] == "No trial has completed yet."
    no_baseline = [line for line in result.analysis.summary if line.startswith("No speedup")]
    assert no_baseline == [f"No speedup at concurrency {b}: its baseline (method none) failed 2 times in screening "
                           "(last: no answer within 0.01 s; the worker was killed)." for b in (1, 2)]
    assert [row.extra.get("retry_of") is not None for row in result.rows[:4]] == [False, False, True, True]
    assert {trial.state for trial in optuna_trials(options)} == {TrialState.FAIL}


@pytest.mark.slow  # a whole study; the first test keeps one end to end in the quick tier
def test_an_unmet_slo_is_reported_with_the_closest_configuration(options) -> None:
    result = tune(replace(options, methods=("ngram",), max_depth=1, concurrencies=(1,), n_trials=2,
                          slo=Slo(tpot_ms=1e-6, percentile=50)))
    assert result.slo_met is False
    assert result.analysis.summary[0].startswith("No configuration meets tpot_ms_p50 <= 1e-06; the closest is")
    assert result.to_dict()["profile"]["slo_met"] is False
    constraints = [trial.constraints for trial in optuna_trials(options)]
    assert all(c["tpot_ms_p50"] > 0 for c in constraints)
    with open_database(options.db_url) as database, database.session() as session:
        profile = results.study_profile(session, results.find_study(session, "tiny").id)
        assert profile.details["slo_met"] is False


@pytest.mark.slow  # a whole study; the first test keeps one end to end in the quick tier
def test_pareto_objective_gives_a_front(options) -> None:
    result = tune(replace(options, objective="pareto", methods=("ngram",), max_depth=1, concurrencies=(1,),
                          n_trials=2))
    trials = optuna_trials(options)
    assert all(len(trial.values) == 2 for trial in trials if trial.state == TrialState.COMPLETE)
    assert result.analysis.pareto_front and result.to_dict()["pareto_front"]


@pytest.mark.slow  # a whole study; the first test keeps one end to end in the quick tier
def test_ctrl_c_fails_the_running_trial_and_the_next_run_retries_it(options) -> None:
    def interrupt_third(update) -> None:
        if update.finished is None and update.trials_done == 2:
            raise KeyboardInterrupt

    options = replace(options, n_trials=4, confirm=False)  # the retry is screening's: no finalists to confirm
    with pytest.raises(KeyboardInterrupt):
        tune(options, progress=interrupt_third)

    trials = optuna_trials(options)
    interrupted = next(trial for trial in trials if trial.state != TrialState.WAITING
                       and trial.user_attrs.get("autotune_state") == "interrupted")
    assert interrupted.state == TrialState.FAIL
    retry = next(trial for trial in trials if trial.system_attrs.get("failed_trial") == interrupted.number)
    assert retry.state == TrialState.WAITING and retry.params == interrupted.params
    assert len(screening(study_trials(options.db_url, "tiny"))) == 2
    assert list_studies(options.db_url)[0].status == "interrupted"

    result = tune(options)
    assert (result.status, result.analysis.counts.total) == ("complete", 4)
    retried = next(row for row in result.rows if row.trial_number == retry.number)
    assert retried.label == interrupted.user_attrs["config"]
