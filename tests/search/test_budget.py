"""The study-wide budget's bookkeeping under partial writes (autotune/search/budget.py)."""

from __future__ import annotations

import warnings

import optuna
import pytest
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from autotune.search.budget import STATE_ATTR, claim, counted_trials, fail_stale_trials, retired_numbers
from autotune.search.ledger import Ledger


@pytest.fixture
def ledger(tmp_path) -> Ledger:  # noqa: ANN001
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}", heartbeat_interval=60,
                             heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1))
    return Ledger.of(optuna.create_study(storage=storage, study_name="s"), storage)


@pytest.fixture
def study(ledger: Ledger) -> optuna.Study:
    return ledger.study


@pytest.mark.parametrize("state", [None, "abandoned", "interrupted"])
def test_a_failure_whose_retry_was_cut_off_is_queued_again_once(ledger: Ledger, study: optuna.Study,
                                                                state: str | None) -> None:
    """A connection lost between the fail and the retry's add_trial left a failed trial that
    counted, with no row and nothing to measure it again (the PostgreSQL storm test)."""
    trial = study.ask({"x": optuna.distributions.IntDistribution(1, 8)})
    if state is not None:
        trial.set_user_attr(STATE_ATTR, state)
    study.tell(trial, state=TrialState.FAIL)  # ... and the retry's add_trial never happened
    fail_stale_trials(ledger)
    fail_stale_trials(ledger)  # idempotent: the retry retires the failed trial
    trials = study.get_trials(deepcopy=False)
    waiting = [t for t in trials if t.state == TrialState.WAITING]
    assert len(waiting) == 1 and waiting[0].params == trial.params
    assert retired_numbers(trials) == {trial.number}
    assert counted_trials(trials) == waiting


@pytest.mark.parametrize("state", ["failed", "infeasible"])
def test_a_failure_with_our_result_is_final(ledger: Ledger, study: optuna.Study, state: str) -> None:
    trial = study.ask({"x": optuna.distributions.IntDistribution(1, 8)})
    trial.set_user_attr(STATE_ATTR, state)
    study.tell(trial, state=TrialState.FAIL)
    fail_stale_trials(ledger)
    assert [t.state for t in study.get_trials(deepcopy=False)] == [TrialState.FAIL]


def test_the_retry_bound_holds(ledger: Ledger, study: optuna.Study) -> None:
    study.tell(study.ask({"x": optuna.distributions.IntDistribution(1, 8)}), state=TrialState.FAIL)
    fail_stale_trials(ledger)
    retry = study.ask()  # the queued retry (max_retry = 1) fails without a result too
    study.tell(retry, state=TrialState.FAIL)
    fail_stale_trials(ledger)
    assert [t.state for t in study.get_trials(deepcopy=False)] == [TrialState.FAIL, TrialState.FAIL]


def test_a_trial_asked_and_never_claimed_is_failed_and_queued_again_at_once(ledger: Ledger, study: optuna.Study) -> None:
    """Its asker was killed between Optuna's ask and our claim, which run under the study lock the
    caller of fail_stale_trials holds: no heartbeat, so Optuna alone would never find it stale (a
    resumed grid study ended one trial short in CI)."""
    trial = study.ask({"x": optuna.distributions.IntDistribution(1, 8)})
    fail_stale_trials(ledger)
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.WAITING] and trials[1].params == trial.params


def test_a_claimed_trial_whose_process_lives_keeps_running(ledger: Ledger, study: optuna.Study) -> None:
    claim(ledger, study.ask({"x": optuna.distributions.IntDistribution(1, 8)}))  # claimed by this process
    fail_stale_trials(ledger)
    assert [t.state for t in study.get_trials(deepcopy=False)] == [TrialState.RUNNING]
