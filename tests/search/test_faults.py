"""The fault matrix: engine workers that crash, hang or run out of memory in the middle of a trial,
and the tuner itself killed with SIGKILL during a trial and during the confirmation phase. Each case
ends by counting the study's rows: every finished trial stored once, states and reasons as they
happened, and the study finished with exactly the trials asked for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

import faulty_engine
from faulty_engine import faults  # noqa: F401 - a fixture
from autotune.search import list_studies, study_trials, tune
from autotune.search.budget import counted_trials

pytestmark = pytest.mark.slow  # whole studies with faulty workers, on both backends, and kill -9 of real tune processes

FAULTY = "ngram@1 c2"


def small(options, db_url: str):
    """Four points (the baselines and ngram@1 at concurrency levels 1 and 2), each measured once in grid
    order; no confirmation: these cases are about screening trials."""
    return replace(options, db_url=db_url, methods=("ngram",), max_depth=1, sampler="grid", n_trials=None,
                   confirm=False, trial_timeout_s=10)


def assert_intact(options, expected: list[tuple[str, str]]) -> list:
    """The study's screening rows and Optuna trials agree one to one, the rows are ``expected``
    ((label, state) in trial order) and the study is complete. Returns the rows in trial order."""
    rows = sorted((row for row in study_trials(options.db_url, options.study_name) if row.phase == "screening"),
                  key=lambda row: row.trial_number)
    assert [(row.label, row.state) for row in rows] == expected
    storage = options.db_url.replace("postgresql://", "postgresql+psycopg://")
    trials = optuna.load_study(study_name=options.study_name, storage=storage).trials
    assert [t.number for t in counted_trials(trials)] == [row.trial_number for row in rows]
    state = {"complete": TrialState.COMPLETE, "failed": TrialState.FAIL, "infeasible": TrialState.PRUNED}
    for row in rows:
        assert trials[row.trial_number].state == state[row.state]
        assert trials[row.trial_number].user_attrs["autotune_state"] == row.state
    assert [s.status for s in list_studies(options.db_url)] == ["complete"]
    return rows


SEGFAULT = ("segfault", "crash", "the worker died from signal SIGSEGV")


# Every fault on SQLite; on PostgreSQL one crash (the backend only stores what the fault decided).
@pytest.mark.parametrize(
    ("db", "fault", "kind", "reason"),
    [
        ("sqlite", "exit", "crash", "the worker exited with code 3; last output: native library aborted"),
        ("sqlite", *SEGFAULT),
        ("sqlite", "hang", "timeout", "no answer within 10 s; the worker was killed"),
        ("sqlite", "oom", "oom", "can't allocate memory"),
        pytest.param("postgres", *SEGFAULT, marks=pytest.mark.postgres),
    ],
)
def test_a_worker_fault_mid_trial_fails_that_trial_and_the_study_goes_on(options, faults, request, db, fault, kind,
                                                                          reason) -> None:
    options = small(options, request.getfixturevalue(f"{db}_url"))
    log_dir = faults({FAULTY: [fault]})

    result = tune(options)

    rows = assert_intact(options, [("none c1", "complete"), ("none c2", "complete"), ("ngram@1 c1", "complete"),
                                   (FAULTY, "failed")])
    failed = rows[-1]
    assert failed.extra["failure"] == kind and reason in failed.reason, failed.reason
    assert faulty_engine.calls(log_dir, FAULTY) == 1  # the budget held no room for a retry
    assert (result.status, result.analysis.counts.failed, result.analysis.counts.complete) == ("complete", 1, 3)
    assert result.profile is not None


# -- the tuner killed with SIGKILL --------------------------------------------------------------------

CLI = Path(__file__).with_name("faulty_cli.py")
REPO = Path(__file__).resolve().parents[2]


def tune_command(options, workload_file: Path) -> list[str]:
    """``autotune tune`` for the four-point study of :func:`small`, with a short confirmation."""
    return [sys.executable, str(CLI), "tune", "--db", options.db_url, "--study", options.study_name,
            "--target", options.target, "--method", "ngram", "--max-depth", "1", "--concurrency", "1,2",
            "--sampler", "grid", "--trials", "4", "--trial-timeout", "60", "--workload", str(workload_file),
            "--max-repetitions", "3", "--confirm-seconds", "1", "--json"]


def start_tune(command: list[str], plan: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CLI.parent), str(REPO)]), faulty_engine.PLAN_ENV: str(plan)}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)


def kill_when_held(process: subprocess.Popen, log_dir: Path) -> None:
    """SIGKILL ``process`` once the engine holds (a trial or a confirmation is under way)."""
    try:
        while not (log_dir / "holding").exists():
            assert process.poll() is None, f"autotune tune ended before the hold: {process.communicate()}"
            time.sleep(0.1)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.communicate(timeout=60)
    held = int((log_dir / "holding").read_text())
    for _ in range(100):  # the worker dies with its parent (PR_SET_PDEATHSIG)
        if not Path(f"/proc/{held}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{held}").exists()


def snapshot(options) -> tuple[list, list]:
    """The stored screening rows and the study's Optuna trials."""
    rows = [row for row in study_trials(options.db_url, options.study_name) if row.phase == "screening"]
    storage = options.db_url.replace("postgresql://", "postgresql+psycopg://")
    return rows, optuna.load_study(study_name=options.study_name, storage=storage).trials


# Each phase on one backend and each backend in one phase (pairwise: a run is ~30 s): the phase decides
# what is running when the kill comes, the backend how its locks and stale trials are found again.
@pytest.mark.parametrize(("db", "held", "faults_by_label", "finished_before"), [
    ("sqlite", "trial", {FAULTY: ["hold"]}, 3),  # killed while measuring the fourth trial
    pytest.param("postgres", "confirmation", {"none c1": [None, "hold"]}, 4,  # killed in concurrency 1's confirmation
                 marks=pytest.mark.postgres),
])
def test_the_tuner_killed_mid_study_loses_nothing_and_a_rerun_completes(options, workload, tmp_path, request, db,
                                                                        held, faults_by_label, finished_before) -> None:
    options = replace(options, db_url=request.getfixturevalue(f"{db}_url"))
    workload_file = tmp_path / "workload.jsonl"
    workload_file.write_text("".join(json.dumps({"prompt": r.prompt, "max_tokens": r.max_tokens}) + "\n"
                                     for r in workload.requests))
    log_dir = tmp_path / "engine-log"
    plan = faulty_engine.write_plan(tmp_path / "faults.json", log_dir, faults_by_label)
    command = tune_command(options, workload_file)

    kill_when_held(start_tune(command, plan), log_dir)

    rows, trials = snapshot(options)
    assert len(rows) == finished_before and all(row.state == "complete" for row in rows)
    assert [t.number for t in trials if t.state == TrialState.COMPLETE] == [row.trial_number for row in rows]
    assert len([t for t in trials if t.state == TrialState.RUNNING]) == 4 - finished_before
    assert not [row for row in study_trials(options.db_url, options.study_name) if row.phase == "confirmation"]
    assert [s.status for s in list_studies(options.db_url)] == ["confirming" if held == "confirmation" else "running"]

    rerun = start_tune(command, plan)  # the hold was used up: the engine behaves from now on
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err

    after = assert_intact(options, [("none c1", "complete"), ("none c2", "complete"), ("ngram@1 c1", "complete"),
                                    (FAULTY, "complete")])
    assert after[:finished_before] == rows  # nothing finished was lost or changed
    report = json.loads(out)
    assert report["status"] == "complete" and report["counts"]["total"] == 4 and report["profile"] is not None
    assert any(row["phase"] == "confirmation" for row in report["trials"])
