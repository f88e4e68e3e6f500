"""Retries of failed configurations (--retry-failed): a transient failure is measured again as a new
trial (a baseline at once, the rest once nothing untried is left), the retry is recorded and
reported, N = 0 keeps failures final, and the number of attempts is bounded."""

from __future__ import annotations

from dataclasses import replace

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

import faulty_engine
from faulty_engine import faults  # noqa: F401 - a fixture
from autotune.search import tune
from autotune.search.budget import owed_retry
from autotune.search.space import OPTUNA_CONCURRENCY_KEY, Candidate
from test_faults import FAULTY, assert_intact, small

pytestmark = pytest.mark.slow  # a study per retry rule

SCREENED = [("none c1", "complete"), ("none c2", "complete"), ("ngram@1 c1", "complete")]


def test_a_configuration_that_failed_once_is_measured_on_retry(options, faults) -> None:
    options = replace(small(options, options.db_url), n_trials=5)
    log = faults({FAULTY: ["exit"]})
    updates = []

    result = tune(options, progress=updates.append)

    rows = assert_intact(options, SCREENED + [(FAULTY, "failed"), (FAULTY, "complete")])
    failed, retry = rows[-2:]
    assert retry.extra["attempt"] == 2 and retry.extra["retry_of"] == failed.trial_number
    assert "attempt" not in failed.extra
    assert faulty_engine.calls(log, FAULTY) == 2
    assert f"{FAULTY} (attempt 2, retrying trial {failed.trial_number})" in [u.current for u in updates]
    assert (result.analysis.counts.retried, result.analysis.counts.total) == (1, 5)
    assert "Retried 1 failed trial(s); 1 completed on retry." in result.summary_lines()
    best_b2 = next(entry for entry in result.analysis.per_concurrency if entry.concurrency == 2)
    assert best_b2.tokens_per_s is not None


def test_a_sampler_proposing_a_failed_configuration_gets_the_failure_until_nothing_untried_is_left(options,
                                                                                                    faults) -> None:
    options = replace(small(options, options.db_url), sampler="random", seed=5, n_trials=5)
    log = faults({"ngram@1 c1": ["oom"]})

    result = tune(options)

    rows = sorted((row for row in result.rows if row.phase == "screening"), key=lambda row: row.trial_number)
    measured = [row.label for row in rows]
    assert measured[-1] == "ngram@1 c1" and set(measured[:-1]) == {"none c1", "none c2", "ngram@1 c1", "ngram@1 c2"}
    assert rows[-1].state == "complete" and rows[-1].extra["attempt"] == 2  # measured again only at the end
    failed = next(row for row in rows if row.state == "failed")
    trials = optuna.load_study(study_name=options.study_name, storage=options.db_url).trials
    replayed = [t for t in trials if t.user_attrs.get("repeat_of") == failed.trial_number]
    assert replayed and all(t.number < rows[-1].trial_number and t.state == TrialState.FAIL for t in replayed)
    assert faulty_engine.calls(log, "ngram@1 c1") == 2
    assert result.status == "complete" and result.analysis.counts.total == 5


def test_no_retries_keep_every_failure_final(options, faults) -> None:
    options = replace(small(options, options.db_url), n_trials=5, retry_failed=0)
    log = faults({FAULTY: ["exit"]})

    result = tune(options)

    assert_intact(options, SCREENED + [(FAULTY, "failed")])  # the space is spent: the study stops short
    assert faulty_engine.calls(log, FAULTY) == 1
    assert result.analysis.counts.retried == 0 and not any("Retried" in line for line in result.summary_lines())


def test_retries_are_bounded(options, faults) -> None:
    options = replace(small(options, options.db_url), n_trials=10, retry_failed=2)
    log = faults({FAULTY: ["exit"] * 5})

    result = tune(options)

    rows = assert_intact(options, SCREENED + [(FAULTY, "failed")] * 3)  # the first attempt and two retries
    assert [row.extra.get("attempt") for row in rows[-3:]] == [None, 2, 3]
    assert [row.extra.get("retry_of") for row in rows[-2:]] == [rows[-3].trial_number, rows[-2].trial_number]
    assert faulty_engine.calls(log, FAULTY) == 3
    assert result.status == "complete" and result.analysis.counts.total == 6


