"""One background beat: an action repeated in a daemon thread while a block runs (the heartbeats
of a tuning trial, :meth:`autotune.search.ledger.Ledger.heartbeat`, and of a queued job,
:mod:`autotune.jobs.runner`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def repeating(action: Callable[[], None], interval_s: float, *, name: str, at_start: bool = False) -> Iterator[None]:
    """Run ``action`` every ``interval_s`` seconds in a daemon thread named ``name`` while the block
    runs (``at_start``: once at once too); the thread is stopped and joined when the block ends.
    ``action`` handles its own errors: one that escapes ends the beat."""
    stop = threading.Event()

    def loop() -> None:
        if at_start:
            action()
        while not stop.wait(interval_s):
            action()

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
