"""The write routes' guards, on a live server: no token header is 401, a wrong one 403, a server
without AUTOTUNE_API_TOKEN read-only (403 saying so); an invalid option, an unknown one or a file
outside the model roots is 422 naming the field; a body too large is 413, declared or streamed.
None of them writes a job; the token never shows in a response."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from autotune.jobs.roots import ModelRoots
from autotune.service.limits import MAX_BODY_BYTES
from jobs_support import AUTH, TOKEN, tiny_request, write_workload
from service_support import error_of, live_server


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    return tmp_path / "models"


@pytest.fixture
def client(sqlite_url: str, roots: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[httpx.Client]:
    """A writable server that queues but runs nothing (run_jobs=False): the jobs stay queued."""
    monkeypatch.setenv("AUTOTUNE_API_TOKEN", TOKEN)
    with live_server(sqlite_url, model_roots=ModelRoots.of([str(roots)]), run_jobs=False) as http:
        yield http


def job_count(client: httpx.Client) -> int:
    return int(client.get("/v1/jobs").headers["X-Total-Count"])


def test_writes_need_the_token(client: httpx.Client) -> None:
    for path in ("/v1/tune", "/v1/jobs/1/cancel"):
        missing = client.post(path, json={})
        assert "bearer" in error_of(missing, 401).lower() and missing.headers["WWW-Authenticate"] == "Bearer"
        error_of(client.post(path, json={}, headers={"Authorization": "Basic " + TOKEN}), 401)
        wrong = client.post(path, json={}, headers={"Authorization": "Bearer " + TOKEN + "x"})
        assert TOKEN not in error_of(wrong, 403)
    assert job_count(client) == 0
    assert client.get("/healthz").json()["read_only"] is False


def test_a_server_without_a_token_is_read_only(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOTUNE_API_TOKEN", raising=False)
    with live_server(sqlite_url, run_jobs=False) as client:
        assert "read-only" in error_of(client.post("/v1/tune", json={}, headers=AUTH), 403)
        assert "read-only" in error_of(client.post("/v1/jobs/1/cancel", headers=AUTH), 403)
        assert client.get("/healthz").json()["read_only"] is True
        assert job_count(client) == 0


@pytest.mark.parametrize(("body", "field"), [
    ({"max_depth": 0}, "max_depth"),
    ({"concurrencies": [1, -2]}, "concurrencies"),  # the list is named, not its item
    ({"method": ["warp"]}, "method"),
    ({"slo_percentile": 75}, "slo_percentile"),
    ({"no_such_option": 1}, "no_such_option"),
    ({"trials": "many"}, "trials"),
])
def test_an_invalid_option_is_422_naming_it_and_writes_nothing(client: httpx.Client, body: dict, field: str) -> None:
    answer = client.post("/v1/tune", json=body, headers=AUTH)
    assert repr(field) in error_of(answer, 422) and answer.json()["error"]["field"] == field
    assert job_count(client) == 0


def test_batch_sizes_is_still_read_as_concurrencies(client: httpx.Client, roots: Path) -> None:
    """The body's name before issue 38: read, and queued under the new one; next to it, a 422 naming it."""
    both = client.post("/v1/tune", json={"concurrencies": [1], "batch_sizes": [1]}, headers=AUTH)
    assert "old name" in error_of(both, 422) and both.json()["error"]["field"] == "batch_sizes"
    bad = client.post("/v1/tune", json={"batch_sizes": [0]}, headers=AUTH)
    assert error_of(bad, 422) and bad.json()["error"]["field"] == "batch_sizes"
    assert job_count(client) == 0

    request = tiny_request(write_workload(roots))
    old = {("batch_sizes" if key == "concurrencies" else key): value for key, value in request.items()}
    queued = client.post("/v1/tune", json=old, headers=AUTH)
    assert queued.status_code == 202, queued.text
    assert queued.json()["request"] == request  # as if it had said concurrencies


def test_what_only_the_tune_checks_is_422_naming_the_field_too(client: httpx.Client, roots: Path) -> None:
    (roots / "folder").mkdir()
    for body, words, field in [({"sampler": "annealing"}, "sampler", "sampler"),
                               ({"objective": "latency"}, "objective", "objective"),
                               ({"draft": ["builtin", "builtin"]}, "listed twice", "draft"),
                               ({"engine": "bogus"}, "unknown engine", "engine"),
                               ({"max_depth": 2, "target": str(roots / "missing.safetensors")}, "does not exist",
                                "target"),
                               ({"target": str(roots / "folder")}, "is a folder", "target")]:
        answer = client.post("/v1/tune", json=body, headers=AUTH)
        assert words in error_of(answer, 422) and answer.json()["error"]["field"] == field, body
    assert job_count(client) == 0


