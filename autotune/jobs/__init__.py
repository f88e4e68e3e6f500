"""Queued tunes: submit, list, read and cancel jobs, and run them, the same way on both
backends (DESIGN.md §11).

Every job is a row of ``autotune_jobs`` (:mod:`.records`): its request, status, progress, log
tail, study, profile id and error line, read the same way on SQLite and PostgreSQL. What differs
is who runs it. On PostgreSQL, procrastinate queues it and ``autotune worker`` processes (one per
GPU host) take it (:mod:`.pgqueue`); on SQLite, which a team does not share, ``autotune serve``
runs the jobs itself, one at a time (:mod:`.local`). Either way one job runs through
:mod:`.runner`, reports through :mod:`.progress` and reads files only under the model roots
(:mod:`.roots`).

This layer sits above :mod:`autotune.api` (it runs ``api.tune``), beside :mod:`autotune.service`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autotune.errors import ConfigurationError
from autotune.jobs import records
from autotune.jobs.checks import checked_options
from autotune.jobs.records import Job
from autotune.jobs.roots import ModelRoots
from autotune.store import open_database, resolve_database_url
from autotune.store.database import parse_database_url

__all__ = ["Job", "ModelRoots", "cancel_job", "get_job", "list_jobs", "runs_jobs_itself", "submit", "work"]


def runs_jobs_itself(db_url: str | None) -> bool:
    """True on SQLite, where the server runs the jobs; False on PostgreSQL, where workers do."""
    return parse_database_url(resolve_database_url(db_url)).get_backend_name() == "sqlite"


def submit(db_url: str | None, request: dict[str, Any], roots: ModelRoots | None = None) -> Job:
    """Queue a tune of ``request`` (the ``autotune tune`` options by their request names,
    :mod:`autotune.search.request`). Checked before anything is written (:mod:`.checks`): every
    file the job would read against the model roots, then the options as the tune checks them (on
    PostgreSQL only what holds on any machine: the worker checks the files and the engine).
    ``roots``: the server's (None: on SQLite, where this process runs the job, those of
    ``AUTOTUNE_MODEL_ROOTS``, as its runner has them; on PostgreSQL, not checked before a worker
    takes the job). :class:`~autotune.errors.InvalidOption` naming the field at fault."""
    here = runs_jobs_itself(db_url)
    if here and roots is None:
        roots = ModelRoots.of()
    checked_options(request, db_url, roots, here=here)
    with open_database(db_url) as database:
        with database.session() as session:
            job_id = records.create(session, request).id
        if not here:
            _queue(db_url, database, job_id)
        with database.session() as session:
            return Job.of(records.get(session, job_id))


def _queue(db_url: str | None, database: Any, job_id: int) -> None:
    """Hand job ``job_id`` to procrastinate; a job that could not be queued is failed, not left queued."""
    from autotune.jobs import pgqueue

    try:
        pgqueue.ensure_schema(db_url)
        queue_job_id = pgqueue.defer(db_url, job_id)
    except BaseException:
        with database.session() as session:
            records.finish(session, job_id, records.FAILED, states=(records.QUEUED,),
                           error="the job could not be queued (the server log says why)")
        raise
    with database.session() as session:
        records.get(session, job_id).queue_job_id = queue_job_id


def list_jobs(db_url: str | None, limit: int, status: str | None = None) -> tuple[list[Job], int]:
    """The newest ``limit`` jobs (of ``status`` when given) and how many there are in all."""
    if status is not None and status not in records.STATUSES:
        raise ConfigurationError(f"unknown job status {status!r}; choose from {', '.join(records.STATUSES)}")
    with open_database(db_url) as database, database.session() as session:
        return records.listing(session, limit, status)


def get_job(db_url: str | None, job_id: int) -> Job:
    """Job ``job_id``; NotFoundError when there is none."""
    with open_database(db_url) as database, database.session() as session:
        return Job.of(records.get(session, job_id))


def cancel_job(db_url: str | None, job_id: int) -> Job:
    """Cancel job ``job_id``: a queued one at once, a running one at its next trial boundary
    (:mod:`.progress`); a finished one is left as it is. The job as it stands afterwards."""
    with open_database(db_url) as database, database.session() as session:
        row = records.cancel(session, job_id)
        job, queue_job_id = Job.of(row), row.queue_job_id
    if job.status == records.CANCELLED and queue_job_id is not None:
        from autotune.jobs import pgqueue

        pgqueue.withdraw(db_url, queue_job_id)
    return job


def work(db_url: str | None, roots: ModelRoots, *, once: bool = False, concurrency: int = 1,
         stalled_after_s: float | None = None, echo: Callable[[str], None] | None = None) -> None:
    """Run queued jobs until interrupted (``once``: until none is queued): procrastinate's worker on
    PostgreSQL, ``concurrency`` jobs at a time; on SQLite the loop ``autotune serve`` runs, one
    at a time. A job whose worker was silent ``stalled_after_s`` seconds is taken again."""
    if concurrency < 1:
        raise ConfigurationError(f"concurrency must be at least 1, got {concurrency}")
    if stalled_after_s is not None and stalled_after_s <= 0:
        raise ConfigurationError(f"the stall limit must be a number of seconds > 0, got {stalled_after_s}")
    if runs_jobs_itself(db_url):
        from autotune.jobs import local

        if concurrency != 1:
            raise ConfigurationError("on SQLite jobs run one at a time: use PostgreSQL for --concurrency")
        local.work(db_url, roots, once=once, stale_after_s=stalled_after_s or local.STALE_AFTER_S, echo=echo)
        return
    from autotune.jobs import pgqueue

    pgqueue.work(db_url, roots, once=once, concurrency=concurrency,
                 stalled_after_s=stalled_after_s or pgqueue.STALLED_AFTER_S, echo=echo)
