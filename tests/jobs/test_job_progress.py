"""A job's stored progress follows the tune's events: the phase, the trials and the engine builds
so far (not only at the end)."""

from __future__ import annotations

from autotune.jobs import records
from autotune.jobs.progress import JobProgress
from autotune.search.outcome import TuneProgress
from autotune.store import open_database


def stored_progress(database, job_id: int) -> dict:  # noqa: ANN001 - a Database
    with database.session() as session:
        return records.Job.of(records.get(session, job_id)).progress


def test_builds_are_reported_as_the_tune_goes(db_url: str) -> None:
    with open_database(db_url) as database:
        with database.session() as session:
            job_id = records.create(session, {"max_depth": 2}).id
            assert records.take(session, job_id, "a:1")
        progress = JobProgress(database, job_id)
        progress(TuneProgress(0, 6, "timing step costs", kind="phase", builds=0))
        assert stored_progress(database, job_id)["builds"] == 0
        progress(TuneProgress(1, 6, "mtp@2 b1", finished="complete", builds=2))
        state = stored_progress(database, job_id)
        assert (state["phase"], state["trials_done"], state["builds"]) == ("screening", 1, 2)
        progress(TuneProgress(1, 6, "mtp@2 b1: re-measuring", kind="note"))  # no count: the last one stays
        assert stored_progress(database, job_id)["builds"] == 2
