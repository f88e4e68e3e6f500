"""The study-wide trial budget, shared by every worker of a study.

``n_trials`` counts the study's *measured* trials, whoever runs them. Under the study's database
lock a worker counts the trials that take part (every state, waiting and running included), except

* failed trials re-queued by a retry (their retry counts instead), and
* repeats: a sampler proposing a configuration that already finished gets the earlier result back
  at once (Optuna is told the same values) and the repeat costs neither time nor budget,

and asks for a new trial only while that count is below the budget, so concurrent workers never
overshoot. Waiting trials (retries of trials whose worker died or was interrupted) run first.

Before sampling, the worker enqueues the next *planned* candidate nobody has taken yet: the
baselines (method none at every concurrency), and for the grid sampler every point of the space.
A study that can only run planned candidates (the grid, or a space of the baseline alone) stops
when they are all taken. The model-guided search (:mod:`autotune.search.guide`) enqueues its own
next point instead of sampling, and stops the study when it has none. When the sampler keeps
repeating itself (:mod:`autotune.search.asking` allows a few repeats in a row: it has converged),
the worker enqueues a random configuration nobody has tried; once every configuration is taken,
the study stops, however much budget is left.

Retries of failed configurations (:func:`owed_retry`; the rule is in :mod:`autotune.search.trials`)
are enqueued here too: a baseline's before any other new point, the rest only when nothing untried
is left, just before the study would stop. A retry is measured, so it counts against the budget.
"""

from __future__ import annotations

import os
import random
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.search.ledger import Ledger
from autotune.search.space import BASELINE_METHOD, Candidate, SearchSpace

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
# User attributes of our trials: how the measurement ended (complete | failed | infeasible, or
# interrupted | abandoned for a trial its worker gave up), the failure's kind, and the marks of a
# repeat (the earlier trial answered for it) and of a retry (the failed trial it measures again).
STATE_ATTR = "autotune_state"
FAILURE_ATTR = "autotune_failure"
REPEAT_ATTR = "repeat_of"
RETRY_OF_ATTR = "retry_of"
ATTEMPT_ATTR = "attempt"
# STATE_ATTR of a failed trial that has no result of ours: failed as stale (no state), or given up.
UNRESOLVED_STATES = (None, "interrupted", "abandoned")
OWNER_ATTR = "autotune_owner"  # system attribute: the process running the trial (see claim)
# Failures that can pass (the worker crashed, hung or ran out of memory); an unsupported
# configuration, an engine error or an unusable measurement would fail the same way again.
TRANSIENT_FAILURES = ("crash", "timeout", "oom")


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


def owed_retry(counted: list[FrozenTrial], retry_failed: int) -> tuple[Candidate, dict[str, int]] | None:
    """The configuration to measure again, with its retry attributes, or None: among the
    configurations whose latest attempt failed transiently after at most ``retry_failed``
    attempts in all, a baseline first, then the one tried first. ``counted``: the budget's trials."""
    attempts: dict[str, list[FrozenTrial]] = {}
    for trial in sorted(counted, key=lambda t: t.number):
        attempts.setdefault(repr(sorted(_params(trial).items())), []).append(trial)

    def owed(tries: list[FrozenTrial]) -> bool:
        latest = tries[-1]
        return (latest.state == TrialState.FAIL and latest.user_attrs.get(STATE_ATTR) == "failed"
                and latest.user_attrs.get(FAILURE_ATTR) in TRANSIENT_FAILURES and len(tries) <= retry_failed)

    def order(tries: list[FrozenTrial]) -> tuple[bool, int]:
        return SearchSpace.candidate_of(_params(tries[0])).method != BASELINE_METHOD, tries[0].number

    tries = min((tries for tries in attempts.values() if owed(tries)), key=order, default=None)
    if tries is None:
        return None
    return SearchSpace.candidate_of(_params(tries[-1])), {RETRY_OF_ATTR: tries[-1].number, ATTEMPT_ATTR: len(tries) + 1}


@dataclass(frozen=True)
class Asking:
    """What a worker asks for trials within: the study's ``n_trials``, its ``planned`` candidates
    (taken first, in order), whether it runs only those (``planned_only``), its search ``space``
    (whose user attributes an enqueued trial gets), and how many retries a failed configuration
    gets (``retry_failed``, :func:`owed_retry`)."""

    n_trials: int
    planned: list[Candidate]
    planned_only: bool
    space: SearchSpace
    retry_failed: int = 0


