"""The fault matrix: engine workers that crash, hang or run out of memory in the middle of a trial,
and the tuner itself killed with SIGKILL during a trial and during the confirmation phase. Each case
ends by counting the study's rows: every finished trial stored once, states and reasons as they
happened, and the study finished with exactly the trials asked for."""

from __future__ import annotations

from dataclasses import replace

import optuna
import pytest
from optuna.trial import TrialState

import faulty_engine
from faulty_engine import faults  # noqa: F401 - a fixture
from autotune.search import list_studies, study_trials, tune
from autotune.search.budget import counted_trials

FAULTY = "ngram@1 b2"


def small(options, db_url: str):
    """Four points (the baselines and ngram@1 at batch sizes 1 and 2), each measured once in grid
    order; no confirmation: these cases are about screening trials."""
    return replace(options, db_url=db_url, methods=("ngram",), max_depth=1, sampler="grid", n_trials=None,
                   confirm=False, trial_timeout_s=10)


def assert_intact(options, expected: list[tuple[str, str]]) -> list:
    """The study's screening rows and Optuna trials agree one to one, the rows are ``expected``
    ((label, state) in trial order) and the study is complete. Returns the rows in trial order."""
    rows = sorted((row for row in study_trials(options.db_url, options.study_name) if row.phase == "screening"),
                  key=lambda row: row.trial_number)
    assert [(row.label, row.state) for row in rows] == expected
    storage = options.db_url.replace("postgresql://", "postgresql+psycopg://")
    trials = optuna.load_study(study_name=options.study_name, storage=storage).trials
    assert [t.number for t in counted_trials(trials)] == [row.trial_number for row in rows]
    state = {"complete": TrialState.COMPLETE, "failed": TrialState.FAIL, "infeasible": TrialState.PRUNED}
    for row in rows:
        assert trials[row.trial_number].state == state[row.state]
        assert trials[row.trial_number].user_attrs["autotune_state"] == row.state
    assert [s.status for s in list_studies(options.db_url)] == ["complete"]
    return rows


@pytest.mark.parametrize(
    ("fault", "kind", "reason"),
    [
        ("exit", "crash", "the worker exited with code 3; last output: native library aborted"),
        ("segfault", "crash", "the worker died from signal SIGSEGV"),
        ("hang", "timeout", "no answer within 10 s; the worker was killed"),
        ("oom", "oom", "can't allocate memory"),
    ],
)
@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_worker_fault_mid_trial_fails_that_trial_and_the_study_goes_on(options, faults, request, db, fault, kind,
                                                                          reason) -> None:
    options = small(options, request.getfixturevalue(f"{db}_url"))
    log_dir = faults({FAULTY: [fault]})

    result = tune(options)

    rows = assert_intact(options, [("none b1", "complete"), ("none b2", "complete"), ("ngram@1 b1", "complete"),
                                   (FAULTY, "failed")])
    failed = rows[-1]
    assert failed.extra["failure"] == kind and reason in failed.reason, failed.reason
    assert faulty_engine.calls(log_dir, FAULTY) == 1  # the budget held no room for a retry
    assert (result.status, result.analysis.counts.failed, result.analysis.counts.complete) == ("complete", 1, 3)
    assert result.profile is not None
