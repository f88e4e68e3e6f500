"""A worker killed with SIGKILL mid-study loses no finished trial; the next run fails its running
trial by heartbeat, retries it, and completes the study."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autotune.search import study_trials, tune

pytestmark = pytest.mark.slow  # a real tune killed with SIGKILL and rerun

SCRIPT = Path(__file__).with_name("tune_process.py")
REPO = Path(__file__).resolve().parents[2]



def screening(rows: list) -> list:
    """The screening rows (one per measured Optuna trial) of a study's stored rows."""
    return [row for row in rows if row.phase == "screening"]

def start_worker(options, tmp_path: Path, *extra: str) -> subprocess.Popen:
    path = tmp_path / f"options-{time.monotonic_ns()}.pickle"
    path.write_bytes(pickle.dumps(options))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, str(SCRIPT), str(path), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)


def read_until(process: subprocess.Popen, prefix: str) -> list[str]:
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip())
        if line.startswith(prefix):
            return lines
    raise AssertionError(f"worker ended before printing {prefix!r}: {lines}")


def test_sigkill_mid_study_loses_nothing_and_the_running_trial_is_retried(options, tmp_path) -> None:
    options = replace(options, n_trials=5)
    worker = start_worker(options, tmp_path, "3")
    try:
        read_until(worker, "start 3 ")
        os.kill(worker.pid, signal.SIGKILL)
    finally:
        worker.wait(timeout=60)
        worker.stdout.close()

    before = {row.trial_number: row for row in screening(study_trials(options.db_url, "tiny"))}
    assert len(before) == 3
    running = [t for t in optuna.load_study(study_name="tiny", storage=options.db_url).trials
               if t.state == TrialState.RUNNING]
    assert len(running) == 1
    killed = running[0]

    time.sleep(options.grace_period_s + 1)  # the killed worker's last heartbeat is now stale
    result = tune(options)

    trials = optuna.load_study(study_name="tiny", storage=options.db_url).trials
    assert trials[killed.number].state == TrialState.FAIL
    retry = next(t for t in trials if t.system_attrs.get("failed_trial") == killed.number)
    assert retry.params == killed.params and retry.state != TrialState.RUNNING
    after = {row.trial_number: row for row in screening(study_trials(options.db_url, "tiny"))}
    assert all(after[n] == before[n] for n in before)  # nothing finished was lost or changed
    assert killed.number not in after and retry.number in after
    assert (result.status, result.analysis.counts.total, len(after)) == ("complete", 5, 5)