def test_a_body_that_is_not_json_names_the_body(client: httpx.Client) -> None:
    answer = client.post("/v1/tune", content=b'{"max_depth": 2,', headers={**AUTH, "Content-Type": "application/json"})
    assert "not valid JSON" in error_of(answer, 422) and answer.json()["error"]["field"] == "body"
    for body in (b"[1]", b'"text"'):
        answer = client.post("/v1/tune", content=body, headers={**AUTH, "Content-Type": "application/json"})
        assert error_of(answer, 422) and answer.json()["error"]["field"] == "body"
    assert job_count(client) == 0


def test_without_model_roots_no_answer_tells_whether_a_path_exists(sqlite_url: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A server given no --model-root (and no AUTOTUNE_MODEL_ROOTS) refuses every path before it
    looks at it: a folder, a file and nothing at all get the same answer."""
    monkeypatch.setenv("AUTOTUNE_API_TOKEN", TOKEN)
    monkeypatch.delenv("AUTOTUNE_MODEL_ROOTS", raising=False)
    (tmp_path / "file.safetensors").write_bytes(b"x")
    with live_server(sqlite_url, run_jobs=False) as client:
        answers = []
        for name in ("", "file.safetensors", "nothing.safetensors"):
            path = str(tmp_path / name)
            answer = client.post("/v1/tune", json={"target": path}, headers=AUTH)
            answers.append(error_of(answer, 422).replace(path, "PATH"))
            assert answer.json()["error"]["field"] == "target"
        assert len(set(answers)) == 1 and "model roots" in answers[0], answers
        assert job_count(client) == 0


def test_a_file_outside_the_model_roots_is_422_naming_the_field(client: httpx.Client, roots: Path,
                                                                tmp_path: Path) -> None:
    outside = write_workload(tmp_path)
    (roots / "escape.jsonl").symlink_to(outside)
    for body, field in [({"workload": str(outside)}, "workload"), ({"workload": str(roots / "escape.jsonl")}, "workload"),
                        ({"target": str(roots / ".." / "tiny.jsonl")}, "target"), ({"draft": ["/etc/passwd"]}, "draft")]:
        answer = client.post("/v1/tune", json=body, headers=AUTH)
        assert "model roots" in error_of(answer, 422) and answer.json()["error"]["field"] == field
    assert job_count(client) == 0


def test_a_body_too_large_is_413_declared_or_streamed(client: httpx.Client) -> None:
    padding = {"study": "x" * (MAX_BODY_BYTES + 1)}
    error_of(client.post("/v1/tune", json=padding, headers=AUTH), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer encoding
        yield b'{"study": "'
        for _ in range(MAX_BODY_BYTES // 1024 + 1):
            yield b"x" * 1024
        yield b'"}'

    error_of(client.post("/v1/tune", content=chunks(), headers={**AUTH, "Content-Type": "application/json"}), 413)
    assert job_count(client) == 0


def test_a_queued_job_is_cancelled_at_once(client: httpx.Client, roots: Path) -> None:
    queued = client.post("/v1/tune", json=tiny_request(write_workload(roots)), headers=AUTH)
    assert queued.status_code == 202 and queued.headers["Location"] == f"/v1/jobs/{queued.json()['id']}"
    job = queued.json()
    assert (job["status"], job["study"], job["request"]["max_depth"]) == ("queued", f"job-{job['id']}", 2)
    cancelled = client.post(f"/v1/jobs/{job['id']}/cancel", headers=AUTH).json()
    assert cancelled["status"] == "cancelled" and cancelled["finished_at"]
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=AUTH).json()["status"] == "cancelled"  # idempotent
    error_of(client.post("/v1/jobs/999/cancel", headers=AUTH), 404)
    error_of(client.get("/v1/jobs/999"), 404)
    assert [j["id"] for j in client.get("/v1/jobs?status=cancelled").json()] == [job["id"]]
    error_of(client.get("/v1/jobs?status=lost"), 422)
