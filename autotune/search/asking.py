"""Which trial a worker measures next, and the answers Optuna gets for trials that are not measured.

Input: the :class:`~autotune.search.state.Study`. Output: the next Optuna trial with its candidate,
or none when nothing is left (:func:`ask`); the outcome of a trial told to Optuna (:func:`tell`).

Per trial, under the study lock: fail stale trials, ask within the study-wide budget (see
:mod:`autotune.search.budget`) and draw the candidate. A candidate that already finished in this
study is a repeat: Optuna gets the latest result back at once and the worker asks again (TPE
repeats itself a lot once it converges on a small discrete space). After ``MAX_REPEATS`` repeats
in a row, a random untried configuration is enqueued instead. The model-guided search proposes
its next point from :meth:`Study.guidance`, derived once per ask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.engines.base import EngineConfig
from autotune.search import budget, guide
from autotune.search.budget import FAILURE_ATTR, RETRY_OF_ATTR, STATE_ATTR
from autotune.search.space import BASELINE_METHOD, Candidate, SearchSpace
from autotune.search.state import Study

REASON_ATTR = "autotune_reason"
LABEL_ATTR = "config"
OPTUNA_STATE = {"complete": TrialState.COMPLETE, "infeasible": TrialState.PRUNED, "failed": TrialState.FAIL}
MAX_REPEATS = 5  # repeats in a row before a random untried configuration is enqueued


@dataclass(frozen=True)
class TrialOutcome:
    """How a trial ended: ``state`` complete | failed | infeasible; the measurement when complete."""

    state: str
    reason: str | None = None
    measurement: dict[str, Any] | None = None
    values: list[float] | None = None
    constraints: dict[str, float] | None = None
    failure_kind: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # stored in the row's extra (disturbed passes)


def ask(study: Study) -> tuple[optuna.Trial | None, Candidate | None]:
    """The next trial to measure and its candidate, or (None, None) when nothing is left (module doc)."""
    ledger, setup = study.ledger, study.setup
    propose = (lambda taken: _guided(study, taken)) if setup.sampler.guided else None
    with study.lock():
        budget.fail_stale_trials(ledger)
        for attempt in range(MAX_REPEATS + 1):
            explore = study.explore if attempt == MAX_REPEATS else None
            trial = budget.ask_within_budget(ledger.study, study.asking, explore, propose)
            if trial is None:
                return None, None
            # A trial without any heartbeat is never found stale: beat once before anything can fail.
            ledger.storage.record_heartbeat(ledger.trial_id(trial.number))
            budget.claim(ledger, trial)
            candidate = setup.space.suggest(trial)  # inside the lock: other workers see the pick
            trial.set_user_attr(LABEL_ATTR, candidate.label)
            earlier = None if RETRY_OF_ATTR in trial.user_attrs else _finished_before(study, trial.number, candidate)
            if earlier is None:
                return trial, candidate
            _replay(study, trial, earlier)
    raise AssertionError("an explored candidate is untried, so it cannot repeat")  # pragma: no cover


def _guided(study: Study, taken: list[dict[str, Any]]) -> Candidate | None:
    """The model-guided next point (:mod:`autotune.search.guide`); None ends the study."""
    study.pick = guide.next_pick(study.setup.space, study.guidance(study.rows()), taken, study.feasible,
                                 study.setup.objective.slo, study.last, explore_beyond=study.options.explore_beyond)
    if study.pick is None:
        return None
    # A worker that keeps several engines spares those of points still open and of the leaders,
    # and the baseline's, which every concurrency's confirmation runs.
    study.worker.keep(dict.fromkeys([EngineConfig(BASELINE_METHOD)]
                                    + [study.engine_config(c) for c in study.pick.wanted]))
    return study.pick.candidate


def _finished_before(study: Study, number: int, candidate: Candidate) -> FrozenTrial | None:
    """The latest earlier trial of the same candidate that finished with a result of ours (after
    a retry, the retry's result stands). Ours and Optuna's state must agree: a trial whose tell
    was cut off after our state was set (a lost connection) was failed as stale by Optuna, with no
    values, and has no result to replay."""
    params = SearchSpace.params(candidate)
    earlier = [trial for trial in study.ledger.study.get_trials(deepcopy=False, states=budget.FINISHED)
               if trial.number != number and OPTUNA_STATE.get(trial.user_attrs.get(STATE_ATTR)) == trial.state
               and trial.params == params]
    return max(earlier, key=lambda trial: trial.number, default=None)


def _replay(study: Study, trial: optuna.Trial, earlier: FrozenTrial) -> None:
    """Answer a repeat with the earlier trial's result; it is not measured nor stored by us."""
    trial.set_user_attr(budget.REPEAT_ATTR, earlier.number)
    state = earlier.user_attrs[STATE_ATTR]
    outcome = TrialOutcome(
        state, earlier.user_attrs.get(REASON_ATTR), None, list(earlier.values) if earlier.values else None,
        dict(earlier.constraints), earlier.user_attrs.get(FAILURE_ATTR),
    )
    tell(study, trial, outcome)


def tell(study: Study, trial: optuna.Trial, outcome: TrialOutcome) -> None:
    """Give Optuna the trial's outcome: our state, reason and failure kind as user attributes, the
    constraints, and the objective values of a complete one."""
    trial.set_user_attr(STATE_ATTR, outcome.state)
    if outcome.reason:
        trial.set_user_attr(REASON_ATTR, outcome.reason)
    if outcome.failure_kind:
        trial.set_user_attr(FAILURE_ATTR, outcome.failure_kind)
    for name, value in (outcome.constraints or {}).items():
        trial.set_constraint(name, value)
    state = OPTUNA_STATE[outcome.state]
    study.ledger.study.tell(trial, outcome.values if state == TrialState.COMPLETE else None, state=state)
