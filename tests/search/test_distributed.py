"""Several worker processes share one study, started together on a database nobody has opened yet
(so they also race to create its schema): the trials are shared out, none is lost or run twice,
and the study ends with exactly the requested number of trials (TPE), or as soon as the
model-guided search has nothing left that could win (never more than requested). Three workers
through PostgreSQL; four on one SQLite file, where concurrent writers must wait for each other
instead of failing with "database is locked"."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from autotune.search import TuneOptions, list_studies, study_trials
from autotune.search.budget import FINISHED, counted_trials
from autotune.search.space import OPTUNA_CONCURRENCY_KEY

from test_resume import read_until, start_worker

pytestmark = pytest.mark.slow  # several tune processes sharing one study

N_TRIALS = 9


def run_workers(options: TuneOptions, count: int, tmp_path: Path) -> list[int]:
    """Start ``count`` workers on ``options`` at once, wait for all; the trials each one ran."""
    workers = [start_worker(options, tmp_path) for _ in range(count)]
    try:
        outputs = [read_until(worker, "result ") for worker in workers]
        assert [worker.wait(timeout=120) for worker in workers] == [0] * count, outputs
    finally:
        for worker in workers:
            worker.kill()
            worker.stdout.close()
    return [int(lines[-1].split()[1]) for lines in outputs]


def check_shared_study(options: TuneOptions, run_by_worker: list[int], exact: bool) -> None:
    """The study's trials all finished, each measured once by one worker and stored once in our
    table; ``exact``: as many as requested and every baseline planned (TPE), else no more (the guided
    search may stop early, and screens a baseline only where it could lead)."""
    storage = options.db_url.replace("postgresql://", "postgresql+psycopg://")
    trials = optuna.load_study(study_name=options.study_name, storage=storage).trials
    assert all(trial.state in FINISHED for trial in trials)
    measured = counted_trials(trials)  # repeats of finished configurations are answered, not measured
    assert sum(run_by_worker) == len(measured)
    if exact:
        assert len(measured) == options.n_trials
    else:  # the guide stops when nothing can win, and never hands one point to two workers
        assert len(measured) <= options.n_trials
        assert len({str(trial.params) for trial in measured}) == len(measured)
    rows = [row for row in study_trials(options.db_url, options.study_name) if row.phase == "screening"]
    assert sorted(row.trial_number for row in rows) == [trial.number for trial in measured]
    enqueued = Counter(str(trial.system_attrs.get("fixed_params")) for trial in trials)
    for concurrency in options.concurrencies:
        handed = enqueued[str({OPTUNA_CONCURRENCY_KEY: concurrency})]
        # TPE plans every baseline; the guide screens one only where it could lead its concurrency
        # (autotune/search/guide.py, step 1). Either way no baseline goes to two workers.
        assert handed == 1 if exact else handed <= 1
    studies = list_studies(options.db_url)
    assert len(studies) == 1 and studies[0].status == "complete"


@pytest.mark.postgres
@pytest.mark.parametrize("sampler", ["tpe", "model"])
def test_three_workers_run_exactly_the_requested_trials(options, postgres_url, tmp_path, sampler) -> None:
    options = replace(options, db_url=postgres_url, n_trials=N_TRIALS, seed=None, max_depth=3, sampler=sampler)
    check_shared_study(options, run_workers(options, 3, tmp_path), exact=sampler == "tpe")


def test_four_workers_share_one_sqlite_file(options, tmp_path) -> None:
    # No confirmation phase: what is tested is four writers on one file, kept small to stay fast.
    options = replace(options, n_trials=6, seed=None, confirm=False)
    check_shared_study(options, run_workers(options, 4, tmp_path), exact=True)
