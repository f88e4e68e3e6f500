"""``autotune worker`` on SQLite (the loop ``autotune serve`` runs): it runs the queued jobs and exits
with --once, a job naming a file outside its model roots fails with one line before anything
runs, and bad options are one line with exit code 2."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from autotune import jobs
from autotune.cli import cli


def test_a_job_outside_the_roots_fails_in_one_line(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    outside = tmp_path / "target.safetensors"
    outside.write_bytes(b"not read: the roots refuse it first")
    wider = jobs.ModelRoots.of([str(tmp_path)])  # the server's roots held the file, the worker's do not
    queued = jobs.submit(sqlite_url, {"target": str(outside), "study": "outside"}, wider)
    cancelled = jobs.submit(sqlite_url, {})
    jobs.cancel_job(sqlite_url, cancelled.id)

    result = CliRunner().invoke(cli, ["worker", "--once", "--db", sqlite_url, "--model-root", str(tmp_path / "models")])
    assert result.exit_code == 0, result.output
    job = jobs.get_job(sqlite_url, queued.id)
    assert job.status == "failed" and job.attempts == 1 and job.profile_id is None
    assert job.error.startswith("target ") and "model roots" in job.error and "\n" not in job.error
    assert f"job {queued.id}: failed: target" in result.output
    assert jobs.get_job(sqlite_url, cancelled.id).started_at is None  # a cancelled job is never taken


def test_bad_worker_options_are_one_line(sqlite_url: str) -> None:
    for args, words in [(["--concurrency", "2"], "one at a time"), (["--concurrency", "0"], "0"),
                        (["--stalled-after", "0"], "stalled-after")]:
        result = CliRunner().invoke(cli, ["worker", "--once", "--db", sqlite_url, *args])
        assert result.exit_code == 2 and words in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
