"""Three worker processes share one study through PostgreSQL: the trials are shared out, none is
lost or run twice, and the study ends with exactly the requested number of trials (TPE), or as
soon as the model-guided search has nothing left that could win (never more than requested)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import optuna
import pytest

from autotune.search import list_studies, study_trials
from autotune.search.budget import FINISHED, counted_trials
from autotune.store import open_database

from test_resume import read_until, start_worker

N_TRIALS = 9


@pytest.mark.postgres
@pytest.mark.parametrize("sampler", ["tpe", "model"])
def test_three_workers_run_exactly_the_requested_trials(options, postgres_url, tmp_path, sampler) -> None:
    options = replace(options, db_url=postgres_url, n_trials=N_TRIALS, seed=None, max_depth=3, sampler=sampler)
    with open_database(postgres_url):  # our schema first: open_database does not serialise first-time migrations yet
        pass
    workers = [start_worker(options, tmp_path) for _ in range(3)]
    try:
        outputs = [read_until(worker, "result ") for worker in workers]
        assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0]
    finally:
        for worker in workers:
            worker.kill()
            worker.stdout.close()

    run_by_worker = [int(lines[-1].split()[1]) for lines in outputs]
    storage = postgres_url.replace("postgresql://", "postgresql+psycopg://")
    trials = optuna.load_study(study_name="tiny", storage=storage).trials
    assert all(trial.state in FINISHED for trial in trials)
    measured = counted_trials(trials)  # repeats of finished configurations are answered, not measured
    assert sum(run_by_worker) == len(measured)
    if sampler == "tpe":
        assert len(measured) == N_TRIALS
    else:  # the guide stops when nothing can win, and never hands one point to two workers
        assert len(measured) <= N_TRIALS
        assert len({str(trial.params) for trial in measured}) == len(measured)
    rows = [row for row in study_trials(postgres_url, "tiny") if row.phase == "screening"]
    assert sorted(row.trial_number for row in rows) == [trial.number for trial in measured]
    enqueued = Counter(str(trial.system_attrs.get("fixed_params")) for trial in trials)
    for baseline in ({"batch_size": 1}, {"batch_size": 2}):
        assert enqueued[str(baseline)] == 1  # each planned baseline handed to exactly one worker
    studies = list_studies(postgres_url)
    assert len(studies) == 1 and studies[0].status == "complete"
