"""Jobs on SQLite, end to end on a live server that runs them itself, one at a time: a tiny tune
POSTed, run, its profile exported; a job queued behind it cancelled before it starts; a running
job cancelled, stopping at its next trial boundary."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli import cli
from autotune.jobs.roots import ModelRoots
from jobs_support import AUTH, TOKEN, tiny_request, wait_for_job, write_workload
from service_support import live_server


def test_a_job_runs_in_the_server_and_its_profile_exports(sqlite_url: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOTUNE_API_TOKEN", TOKEN)
    workload = write_workload(tmp_path)
    with live_server(sqlite_url, model_roots=ModelRoots.of([str(tmp_path)])) as client:
        first = client.post("/v1/tune", json=tiny_request(workload), headers=AUTH).json()
        behind = client.post("/v1/tune", json=tiny_request(workload, study="behind"), headers=AUTH).json()
        # One at a time: the second waits while the first runs, and is cancelled before it starts.
        assert client.post(f"/v1/jobs/{behind['id']}/cancel", headers=AUTH).json()["status"] == "cancelled"

        job = wait_for_job(client, first["id"])
        assert job["status"] == "succeeded", job
        assert (job["study"], job["attempts"], job["error"]) == (f"job-{first['id']}", 1, None)
        assert job["progress"]["trials_done"] == job["progress"]["trials_total"] == 3
        assert job["progress"]["builds"] >= 1 and any("trial 3/3" in line for line in job["log_tail"])
        exported = client.get(f"/v1/profiles/{job['profile_id']}/export?format=vllm")
        assert exported.status_code == 200
        expected = CliRunner().invoke(cli, ["export", str(job["profile_id"]), "--format", "vllm", "-o",
                                            str(tmp_path / "serve.sh"), "--db", sqlite_url], catch_exceptions=False)
        assert expected.exit_code == 0 and exported.text == (tmp_path / "serve.sh").read_text()
        assert [s["name"] for s in client.get("/v1/studies").json()] == [job["study"]]
        assert client.get(f"/v1/jobs/{behind['id']}").json()["started_at"] is None

        # A running job stops at its next trial boundary once cancelled.
        running = client.post("/v1/tune", json=tiny_request(workload, study="stopped"), headers=AUTH).json()
        wait_for_job(client, running["id"], lambda j: j["status"] == "running")
        client.post(f"/v1/jobs/{running['id']}/cancel", headers=AUTH)
        stopped = wait_for_job(client, running["id"])
        assert stopped["status"] == "cancelled" and stopped["profile_id"] is None, stopped
