"""Jobs on PostgreSQL with ``autotune worker`` processes (procrastinate's queue): a tiny tune POSTed,
run by a worker, its profile exported; two workers racing for many jobs take each once; a worker
killed with SIGKILL mid-job, then a new worker finishes it, resuming its study."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from autotune.jobs.roots import ModelRoots
from autotune.search import study_trials
from jobs_support import AUTH, FINAL, TOKEN, start_worker, tiny_request, wait_for_job, write_workload
from service_support import live_server

pytestmark = pytest.mark.postgres


@pytest.fixture
def served(postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[httpx.Client, Path]]:
    """A writable server on a fresh database, and the model root holding the tiny workload."""
    monkeypatch.setenv("AUTOTUNE_API_TOKEN", TOKEN)
    write_workload(tmp_path)
    with live_server(postgres_url, model_roots=ModelRoots.of([str(tmp_path)])) as client:
        yield client, tmp_path


def finish(worker: subprocess.Popen, timeout_s: float = 240) -> str:
    """The worker's stderr once it exited 0."""
    _out, err = worker.communicate(timeout=timeout_s)
    assert worker.returncode == 0, err
    return err


def test_a_worker_runs_a_job_and_its_profile_exports(postgres_url: str, served: tuple[httpx.Client, Path]) -> None:
    client, root = served
    job = client.post("/v1/tune", json=tiny_request(root / "tiny.jsonl"), headers=AUTH).json()
    assert job["status"] == "queued"
    log = finish(start_worker(postgres_url, root, "--once"))
    job = client.get(f"/v1/jobs/{job['id']}").json()
    assert job["status"] == "succeeded" and job["attempts"] == 1, job
    assert "trial 3/3" in log and job["progress"]["trials_done"] == 3
    exported = client.get(f"/v1/profiles/{job['profile_id']}/export?format=json")
    assert exported.status_code == 200 and exported.json()["profile"]["study"]["name"] == job["study"]


def test_two_workers_never_take_the_same_job(postgres_url: str, served: tuple[httpx.Client, Path]) -> None:
    client, root = served
    # Jobs that fail at once on the worker (their target file does not exist there, which the server,
    # queueing for other machines, does not check): many of them, so that the two workers race.
    ids = [client.post("/v1/tune", json={"target": str(root / "missing.safetensors"), "study": f"race-{i}"},
                       headers=AUTH).json()["id"] for i in range(12)]
    workers = [start_worker(postgres_url, root, "--once") for _ in range(2)]
    for worker in workers:
        finish(worker)
    jobs = [client.get(f"/v1/jobs/{job_id}").json() for job_id in ids]
    assert all(job["status"] == "failed" and job["attempts"] == 1 for job in jobs), jobs
    assert all("does not exist" in job["error"] for job in jobs)


@pytest.mark.slow  # two tune runs in worker processes and a stall to wait out: about a minute
def test_a_worker_killed_mid_job_loses_nothing(postgres_url: str, served: tuple[httpx.Client, Path]) -> None:
    client, root = served
    job_id = client.post("/v1/tune", json=tiny_request(root / "tiny.jsonl"), headers=AUTH).json()["id"]
    first = start_worker(postgres_url, root, "--stalled-after", "3")
    try:
        running = wait_for_job(client, job_id, lambda j: j["progress"].get("trials_done", 0) >= 1
                               or j["status"] in FINAL)
        assert running["status"] == "running", running
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=60)
    before = [row for row in study_trials(postgres_url, running["study"]) if row.state == "complete"]
    assert before and client.get(f"/v1/jobs/{job_id}").json()["status"] == "running"  # as the kill left it

    time.sleep(4)  # the dead worker's heartbeat is now older than --stalled-after
    log = finish(start_worker(postgres_url, root, "--once", "--stalled-after", "3"))
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["status"] == "succeeded" and job["attempts"] == 2, (job, log)
    assert any("resuming study" in line for line in job["log_tail"])
    after = study_trials(postgres_url, job["study"])
    assert [row for row in after if row.trial_number in {r.trial_number for r in before}] == before  # kept as they were
    assert len([row for row in after if row.state == "complete"]) == 3
