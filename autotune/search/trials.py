"""The screening phase: Optuna trials, one screened pass each, until the budget, the planned points
or the time run out.

Input: the :class:`~autotune.search.state.Study` (its step costs timed). Output: a measurement row
per trial in our database, the outcome told to Optuna, the deployment profile recomputed after every
trial (it can be read while the study runs), and whether nothing was left to ask for (``spent``).

Each trial comes from :func:`autotune.search.asking.ask`; then, outside the study lock, with a
heartbeat running:

1. a candidate that does not fit (memory, sequence length) is never launched: it is stored as
   ``infeasible`` with the reason and told to Optuna as PRUNED, so samplers learn to avoid the
   region without treating it as a crash;
2. otherwise the worker screens it (:func:`autotune.search.screening.screen`: a pass measured
   while other processes disturbed it is measured again, and a row that stayed disturbed never
   guides the model-guided search); an engine failure (timeout, crash, out of memory,
   unsupported) is stored as ``failed`` with its reason and told as FAIL.

**Retries** (``--retry-failed N``, default 1). A configuration whose measurement failed in a way that
can pass (the worker crashed, hung past the trial timeout or ran out of memory) is measured again,
at most N more times, each time as a new trial:

* a baseline (method none) as soon as no other baseline is waiting to be measured first: every
  speedup at its concurrency is measured against it;
* any other configuration only once nothing untried is left (the grid done, the model-guided
  search out of proposals, a sampler that only repeats itself): an untried point tells more than a
  second look at one that failed, and a failure that repeats costs its timeout again. Until then a
  sampler proposing it again gets the failure back, like any finished configuration.

Infeasible configurations and failures that say something about the configuration itself
(unsupported, engine error, an unusable measurement) are never retried: they would fail again. A
retry is a measured trial and counts against the budget; its row's ``extra`` holds ``attempt`` (2
for the first retry) and ``retry_of`` (the failed trial it measures again), and the progress shows
both. N = 0 keeps every failure final.

Our row is written before Optuna is told, so a kill -9 never loses a finished trial (at worst a
trial whose row exists is retried under a new number). Ctrl-C kills the worker, fails the running
trial with ``autotune_state = interrupted``, re-queues it for the next run, and re-raises
KeyboardInterrupt.
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from autotune.engines.protocol import Pass
from autotune.engines.worker import WorkerFailure
from autotune.search import profile, screening
from autotune.search.asking import TrialOutcome, ask, tell
from autotune.search.budget import ATTEMPT_ATTR, RETRY_OF_ATTR, STATE_ATTR
from autotune.search.space import Candidate
from autotune.search.state import Study
from autotune.store import results


def screen_trials(study: Study) -> bool:
    """Measure trials while the deadline allows; True when the budget (or the planned points) ran
    out rather than the time. Ctrl-C or an error abandons the running trial (:func:`_abandon`)."""
    trial: optuna.Trial | None = None
    try:
        while study.deadline.in_time():
            trial, candidate = ask(study)
            if trial is None:
                return True
            _run_trial(study, trial, candidate)
            trial = None
    except BaseException as exc:
        _abandon(study, trial, interrupted=isinstance(exc, KeyboardInterrupt))
        raise
    return False


def _run_trial(study: Study, trial: optuna.Trial, candidate: Candidate) -> None:
    retry = {key: trial.user_attrs[key] for key in (ATTEMPT_ATTR, RETRY_OF_ATTR) if key in trial.user_attrs}
    label = candidate.label + (f" (attempt {retry[ATTEMPT_ATTR]}, retrying trial {retry[RETRY_OF_ATTR]})"
                               if retry else "")
    with study.ledger.heartbeat(trial.number):
        study.report(label, None)
        prediction = _prediction(study, candidate)
        loads_before = study.worker.loads
        outcome = _outcome(study, candidate, screening.surprise_floor(prediction))
        extra = {"model_loads": study.worker.loads - loads_before,
                 "optuna_trial_id": study.ledger.trial_id(trial.number), **retry, **outcome.extra}
        if outcome.failure_kind is not None:
            extra["failure"] = outcome.failure_kind
        draft_model_id = study.draft_ids.get(candidate.draft)
        with study.database.session() as session:
            record = results.record_trial(session, study.study_id, results.TrialEntry(
                trial_number=trial.number, method=candidate.method, depth=candidate.depth,
                concurrency=candidate.concurrency, state=outcome.state, draft=candidate.draft,
                draft_model_id=draft_model_id, reason=outcome.reason, measurement=outcome.measurement,
                extra=extra, prediction=prediction,
            ))
            row = results.trial_row(record)
        study.modeling.record_acceptance(row, draft_model_id)
        tell(study, trial, outcome)
    study.trials_run += 1
    study.last = candidate
    analysis = profile.store_profile(study)
    figure = (outcome.measurement or {}).get("tokens_per_s")
    predicted = (prediction or {}).get("tokens_per_s", {}).get("value")
    study.report(label, outcome.state, outcome.reason, analysis.best_label, figure, predicted)


def _prediction(study: Study, candidate: Candidate) -> dict[str, Any] | None:
    """What the model predicts for ``candidate`` before it is measured (stored next to it): the
    guide's own prediction where it proposed the candidate, else the model of the rows as they stand."""
    pick = study.pick
    if pick is not None and pick.candidate == candidate and pick.prediction is not None:
        return pick.prediction.to_dict()
    model = study.guidance(study.rows()).model
    prediction = None if model is None else model.predict(candidate.method, candidate.draft, candidate.depth,
                                                          candidate.concurrency)
    return None if prediction is None else prediction.to_dict()


