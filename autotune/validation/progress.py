"""Progress of ``autotune validate`` on stderr: a status line on a terminal, and on a pipe (CI logs,
``nohup``, a test) one line per event, prefixed with the time since the start::

    [0:00] validating profile 3 on vLLM 0.32.0: draft schedule c1:2, c2:1, draft@2, none at concurrency 1, 2, ...
    [0:15] schedule server (draft schedule c1:2, c2:1): still starting (15 s)
    [1:02] round 1/3 schedule c=1: 301.2 tok/s, TPOT p50 3.2 ms, occupancy 1.00, acceptance 0.812

A validation starts servers for minutes; before these lines it printed nothing on a pipe until it
finished or failed (issue 38).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console

from autotune import render
from autotune.render import PLAIN
from autotune.tune_progress import clock_time


@contextmanager
def validation_progress() -> Iterator[Callable[[str], None]]:
    """The progress callback: the spinner's text on a terminal, :class:`TimedLines` on a pipe."""
    if Console(stderr=True, **PLAIN).is_terminal:
        with render.status_spinner() as update:
            yield update
    else:
        yield TimedLines(sys.stderr)


class TimedLines:
    """Each message as a line of ``out``, after the time since this object was made."""

    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.clock = out, clock
        self.started = clock()

    def __call__(self, message: str) -> None:
        print(f"[{clock_time(self.clock() - self.started)}] {message}", file=self.out, flush=True)
