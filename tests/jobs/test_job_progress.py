"""A job's stored progress follows the tune's events: the phase, the trials and the engine builds
so far (not only at the end); its ETA is computed when the job is read, so it moves during a trial."""

from __future__ import annotations

import datetime as dt

import pytest

from autotune.jobs import records
from autotune.jobs.eta import live_eta
from autotune.jobs.progress import JobProgress
from autotune.search.outcome import TuneProgress
from autotune.store import open_database


def stored_job(database, job_id: int) -> records.Job:  # noqa: ANN001 - a Database
    with database.session() as session:
        return records.Job.of(records.get(session, job_id))


def stored_progress(database, job_id: int) -> dict:  # noqa: ANN001 - a Database
    return stored_job(database, job_id).progress


def running_job(database) -> tuple[int, JobProgress]:  # noqa: ANN001 - a Database
    """A job taken by a worker, and its progress callback."""
    with database.session() as session:
        job_id = records.create(session, {"max_depth": 2}).id
        assert records.take(session, job_id, "a:1")
    return job_id, JobProgress(database, job_id)


def test_builds_are_reported_as_the_tune_goes(db_url: str) -> None:
    with open_database(db_url) as database:
        job_id, progress = running_job(database)
        progress(TuneProgress(0, 6, "timing step costs", kind="phase", builds=0))
        assert stored_progress(database, job_id)["builds"] == 0
        progress(TuneProgress(1, 6, "mtp@2 c1", finished="complete", builds=2))
        state = stored_progress(database, job_id)
        assert (state["phase"], state["trials_done"], state["builds"]) == ("screening", 1, 2)
        progress(TuneProgress(1, 6, "mtp@2 c1: re-measuring", kind="note"))  # no count: the last one stays
        assert stored_progress(database, job_id)["builds"] == 2


def test_the_eta_moves_while_a_trial_runs_and_is_there_during_the_first(db_url: str) -> None:
    with open_database(db_url) as database:
        job_id, progress = running_job(database)
        progress(TuneProgress(0, 4, "mtp@1 c1"))  # the first trial starts
        job = stored_job(database, job_id)
        started = dt.datetime.fromisoformat(job.progress["trial_started_at"])
        ten_s, twenty_s = (job.to_dict(now=started + dt.timedelta(seconds=s))["progress"] for s in (10, 20))
        # Nothing measured yet: the other 3 trials as long as this one so far, growing, marked as such.
        assert (ten_s["eta_s"], twenty_s["eta_s"], ten_s["eta_at_least"]) == (30, 60, True)

        progress(TuneProgress(1, 4, "mtp@1 c1", finished="complete"))
        job = stored_job(database, job_id)
        mean = job.progress["trial_mean_s"]
        assert job.progress["trial_started_at"] is None and mean is not None
        assert job.to_dict()["progress"]["eta_s"] == pytest.approx(3 * mean)  # between trials

        progress(TuneProgress(1, 4, "mtp@2 c1"))
        job = stored_job(database, job_id)
        started = dt.datetime.fromisoformat(job.progress["trial_started_at"])
        etas = [job.to_dict(now=started + dt.timedelta(seconds=mean * f))["progress"] for f in (0, 0.5, 2)]
        # Counting down through the trial under way, never below the trials after it.
        assert [e["eta_s"] for e in etas] == pytest.approx([3 * mean, 2.5 * mean, 2 * mean], abs=1e-5)
        assert not any(e["eta_at_least"] for e in etas)

        with database.session() as session:
            records.finish(session, job_id, records.SUCCEEDED)
            assert records.Job.of(records.get(session, job_id)).to_dict()["progress"]["eta_s"] is None


def test_no_eta_before_the_first_trial_or_after_the_last() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert live_eta({"trials_done": 0, "trials_total": None}, now)["eta_s"] is None  # step timings
    assert live_eta({"trials_done": 0, "trials_total": 5, "trial_started_at": None}, now)["eta_s"] is None
    assert live_eta({"trials_done": 5, "trials_total": 5, "trial_mean_s": 2.0}, now)["eta_s"] is None