def _outcome(study: Study, candidate: Candidate, floor: float | None) -> TrialOutcome:
    """Screen ``candidate`` once (:func:`screening.screen`; a quiet pass below ``floor`` tokens/s is
    measured again)."""
    setup = study.setup
    reason = setup.infeasibility(candidate)
    if reason is not None:
        return TrialOutcome("infeasible", reason)
    config = study.engine_config(candidate)

    def measure() -> Pass:
        study.worker.limit_threads(study.machine.threads)  # the cores a persisting load leaves
        return study.worker.measure_pass(config, setup.workload, candidate.concurrency, seed=study.options.seed or 0)

    try:
        screened = screening.screen(
            measure, lambda text: study.say(f"{candidate.label}: {text}", kind="note"), study.deadline.in_time,
            floor=floor, machine=study.machine,
        )
    except WorkerFailure as failure:
        return TrialOutcome("failed", failure.reason, failure_kind=failure.kind)
    measurement, objective = screened.measurement, setup.objective
    try:
        values = objective.values(measurement)
    except ValueError as exc:
        return TrialOutcome("failed", str(exc), failure_kind="objective", extra=screened.extra())
    return TrialOutcome("complete", None, measurement.to_dict(), values, objective.constraints(measurement),
                        extra=screened.extra())


def _abandon(study: Study, trial: optuna.Trial | None, interrupted: bool) -> None:
    """Ctrl-C or an unexpected error: stop the worker, fail the running trial and queue it
    again for the next run; after Ctrl-C the study is marked interrupted."""
    study.worker.stop(force=True)
    ledger = study.ledger
    try:
        trial_id = None if trial is None else ledger.trial_id(trial.number)
        if trial_id is not None and ledger.storage.get_trial(trial_id).state == TrialState.RUNNING:
            # Under the study lock, as budget.requeue_unresolved_failures, which completes a
            # re-queue cut off here: between the two, the retry is queued once.
            with study.lock():
                trial.set_user_attr(STATE_ATTR, "interrupted" if interrupted else "abandoned")
                ledger.study.tell(trial, state=TrialState.FAIL)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    RetryHeartbeatStaleTrialCallback(max_retry=study.options.max_retry)(
                        ledger.study, ledger.storage.get_trial(trial_id)
                    )
        if interrupted:
            study.set_status("interrupted")
    except Exception:  # noqa: BLE001 - the original error matters; heartbeats fail the trial later
        pass
