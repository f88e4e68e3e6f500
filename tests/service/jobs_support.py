"""Helpers of the job tests: the token, a tiny tune request (the embedded engine and the built-in
models: none and n-gram at depths 1 and 2, concurrency 1, the grid, no confirmation, two short
requests: three trials of a second or so), ``autotune worker`` as a process, and waiting for a job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
TOKEN = "job-test-token-5f0c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FINAL = ("succeeded", "failed", "cancelled")


def tiny_request(workload: Path, **changes: Any) -> dict[str, Any]:
    """A tune of three trials on ``workload`` (see the module doc)."""
    return {"method": ["none", "ngram"], "max_depth": 2, "concurrencies": [1], "sampler": "grid", "no_confirm": True,
            "workload": str(workload), "trial_timeout": 120, **changes}


def write_workload(folder: Path) -> Path:
    """Two short requests as a JSONL workload in ``folder``."""
    path = folder / "tiny.jsonl"
    path.write_text("".join(json.dumps(request) + "\n" for request in
                            ({"prompt": "def f(x):", "max_tokens": 6}, {"prompt": "import os", "max_tokens": 4})))
    return path


def wait_for_job(client: httpx.Client, job_id: int, done: Any = None, timeout_s: float = 240) -> dict[str, Any]:
    """Job ``job_id`` once ``done(job)`` holds (default: it finished)."""
    done = done or (lambda job: job["status"] in FINAL)
    deadline = time.monotonic() + timeout_s
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if done(job):
            return job
        assert time.monotonic() < deadline, f"job {job_id} did not get there in {timeout_s} s: {job}"
        time.sleep(0.5)


def start_worker(db_url: str, root: Path, *args: str) -> subprocess.Popen:
    """``autotune worker`` on ``db_url`` with model root ``root``, as a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "autotune.cli", "worker", "--db", db_url, "--model-root", str(root),
                             *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