def test_a_failed_baseline_is_retried_at_once(options, faults) -> None:
    options = replace(small(options, options.db_url), n_trials=5)
    faults({"none c2": ["segfault"]})

    result = tune(options)

    rows = assert_intact(options, [("none c1", "complete"), ("none c2", "failed"), ("none c2", "complete"),
                                   ("ngram@1 c1", "complete"), (FAULTY, "complete")])
    assert rows[2].extra["retry_of"] == rows[1].trial_number  # before any other configuration
    assert not any(line.startswith("No speedup") for line in result.summary_lines())


def test_a_baseline_that_keeps_failing_is_reported(options, faults) -> None:
    options = replace(small(options, options.db_url), n_trials=5)
    faults({"none c2": ["exit", "exit"]})

    result = tune(options)

    assert_intact(options, [("none c1", "complete"), ("none c2", "failed"), ("none c2", "failed"),
                            ("ngram@1 c1", "complete"), (FAULTY, "complete")])
    lines = [line for line in result.summary_lines() if line.startswith("No speedup")]
    assert lines == ["No speedup at concurrency 2: its baseline (method none) failed 2 times in screening (last: the "
                     "worker exited with code 3; last output: native library aborted)."]


# -- which failure is owed a retry (no engine needed) -----------------------------------------------

NGRAM = {"method": CategoricalDistribution(["ngram"]), "ngram_depth": IntDistribution(1, 2),
         OPTUNA_CONCURRENCY_KEY: CategoricalDistribution([1, 2])}
BASELINE = {OPTUNA_CONCURRENCY_KEY: CategoricalDistribution([1, 2])}


def trial(state: TrialState, params: dict, kind: str | None, number_state: str = "failed") -> optuna.trial.FrozenTrial:
    attrs = {"autotune_state": number_state, **({"autotune_failure": kind} if kind else {})}
    distributions = BASELINE if "method" not in params else NGRAM
    values = [1.0] if state == TrialState.COMPLETE else None
    return optuna.trial.create_trial(state=state, params=params, distributions=distributions, user_attrs=attrs,
                                     values=values)


def counted(*trials: optuna.trial.FrozenTrial) -> list[optuna.trial.FrozenTrial]:
    study = optuna.create_study()
    for t in trials:
        study.add_trial(t)
    return study.get_trials()


def test_only_transient_failures_are_owed_a_retry_baselines_first() -> None:
    ngram = {"method": "ngram", "ngram_depth": 1, OPTUNA_CONCURRENCY_KEY: 2}
    for kind in ("crash", "timeout", "oom"):
        assert owed_retry(counted(trial(TrialState.FAIL, ngram, kind)), 1) == (
            Candidate("ngram", 1, 2), {"retry_of": 0, "attempt": 2})
    for kind in ("unsupported", "engine_error", "objective"):
        assert owed_retry(counted(trial(TrialState.FAIL, ngram, kind)), 1) is None
    assert owed_retry(counted(trial(TrialState.PRUNED, ngram, None, "infeasible")), 5) is None
    assert owed_retry(counted(trial(TrialState.FAIL, ngram, "crash")), 0) is None
    retried = counted(trial(TrialState.FAIL, ngram, "crash"), trial(TrialState.COMPLETE, ngram, None, "complete"))
    assert owed_retry(retried, 3) is None  # the retry completed
    first_ngram_then_baseline = counted(trial(TrialState.FAIL, ngram, "crash"),
                                        trial(TrialState.FAIL, {OPTUNA_CONCURRENCY_KEY: 1}, "oom"))
    assert owed_retry(first_ngram_then_baseline, 1) == (Candidate("none", 0, 1), {"retry_of": 1, "attempt": 2})
