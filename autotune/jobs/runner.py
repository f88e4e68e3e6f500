"""Running one job, the same on every backend: take it, check its files against the model roots and
its options as ``autotune tune`` does, run :func:`autotune.api.tune` with the job's progress
callback and a heartbeat, and record how it ended (the study's profile id, or one error line).

A job tunes the study its row names (``job-<id>`` unless the request named one), so a job taken
again after its worker died resumes that study: the trials it finished are kept, the one under
way is measured again (:mod:`autotune.search.tuner`).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from autotune import api
from autotune.errors import AutotuneError
from autotune.periodic import repeating
from autotune.jobs import records
from autotune.jobs.checks import checked_options
from autotune.jobs.progress import JobCancelled, JobProgress
from autotune.jobs.roots import ModelRoots
from autotune.store import Database, open_database
from autotune.store.redact import Redactor

LOG = logging.getLogger("autotune.jobs")
HEARTBEAT_S = 10.0  # how often a running job's row says its worker is alive


def worker_name() -> str:
    """``host:pid``: which process runs a job (shown in the job, and in the log)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run_job(db_url: str | None, job_id: int, roots: ModelRoots, *, states: tuple[str, ...] = (records.QUEUED,),
            echo: Callable[[str], None] | None = None) -> str | None:
    """Take job ``job_id`` when its status is in ``states`` (see :func:`records.take`), run it, and
    return its final status; None when it was not taken (finished, cancelled, or another worker's).
    ``echo`` gets each line of the job's log as it is written."""
    worker = worker_name()
    with open_database(db_url) as database:
        with database.session() as session:
            if not records.take(session, job_id, worker, states):
                return None
            row = records.get(session, job_id)
            request, study, attempt = dict(row.request), row.study_name, row.attempts
        progress = JobProgress(database, job_id, None if echo is None else lambda line: echo(f"job {job_id}: {line}"))
        redact = Redactor.for_database(db_url)
        progress.say(f"taken by {worker}, attempt {attempt}"
                     + (f": resuming study {study}" if attempt > 1 else f": study {study}"))
        with _heartbeat(database, job_id):
            status, values = _tune(db_url, request, study, roots, progress)
        if "error" in values:
            values["error"] = redact(values["error"])
            progress.say(f"{status}: {values['error']}")
        else:
            progress.say(f"{status}" + (f": profile {values['profile_id']}" if values.get("profile_id") else ""))
        with database.session() as session:
            records.finish(session, job_id, status, progress=progress.state,
                           log_tail=[redact(line) for line in progress.tail.lines], **values)
        LOG.info("job %d %s%s", job_id, status, f": {values['error']}" if "error" in values else "")
        return status


def _tune(db_url: str | None, request: dict, study: str, roots: ModelRoots,
          progress: JobProgress) -> tuple[str, dict]:
    """Run the tune; ``(final status, the row's values)``."""
    try:
        options = checked_options({**request, "study": study}, db_url, roots, here=True)
        result = api.tune(options, progress)
        progress.state.update(builds=result.analysis.model_loads, study_status=result.status)
        profiles = api.list_profiles(db_url, study=study)
    except JobCancelled:
        return records.CANCELLED, {}
    except AutotuneError as exc:
        return records.FAILED, {"error": _one_line(str(exc))}
    except Exception as exc:  # noqa: BLE001 - a bug must fail the job, not the worker that runs the others
        return records.FAILED, {"error": _one_line(f"internal error: {type(exc).__name__}: {exc}")}
    if not profiles:
        return records.FAILED, {"error": "the study stored no profile: no configuration was measured (see the log)"}
    return records.SUCCEEDED, {"profile_id": profiles[0].id}


def _one_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "failed"


@contextmanager
def _heartbeat(database: Database, job_id: int) -> Iterator[None]:
    """Refresh the job's ``heartbeat_at`` every :data:`HEARTBEAT_S` while the block runs: a job
    whose heartbeat stops (its worker was killed) is taken again (:func:`records.requeue_stale`)."""
    def beat() -> None:
        try:
            with database.session() as session:
                records.beat(session, job_id)
        except AutotuneError as exc:  # the database away for a while: the next beat may pass
            LOG.warning("job %d: heartbeat failed: %s", job_id, exc)

    with repeating(beat, HEARTBEAT_S, name=f"autotune-job-{job_id}-heartbeat"):
        yield
