"""Jobs on PostgreSQL: procrastinate is the queue (DESIGN.md §11), the job table what everyone reads.

``POST /v1/tune`` stores the job row and defers procrastinate task :data:`TASK` with its id;
``autotune worker`` runs procrastinate's worker on :data:`QUEUE`, whose task runs the job
(:func:`autotune.jobs.runner.run_job`). procrastinate hands a job to one worker only (it fetches
with ``SELECT ... FOR UPDATE SKIP LOCKED``), so two workers never take the same job.

**A worker killed mid-job.** Each procrastinate worker sends a heartbeat every
``stalled_after_s / 3`` seconds. Every worker, when it starts and then every ``stalled_after_s``,
asks procrastinate for the jobs still ``doing`` under a worker silent for ``stalled_after_s``
(``JobManager.get_stalled_jobs``) and retries them (``retry_job``): the job goes back to ``todo``
and the next free worker takes it, finds the row ``running`` and resumes its study.

**The schema.** procrastinate's tables are created with procrastinate's own schema manager, when
``autotune serve`` or ``autotune worker`` starts on a database that has none (under a database
lock, so that workers starting together create them once). Not an Alembic migration of ours:
the schema belongs to the procrastinate version installed, which upgrades it with its own
migrations; ours would freeze one version's tables into autotune's history.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from autotune.errors import ConfigurationError
from autotune.jobs import records
from autotune.jobs.roots import ModelRoots
from autotune.jobs.runner import run_job
from autotune.store import open_database, resolve_database_url
from autotune.store.database import parse_database_url
from autotune.store.locks import named_lock

LOG = logging.getLogger("autotune.jobs")
QUEUE = "autotune"
TASK = "autotune.tune_job"
SCHEMA_LOCK = "autotune-procrastinate-schema"
STALLED_AFTER_S = 30.0  # procrastinate's default: a worker silent this long is dead


def _procrastinate() -> Any:
    try:
        import procrastinate
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"jobs on PostgreSQL need procrastinate ({exc.name} is missing): "
                                 "pip install 'autotune[postgres]'") from None
    return procrastinate


def conninfo(db_url: str | None) -> str:
    """The libpq URL procrastinate connects with (our URLs name SQLAlchemy's driver)."""
    url = parse_database_url(resolve_database_url(db_url))
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def ensure_schema(db_url: str | None) -> None:
    """Create procrastinate's tables unless the database has them (see the module doc)."""
    app = _sync_app(db_url)
    with open_database(db_url) as database, named_lock(database.engine, SCHEMA_LOCK), app.open():
        present = app.connector.execute_query_one(query="SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS present")
        if not present["present"]:
            app.schema_manager.apply_schema()
            LOG.info("created procrastinate's tables")


def _sync_app(db_url: str | None) -> Any:
    """An app for synchronous code (the server's routes, the schema check): one connection."""
    procrastinate = _procrastinate()
    return procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=conninfo(db_url), min_size=1,
                                                                          max_size=1))


def defer(db_url: str | None, job_id: int) -> int:
    """Queue job ``job_id`` for the workers; procrastinate's id of it."""
    with _sync_app(db_url).open() as app:
        return app.configure_task(TASK, queue=QUEUE).defer(job_id=job_id)


def withdraw(db_url: str | None, queue_job_id: int) -> None:
    """Take a cancelled job out of the queue unless a worker has it already (that worker then finds
    the row cancelled, or the cancellation asked, and stops)."""
    with _sync_app(db_url).open() as app:
        app.job_manager.cancel_job_by_id(queue_job_id)


def work(db_url: str | None, roots: ModelRoots, *, once: bool = False, concurrency: int = 1,
         stalled_after_s: float = STALLED_AFTER_S, echo: Callable[[str], None] | None = None) -> None:
    """Run procrastinate's worker on :data:`QUEUE` until stopped (``once``: until the queue is empty),
    ``concurrency`` jobs at a time; retry stalled jobs as the module doc says."""
    procrastinate = _procrastinate()
    ensure_schema(db_url)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo(db_url)))

    @app.task(name=TASK, queue=QUEUE)
    async def tune_job(job_id: int) -> None:
        # RUNNING too: procrastinate hands a running job out again only when its worker died.
        await _in_daemon_thread(run_job, db_url, job_id, roots, states=(records.QUEUED, records.RUNNING), echo=echo)

    asyncio.run(_work(app, once, concurrency, stalled_after_s))


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a daemon thread of its own. Not the loop's executor: Python waits
    for those threads at exit, and a tune cannot be interrupted from outside, so Ctrl-C would wait
    for the job to end; a daemon thread dies with the process, as with ``kill -9``."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def run() -> None:
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            loop.call_soon_threadsafe(lambda error=exc: future.done() or future.set_exception(error))
        else:
            loop.call_soon_threadsafe(lambda: future.done() or future.set_result(result))

    threading.Thread(target=run, name="autotune-job", daemon=True).start()
    return await future


async def _work(app: Any, once: bool, concurrency: int, stalled_after_s: float) -> None:
    async with app.open_async():
        await _retry_stalled(app, stalled_after_s)
        worker = asyncio.create_task(app.run_worker_async(
            queues=[QUEUE], concurrency=concurrency, wait=not once, update_heartbeat_interval=stalled_after_s / 3,
            stalled_worker_timeout=stalled_after_s, name="autotune-worker",
            install_signal_handlers=False))  # Ctrl-C stops at once (the CLI), not after the job
        while not (await asyncio.wait({worker}, timeout=stalled_after_s))[0]:
            await _retry_stalled(app, stalled_after_s)
        worker.result()


async def _retry_stalled(app: Any, stalled_after_s: float) -> None:
    for job in await app.job_manager.get_stalled_jobs(task_name=TASK, seconds_since_heartbeat=stalled_after_s):
        try:
            await app.job_manager.retry_job(job)
        except Exception as exc:  # noqa: BLE001 - another worker retried it first
            LOG.debug("stalled job %s not retried here: %s", job.id, exc)
        else:
            LOG.info("job %s of a worker silent for %g s is queued again", job.task_kwargs.get("job_id"),
                     stalled_after_s)
