"""The study-wide trial budget, shared by every worker of a study.

``n_trials`` counts the study's *measured* trials, whoever runs them. Under the study's database
lock a worker counts the trials that take part (every state, waiting and running included), except

* failed trials re-queued by a retry (their retry counts instead), and
* repeats: a sampler proposing a configuration that already finished gets the earlier result back
  at once (Optuna is told the same values) and the repeat costs neither time nor budget,

and asks for a new trial only while that count is below the budget, so concurrent workers never
overshoot. Waiting trials (retries of trials whose worker died or was interrupted) run first.

Before sampling, the worker enqueues the next *planned* candidate nobody has taken yet: the
baselines (method none at every batch size), and for the grid sampler every point of the space.
A study that can only run planned candidates (the grid, or a space of the baseline alone) stops
when they are all taken. The model-guided search (:mod:`autotune.search.guide`) enqueues its own
next point instead of sampling, and stops the study when it has none. When the sampler keeps repeating itself (the tuner allows a few repeats
in a row: it has converged), the worker enqueues a random configuration nobody has tried; once
every configuration is taken, the study stops, however much budget is left.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.search.space import Candidate, SearchSpace

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
REPEAT_ATTR = "repeat_of"


def retired_numbers(trials: Iterable[FrozenTrial]) -> set[int]:
    """Numbers of failed trials that a later trial retries (RetryHeartbeatStaleTrialCallback's history)."""
    return {number for trial in trials for number in trial.system_attrs.get("retry_history", ())}


def counted_trials(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The trials that take part in the budget: neither retried nor repeats."""
    retired = retired_numbers(trials)
    return [trial for trial in trials if trial.number not in retired and REPEAT_ATTR not in trial.user_attrs]


def finished_count(trials: list[FrozenTrial]) -> int:
    """Finished trials that count against the budget."""
    return sum(1 for trial in counted_trials(trials) if trial.state in FINISHED)


def repeat_count(trials: list[FrozenTrial]) -> int:
    return sum(1 for trial in trials if REPEAT_ATTR in trial.user_attrs)


def all_finished(trials: list[FrozenTrial]) -> bool:
    """True when no trial is waiting or running."""
    return all(trial.state in FINISHED for trial in counted_trials(trials))


def _params(trial: FrozenTrial) -> dict[str, Any]:
    return {**trial.system_attrs.get("fixed_params", {}), **trial.params}


def ask_within_budget(
    study: optuna.Study,
    n_trials: int,
    planned: list[Candidate],
    planned_only: bool,
    explore: random.Random | None = None,
    space: SearchSpace | None = None,
    propose: Callable[[list[dict[str, Any]]], Candidate | None] | None = None,
) -> optuna.Trial | None:
    """A new trial, or None when the budget is spent or nothing is left to try (see the module
    doc). With ``explore`` (and the ``space``), a random untried point of the space is enqueued
    when no planned one is left. With ``propose`` (the model-guided search), its answer to the
    parameters taken so far is enqueued when no planned one is left, and None ends the study. The
    caller holds the study lock."""
    trials = study.get_trials(deepcopy=False)
    if not any(trial.state == TrialState.WAITING for trial in trials):
        counted = counted_trials(trials)
        if len(counted) >= n_trials:
            return None
        taken = [_params(trial) for trial in counted]
        following = next((c for c in planned if SearchSpace.params(c) not in taken), None)
        if following is None and propose is not None:
            following = propose(taken)
            if following is None:
                return None
        if following is None and explore is not None:
            untried = [c for c in space.candidates() if SearchSpace.params(c) not in taken]
            following = explore.choice(untried) if untried else None
            if following is None:
                return None
        if following is not None:
            study.enqueue_trial(SearchSpace.params(following), user_attrs=SearchSpace.user_attrs(following))
        elif planned_only:
            return None
    with warnings.catch_warnings():
        # Optuna warns that heartbeats are meant for Study.optimize; we record them ourselves.
        warnings.filterwarnings("ignore", message="Heartbeat of storage")
        return study.ask()


def fail_stale_trials(study: optuna.Study) -> None:
    """Fail (and re-queue) trials whose worker stopped sending heartbeats, as Study.optimize does."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
