"""Progress of ``autotune tune`` on stderr: a bar on a terminal, plain lines on a pipe.

A study can run for many minutes; on a pipe (CI logs, ``nohup``) a bar draws nothing, so there each
phase, each finished trial and each note (a disturbed pass measured again) gets one line of its own,
prefixed with the time since the start::

    [0:00] timing step costs for 3 proposer(s) at concurrency levels 1, 2
    [0:41] trial 3/12 draft@2 c1: complete, 812.3 tok/s (predicted 790.0) · best ... · at most 9 more, ~1:30
    [0:44] draft@3 c1: other processes use 1.80 of 2 cores: re-measuring (1 of 2)

A trial's start is not a line (its end follows), so a study of N trials prints about N lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console

from autotune.render import PLAIN


@contextmanager
def tune_progress(enabled: bool = True) -> Iterator[Callable[[Any], None]]:
    """The progress callback for :func:`autotune.search.tune`: a bar when stderr is a terminal,
    :class:`ProgressLines` otherwise, nothing when not ``enabled`` (``--quiet``, ``--json``)."""
    console = Console(stderr=True, **PLAIN)
    if not enabled:
        yield lambda _update: None
    elif console.is_terminal:
        with _bar(console) as update:
            yield update
    else:
        yield ProgressLines(sys.stderr)


@contextmanager
def _bar(console: Console) -> Iterator[Callable[[Any], None]]:
    """Trials done of total, the current step and the best so far, and the time remaining."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console) as bar:
        task = bar.add_task("tuning", total=None)

        def update(event: Any) -> None:  # an autotune.search.TuneProgress
            best = f" · best {event.best}" if getattr(event, "best", None) else ""
            bar.update(task, completed=event.trials_done, total=event.trials_total,
                       description=f"{event.current or 'tuning'}{best}")

        yield update


class ProgressLines:
    """The pipe's progress: one line per phase, finished trial and note (see the module doc).
    ``clock`` is injectable so that tests need not wait."""

    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.clock = clock
        self.started = clock()
        self.trial_started: float | None = None
        self.trial_seconds: list[float] = []  # the trials this process measured, for the ETA

    def __call__(self, event: Any) -> None:  # an autotune.search.TuneProgress
        now = self.clock()
        if event.kind != "trial":
            self._print(now, event.current)
        elif event.finished is None:
            self.trial_started = now
        else:
            if self.trial_started is not None:
                self.trial_seconds.append(now - self.trial_started)
                self.trial_started = None
            self._print(now, self._trial_line(event))

    def _trial_line(self, event: Any) -> str:
        line = f"trial {event.trials_done}/{event.trials_total} {event.current}: {event.finished}"
        if event.tokens_per_s is not None:
            line += f", {event.tokens_per_s:.1f} tok/s"
            if event.predicted_tokens_per_s is not None:
                line += f" (predicted {event.predicted_tokens_per_s:.1f})"
        if event.reason:
            line += f" ({event.reason})"
        if event.best:
            line += f" · best {event.best}"
        eta = self.eta_s(event)
        if eta is not None:
            line += f" · at most {event.trials_total - event.trials_done} more, ~{clock_time(eta)}"
        return line

    def eta_s(self, event: Any) -> float | None:
        """Seconds the trials left should take at this process's mean so far (None: none left, or
        none measured yet). An upper bound: the model-guided search stops once nothing it has not
        measured can win."""
        left = max(0, event.trials_total - event.trials_done)
        if not (left and self.trial_seconds):
            return None
        return sum(self.trial_seconds) / len(self.trial_seconds) * left

    def _print(self, now: float, text: str) -> None:
        print(f"[{clock_time(now - self.started)}] {text}", file=self.out, flush=True)


def clock_time(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
