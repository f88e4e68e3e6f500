"""Runs one tuning worker in its own process, for the kill -9 and multi-worker tests.

Usage: python tune_process.py OPTIONS_PICKLE [PAUSE_AT]. Prints ``start <n> <label>`` and
``done <n> <label> <state>`` per trial (n = finished trials of the study), then ``result <trials
run by this process>`` (or, where the CLI would show a message, ``error: <message>`` and exit
code 2). With PAUSE_AT, it stops forever when a trial starts while PAUSE_AT trials are finished,
heartbeats still running: the test kills it there.
"""

from __future__ import annotations

import pickle
import sys
import time

from autotune.errors import AutotuneError
from autotune.search import TuneProgress, tune


def main() -> None:
    with open(sys.argv[1], "rb") as handle:
        options = pickle.load(handle)
    pause_at = int(sys.argv[2]) if len(sys.argv) > 2 else None

    def progress(update: TuneProgress) -> None:
        if update.finished is None:
            print(f"start {update.trials_done} {update.current}", flush=True)
            if update.trials_done == pause_at:
                time.sleep(3600)
        else:
            print(f"done {update.trials_done} {update.current} {update.finished}", flush=True)

    try:
        result = tune(options, progress)
    except AutotuneError as exc:  # as the CLI shows it: one line, exit code 2
        print(f"error: {exc}", flush=True)
        sys.exit(2)
    print(f"result {result.trials_this_run}", flush=True)


if __name__ == "__main__":
    main()
