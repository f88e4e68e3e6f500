"""The job table's state changes on both backends: a job is taken once, a cancel wins over a take,
a job whose heartbeat stopped is queued again, and every job names a study of its own."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import update

from autotune.jobs import records
from autotune.store import open_database
from autotune.store.tables import JobRecord


def test_a_job_is_taken_once_and_its_study_is_named_after_it(db_url: str) -> None:
    with open_database(db_url) as database, database.session() as session:
        first = records.create(session, {"max_depth": 2})
        named = records.create(session, {"study": "mine"})
        assert (first.study_name, named.study_name) == (f"job-{first.id}", "mine")
        assert records.next_queued(session) == first.id
        assert records.take(session, first.id, "a:1")
        assert not records.take(session, first.id, "b:2")  # queued no more
        # The queue's own take (procrastinate handing out a job whose worker died) takes it again.
        assert records.take(session, first.id, "b:2", states=(records.QUEUED, records.RUNNING))
        job = records.Job.of(records.get(session, first.id))
        assert (job.status, job.worker, job.attempts) == (records.RUNNING, "b:2", 2)
        assert records.next_queued(session) == named.id


def test_cancel_stops_a_queued_job_at_once_and_asks_a_running_one(db_url: str) -> None:
    with open_database(db_url) as database, database.session() as session:
        queued = records.create(session, {}).id
        running = records.create(session, {}).id
        assert records.take(session, running, "a:1")
        assert records.cancel(session, queued).status == records.CANCELLED
        assert not records.take(session, queued, "a:1")
        asked = records.cancel(session, running)
        assert (asked.status, asked.cancel_requested) == (records.RUNNING, True)
        assert records.record_progress(session, running, {"phase": "screening"}, ["a line"])  # the tune stops here
        # Taken again after its worker died, a job whose cancellation was asked ends cancelled.
        assert not records.take(session, running, "b:2", states=(records.QUEUED, records.RUNNING))
        assert records.get(session, running).status == records.CANCELLED
        records.finish(session, running, records.SUCCEEDED, profile_id=1)  # a finished job stays as it is
        assert records.cancel(session, running).status == records.CANCELLED


def test_a_job_whose_heartbeat_stopped_is_queued_again(db_url: str) -> None:
    with open_database(db_url) as database, database.session() as session:
        alive, dead = records.create(session, {}).id, records.create(session, {}).id
        for job_id in (alive, dead):
            assert records.take(session, job_id, "a:1")
        long_ago = records.utcnow() - dt.timedelta(minutes=5)
        session.execute(update(JobRecord).where(JobRecord.id == dead).values(heartbeat_at=long_ago))
        assert records.requeue_stale(session, 60) == 1
        assert [records.get(session, j).status for j in (alive, dead)] == [records.RUNNING, records.QUEUED]
        assert records.take(session, dead, "b:2") and records.get(session, dead).attempts == 2


def test_listing_is_newest_first_with_the_total(db_url: str) -> None:
    with open_database(db_url) as database, database.session() as session:
        ids = [records.create(session, {}).id for _ in range(3)]
        records.cancel(session, ids[0])
        jobs, total = records.listing(session, 2)
        assert [job.id for job in jobs] == ids[::-1][:2] and total == 3
        assert [job.id for job in records.listing(session, 10, records.CANCELLED)[0]] == [ids[0]]
        assert jobs[0].to_dict()["created_at"].endswith("+00:00")