def ask_within_budget(
    study: optuna.Study,
    asking: Asking,
    explore: random.Random | None = None,
    propose: Callable[[list[dict[str, Any]]], Candidate | None] | None = None,
) -> optuna.Trial | None:
    """A new trial, or None when the budget is spent or nothing is left to try (see the module
    doc). With ``explore``, a random untried point of the space is enqueued when no planned one is
    left. With ``propose`` (the model-guided search), its answer to the parameters taken so far is
    enqueued when no planned one is left, and None ends the study. The caller holds the study lock."""
    trials, space = study.get_trials(deepcopy=False), asking.space
    if not any(trial.state == TrialState.WAITING for trial in trials):
        counted = counted_trials(trials)
        if len(counted) >= asking.n_trials:
            return None
        taken = [_params(trial) for trial in counted]
        following = next((c for c in asking.planned if SearchSpace.params(c) not in taken), None)
        retry = owed_retry(counted, asking.retry_failed)
        if retry is not None and retry[0].method == BASELINE_METHOD and (
                following is None or following.method != BASELINE_METHOD):
            return _ask_for(study, space, *retry)  # every speedup at its concurrency waits for it
        if following is None and propose is not None:
            following = propose(taken)
        elif following is None and explore is not None:
            untried = [c for c in space.candidates() if SearchSpace.params(c) not in taken]
            following = explore.choice(untried) if untried else None
        if following is None and (propose is not None or explore is not None or asking.planned_only):
            # Nothing untried is left: measure again what failed and may not fail twice, then stop.
            return None if retry is None else _ask_for(study, space, *retry)
        if following is not None:
            study.enqueue_trial(SearchSpace.params(following), user_attrs=space.user_attrs(following))
    return _ask(study)


def _ask_for(study: optuna.Study, space: SearchSpace, candidate: Candidate, attrs: dict[str, Any]) -> optuna.Trial:
    """Enqueue ``candidate`` with extra user attributes ``attrs`` and ask for it."""
    study.enqueue_trial(SearchSpace.params(candidate), user_attrs={**space.user_attrs(candidate), **attrs})
    return _ask(study)


def _ask(study: optuna.Study) -> optuna.Trial:
    with warnings.catch_warnings():
        # Optuna warns that heartbeats are meant for Study.optimize; we record them ourselves.
        warnings.filterwarnings("ignore", message="Heartbeat of storage")
        return study.ask()


def fail_stale_trials(ledger: Ledger) -> None:
    """Fail (and re-queue) trials whose worker stopped sending heartbeats, as Study.optimize does,
    and at once those whose process is known to be gone (:func:`_abandoned`): a rerun right after a
    ``kill -9`` need not wait out the heartbeat's grace period. Then re-queue what a cut-off
    re-queue left behind (:func:`requeue_unresolved_failures`). The caller holds the study lock."""
    study, storage = ledger.study, ledger.storage
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
        here = _process_identity(os.getpid())
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if not _abandoned(trial.system_attrs.get(OWNER_ATTR), here):
                continue
            trial_id = ledger.trial_id(trial.number)
            try:
                if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                    continue
            except optuna.exceptions.UpdateFinishedTrialError:  # another worker failed it first
                continue
            callback = storage.get_heartbeat_stale_trial_callback()
            if callback is not None:
                callback(study, storage.get_trial(trial_id))
        requeue_unresolved_failures(ledger)


def requeue_unresolved_failures(ledger: Ledger) -> None:
    """Re-queue failed trials that have no result of ours and no retry.

    Failing a trial and queueing its retry are two writes (Optuna's tell, then
    RetryHeartbeatStaleTrialCallback's add_trial): a connection lost between them leaves a failed
    trial that counts against the budget with no measurement row and nothing to measure it again.
    Such a trial has no outcome of ours (no :data:`STATE_ATTR`, or interrupted / abandoned); its
    retry is queued here, under the study lock, so it is queued once. The callback keeps its
    ``max_retry`` bound."""
    callback = ledger.storage.get_heartbeat_stale_trial_callback()
    if callback is None:
        return
    trials = ledger.trials()
    retired = retired_numbers(trials)
    for trial in trials:
        if (trial.state == TrialState.FAIL and trial.number not in retired and REPEAT_ATTR not in trial.user_attrs
                and trial.user_attrs.get(STATE_ATTR) in UNRESOLVED_STATES):
            callback(ledger.study, trial)


def claim(ledger: Ledger, trial: optuna.Trial) -> None:
    """Record which process runs ``trial`` (Linux: machine, pid and the process's start time;
    elsewhere a machine of None, left to the heartbeats), so that :func:`fail_stale_trials` can tell
    when it died. Called under the study lock that Optuna's ask ran under."""
    identity = _process_identity(os.getpid()) or {"machine": None}
    ledger.storage.set_trial_system_attr(ledger.trial_id(trial.number), OWNER_ATTR, identity)


def _abandoned(owner: dict[str, Any] | None, here: dict[str, Any] | None) -> bool:
    """Whether a running trial's process is gone. ``owner`` None: nobody claimed the trial, and as
    ask and claim both run under the study lock the caller now holds, its asker died between the two
    (a ``kill -9`` there left a trial without a heartbeat, which Optuna never finds stale, and a
    grid study that ended one short). Otherwise: it ran on this machine (``here``) and that process
    has ended (or a new one has its pid)."""
    if owner is None:
        return True
    return here is not None and owner["machine"] == here["machine"] and _process_identity(owner["pid"]) != owner


def _process_identity(pid: int) -> dict[str, Any] | None:
    """``{"machine", "pid", "start"}`` of a live process, None where it is gone or /proc is missing.
    The machine is the boot id with the pid namespace (containers on one host share the boot id but
    not their pids); the start time tells a reused pid from the process that had it."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie has exited
        return None
    return {"machine": f"{boot}/{namespace}", "pid": pid, "start": int(fields[19])}
