"""Bad requests against a live server: one JSON error shape, 404 for what is not stored, 422
naming the parameter, bounded requests and lists, and never the database URL, a password or a
traceback in an answer."""

from __future__ import annotations

import httpx
import pytest

from autotune.service.limits import MAX_LIMIT, MAX_URL_BYTES
from service_support import PLAN_TARGET, error_of, live_server


@pytest.mark.parametrize(("path", "params", "named"), [
    ("/v1/profiles/999", {}, "999"),
    ("/v1/profiles/999/export", {"format": "vllm"}, "999"),
    ("/v1/profiles/best", {"model": "no-such-model"}, "no-such-model"),
    ("/v1/profiles/best", {"model": "tiny-target", "hardware": "no-such-gpu"}, "no-such-gpu"),
    ("/v1/profiles", {"study": "no-such-study"}, "no-such-study"),
    ("/v1/studies/no-such-study/trials", {}, "no-such-study"),
    ("/v1/studies/no-such-study/report", {}, "no-such-study"),
    ("/v1/plan", {"hardware": "no-such-gpu", "model": PLAN_TARGET}, "no-such-gpu"),
    ("/v1/plan", {"hardware": "h200", "model": "no-such-model"}, "no-such-model"),
])
def test_what_is_not_stored_is_404_with_a_message(client: httpx.Client, path: str, params: dict, named: str) -> None:
    assert named in error_of(client.get(path, params=params), 404)


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/v1/profiles/best", {}, "model"),
    ("/v1/profiles/best", {"model": "tiny-target", "concurrency": "four"}, "concurrency"),
    ("/v1/profiles/best", {"model": "tiny-target", "concurrency": 0}, "concurrency"),
    ("/v1/profiles/best", {"model": "tiny-target", "slo_tpot_ms": -1}, "slo_tpot_ms"),
    ("/v1/profiles", {"method": "magic"}, "method"),
    ("/v1/profiles", {"limit": MAX_LIMIT + 1}, "limit"),
    ("/v1/profiles/abc", {}, "profile_id"),
    ("/v1/profiles/1/export", {"format": "docx"}, "format"),
    ("/v1/plan", {"hardware": "h200", "model": PLAN_TARGET, "tp": 0}, "tp"),
    ("/v1/plan", {"hardware": "h200", "model": PLAN_TARGET, "dtype": "int3"}, "dtype"),
    ("/v1/studies/" + "s" * 300 + "/trials", {}, "name"),
])
def test_an_invalid_parameter_is_422_naming_it(client: httpx.Client, path: str, params: dict, field: str) -> None:
    response = client.get(path, params=params)
    assert repr(field) in error_of(response, 422)
    assert response.json()["error"]["field"] == field


def test_the_library_refuses_what_the_declarations_let_through(client: httpx.Client, ids: dict[str, int]) -> None:
    """A value only the library can judge is a 422 with its one-line message, as on the CLI, naming the parameter."""
    plan = client.get("/v1/plan", params={"hardware": "h200", "model": PLAN_TARGET, "concurrencies": "1,x"})
    assert "--concurrency" in error_of(plan, 422) and plan.json()["error"]["field"] == "concurrencies"
    export = client.get(f"/v1/profiles/{ids['cpu']}/export", params={"trtllm_version": "0.1"})
    assert "TensorRT-LLM version" in error_of(export, 422) and export.json()["error"]["field"] == "trtllm_version"


def test_unknown_routes_and_methods_have_the_error_shape(client: httpx.Client) -> None:
    error_of(client.get("/v1/nothing"), 404)
    error_of(client.post("/v1/profiles"), 405)
    error_of(client.delete("/v1/profiles/1"), 405)


def test_requests_are_bounded(client: httpx.Client) -> None:
    error_of(client.get("/v1/profiles", params={"model": "m" * MAX_URL_BYTES}), 414)
    error_of(client.request("GET", "/v1/profiles", content=b"x" * (1 << 20)), 413)


def test_no_answer_names_the_database(client: httpx.Client, stored: tuple[str, dict[str, int]]) -> None:
    url = stored[0]
    path = url.removeprefix("sqlite:///")
    answers = [client.get(p) for p in ("/healthz", "/openapi.json", "/v1/profiles/999", "/v1/studies/x/trials",
                                       "/v1/profiles/best?model=x", "/v1/plan?hardware=x&model=y", "/metrics")]
    for answer in answers:
        assert path not in answer.text and "sqlite" not in answer.text.lower(), answer.text


def test_an_unreachable_database_is_503_without_url_password_or_traceback(
        capfd: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture) -> None:
    secret = "s3cret-pw"
    url = f"postgresql://autotune:{secret}@127.0.0.1:9/nowhere"  # port 9 (discard): nobody listens
    with live_server(url) as client:
        answers = [client.get(p) for p in ("/healthz", "/v1/profiles", "/v1/studies", "/v1/profiles/1/export")]
    for answer in answers:
        assert "unreachable" in error_of(answer, 503)
        assert secret not in answer.text and "127.0.0.1:9" not in answer.text and "postgresql" not in answer.text
    logged = capfd.readouterr()
    everything = logged.out + logged.err + caplog.text
    assert "DatabaseError" in everything  # the log says what failed ...
    assert secret not in everything and "autotune:" not in everything  # ... without the URL or password
    assert "Traceback" not in everything
