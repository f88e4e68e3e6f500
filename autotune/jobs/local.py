"""Jobs on SQLite: no queue server, so the job table is the queue and ``autotune serve`` runs the
jobs itself, one at a time, in a thread (:class:`LocalRunner`); ``autotune worker`` on the same
file runs the same loop (:func:`work`).

Taking a job is one conditional UPDATE (``queued`` -> ``running``): SQLite serialises writers,
so two loops on one file never take the same job. A job whose heartbeat stopped (its process was
killed) is queued again before the next job is taken, and its study resumes.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from autotune.jobs import records
from autotune.jobs.roots import ModelRoots
from autotune.jobs.runner import HEARTBEAT_S, run_job
from autotune.store import open_database
from autotune.store.redact import Redactor

LOG = logging.getLogger("autotune.jobs")
POLL_S = 1.0  # how often an idle loop looks for a queued job
STALE_AFTER_S = 6 * HEARTBEAT_S  # a running job silent this long lost its process


def work(db_url: str | None, roots: ModelRoots, *, once: bool = False, stale_after_s: float = STALE_AFTER_S,
         echo: Callable[[str], None] | None = None, stop: threading.Event | None = None) -> None:
    """Run queued jobs one at a time until ``stop`` is set (``once``: until none is queued). The
    jobs whose process died are queued again first, and then every quarter of ``stale_after_s``
    (not at every poll: on SQLite an UPDATE takes the database's write lock even when it matches
    nothing)."""
    stop = stop or threading.Event()
    checked = -math.inf
    with open_database(db_url) as database:
        while not stop.is_set():
            with database.session() as session:
                if time.monotonic() - checked >= stale_after_s / 4:
                    checked = time.monotonic()
                    if records.requeue_stale(session, stale_after_s):
                        LOG.info("queued again the jobs whose worker stopped sending heartbeats")
                job_id = records.next_queued(session)
            if job_id is not None:
                run_job(database.url, job_id, roots, echo=echo)  # None: another loop took it first
            elif once:
                return
            else:
                stop.wait(POLL_S)


class LocalRunner:
    """``autotune serve``'s job thread on SQLite (see the module doc)."""

    def __init__(self, db_url: str | None, roots: ModelRoots) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(db_url, roots), name="autotune-jobs", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        """Take no new job. A job under way is not waited for: it stays running, its heartbeat stops,
        and the next server on this database runs it again (its study resumes)."""
        self.stop.set()

    def _run(self, db_url: str | None, roots: ModelRoots) -> None:
        try:
            work(db_url, roots, stop=self.stop)
        except Exception as exc:  # noqa: BLE001 - say why jobs stopped; the reads go on
            LOG.error("the job runner stopped: %s: %s", type(exc).__name__, Redactor.for_database(db_url)(str(exc)))
