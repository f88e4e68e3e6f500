"""A running job's progress callback: what the tune reports goes into the job's row (phase, trials
done of total, the best so far, when the trial under way started and how long this attempt's
trials took on average, from which a reader computes the ETA (:mod:`.eta`), and the last lines of
the log ``autotune tune`` prints on a pipe), and a cancellation asked for meanwhile stops the tune
at that point.

The tune calls back when a phase begins and when a trial starts or ends, so a cancel is seen at
the next trial boundary: :class:`JobCancelled` raised from the callback makes the tuner stop its
engine worker and mark the trial under way as abandoned (it is queued again in the study, which
``autotune tune --study NAME`` or a new job with the same study resumes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from autotune.errors import AutotuneError
from autotune.jobs import records
from autotune.store import Database
from autotune.store.tables import utcnow
from autotune.tune_progress import ProgressLines

LOG_TAIL_LINES = 40


class JobCancelled(AutotuneError):
    """The job's cancellation was asked while it ran."""


class LogTail:
    """A text sink keeping its last :data:`LOG_TAIL_LINES` lines (what ProgressLines prints)."""

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self.lines: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self.echo = echo
        self._partial = ""

    def write(self, text: str) -> int:
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            self.add(line)
        return len(text)

    def add(self, line: str) -> None:
        self.lines.append(line)
        if self.echo is not None:
            self.echo(line)

    def flush(self) -> None:
        """Nothing buffered beyond a partial line (the sink is written whole lines)."""


class JobProgress:
    """The progress callback of job ``job_id``'s tune (see the module doc)."""

    def __init__(self, database: Database, job_id: int, echo: Callable[[str], None] | None = None) -> None:
        self.database = database
        self.job_id = job_id
        self.tail = LogTail(echo)
        self.lines = ProgressLines(self.tail)
        self.state: dict[str, Any] = {"phase": "starting", "current": None, "trials_done": 0, "trials_total": None,
                                      "best": None, "builds": None, "trial_started_at": None, "trial_mean_s": None}

    def __call__(self, event: Any) -> None:  # an autotune.search.TuneProgress
        self.lines(event)  # first: it times the trial that just ended
        if event.kind == "phase":
            self.state["phase"] = event.current
        elif event.kind == "trial":
            self.state["phase"] = "screening"
            self.state["trial_started_at"] = utcnow().isoformat() if event.finished is None else None
        measured = self.lines.trial_seconds
        self.state.update(current=event.current, trials_done=event.trials_done, trials_total=event.trials_total,
                          best=event.best or self.state["best"],
                          builds=event.builds if event.builds is not None else self.state["builds"],
                          trial_mean_s=sum(measured) / len(measured) if measured else None)
        # A note comes from within a measurement: only a phase or a trial's start or end is a boundary.
        if self.save() and event.kind != "note":
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def say(self, line: str) -> None:
        """A line of the job's own (taken, resumed, failed) into the log tail."""
        self.tail.add(line)

    def save(self) -> bool:
        """Store the progress and log tail; True when the job's cancellation was asked."""
        with self.database.session() as session:
            return records.record_progress(session, self.job_id, self.state, list(self.tail.lines))
