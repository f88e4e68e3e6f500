"""Every read route against a live server: the JSON is what the CLI prints with ``--json`` for the
same question, the export the bytes ``autotune export`` writes, the report the page
``autotune report`` writes and its plots the PNG files it writes; HEAD wherever GET; the icon and
the API docs from this server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

import profile_factory as factory
from autotune.serving import FORMATS
from service_support import PLAN_TARGET, cli_output, error_of


@pytest.fixture(scope="module")
def db(stored: tuple[str, dict[str, int]]) -> str:
    return stored[0]


def cli_json(*args: str) -> object:
    return json.loads(cli_output(*args, "--json"))


def test_profiles_list_is_the_cli_json(client: httpx.Client, db: str) -> None:
    response = client.get("/v1/profiles")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.json() == cli_json("profiles", "list", "--db", db)
    assert response.headers["x-total-count"] == "4"
    filtered = client.get("/v1/profiles", params={"model": "tiny-target", "method": "mtp", "hardware": factory.H100[1]})
    assert filtered.json() == cli_json("profiles", "list", "--model", "tiny-target", "--method", "mtp",
                                       "--hardware", factory.H100[1], "--db", db)


def test_limit_bounds_a_list(client: httpx.Client) -> None:
    every = client.get("/v1/profiles").json()
    first = client.get("/v1/profiles", params={"limit": 1})
    assert first.json() == every[:1] and first.headers["x-total-count"] == str(len(every))


def test_best_profile_is_the_cli_json(client: httpx.Client, db: str) -> None:
    query = {"model": "tiny-target", "hardware": factory.H100[0], "concurrency": 4, "slo_tpot_ms": 1000}
    response = client.get("/v1/profiles/best", params=query)
    assert response.status_code == 200, response.text
    assert response.json() == cli_json("profiles", "best", "--model", "tiny-target", "--hardware", factory.H100[0],
                                       "--concurrency", "4", "--slo-tpot-ms", "1000", "--db", db)
    assert response.json()["operating_point"]["concurrency"] == 4


def test_best_profile_on_any_machine_by_default(client: httpx.Client) -> None:
    best = client.get("/v1/profiles/best", params={"model": "tiny-target"}).json()
    assert best["request"]["hardware"] is None and best["profile"]["hardware"] == factory.H100[0]


def test_show_profile_is_the_cli_json(client: httpx.Client, db: str, ids: dict[str, int]) -> None:
    profile_id = ids["h100-old"]
    response = client.get(f"/v1/profiles/{profile_id}")
    assert response.json() == cli_json("profiles", "show", str(profile_id), "--db", db)
    assert response.json()["id"] == profile_id


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_is_the_bytes_the_cli_writes(client: httpx.Client, db: str, ids: dict[str, int], fmt: str,
                                            tmp_path: Path) -> None:
    profile_id = str(ids["h100-old"])
    written = tmp_path / "export"
    cli_output("export", profile_id, "--format", fmt, "-o", str(written), "--db", db)
    response = client.get(f"/v1/profiles/{profile_id}/export", params={"format": fmt})
    assert response.status_code == 200, response.text
    assert response.content == written.read_bytes()
    assert response.headers["content-disposition"].startswith('attachment; filename="')


def test_export_for_another_trtllm_version(client: httpx.Client, db: str, ids: dict[str, int], tmp_path: Path) -> None:
    profile_id = str(ids["h100-new"])
    written = tmp_path / "main.yaml"
    cli_output("export", profile_id, "--trtllm-version", "main", "-o", str(written), "--db", db)
    response = client.get(f"/v1/profiles/{profile_id}/export", params={"trtllm_version": "main"})
    assert response.content == written.read_bytes()


def test_studies_and_trials_are_the_cli_json(client: httpx.Client, db: str) -> None:
    assert client.get("/v1/studies").json() == cli_json("studies", "--db", db)
    trials = client.get("/v1/studies/h100-old/trials", params={"limit": 1000})
    assert trials.json() == cli_json("trials", "h100-old", "--db", db)
    assert trials.headers["x-total-count"] == "86"


def test_report_is_the_page_the_cli_writes(client: httpx.Client, db: str, tmp_path: Path) -> None:
    cli_output("report", "other", "-o", str(tmp_path), "--db", db)
    response = client.get("/v1/studies/other/report")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert response.text == (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in response.text  # the plots travel inside the page


def test_a_served_report_links_plots_that_answer_the_files_the_cli_writes(client: httpx.Client, db: str,
                                                                         tmp_path: Path) -> None:
    cli_output("report", "h100-old", "-o", str(tmp_path), "--db", db)
    page_url = "/v1/studies/h100-old/report"
    links = re.findall(r"href='([^']+\.png)'", client.get(page_url).text)
    assert sorted(links) == sorted(path.name for path in tmp_path.glob("*.png")) and links
    for link in links:
        plot = client.get(urljoin(page_url, link))
        assert plot.status_code == 200 and plot.headers["content-type"] == "image/png", link
        assert plot.content == (tmp_path / link).read_bytes(), link


def test_plots_are_listed_with_their_captions_and_urls(client: httpx.Client) -> None:
    confirmed = client.get("/v1/studies/h100-old/plots").json()
    assert confirmed["intervals"] is True and confirmed["note"] is None
    assert [plot["name"] for plot in confirmed["plots"]] == [
        "throughput_vs_concurrency", "speedup_vs_depth", "pareto_front", "acceptance_by_position", "speedup_by_method"]
    for plot in confirmed["plots"]:
        assert "95 % intervals" in plot["caption"] or plot["name"] == "acceptance_by_position"
        assert plot["url"] == f"/v1/studies/h100-old/{plot['name']}.png?version={confirmed['version']}"
        assert client.get(plot["url"]).headers["content-type"] == "image/png"
    screened = client.get("/v1/studies/other/plots").json()
    assert screened["intervals"] is False and "no interval" in screened["note"]
    assert "speedup_vs_depth" in error_of(client.get("/v1/studies/other/speedup_vs_depth.png"), 404)


def test_head_answers_where_get_does_without_a_body(client: httpx.Client, ids: dict[str, int]) -> None:
    for path in (f"/v1/profiles/{ids['cpu']}/export?format=vllm", "/v1/studies", "/", "/favicon.ico",
                 "/v1/studies/other/pareto_front.png"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200 and head.content == b"", path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert head.headers["content-length"] == str(len(got.content)), path
    assert client.head("/v1/tune").status_code == 405  # no GET there


def test_the_favicon_and_the_docs_come_from_this_server(client: httpx.Client) -> None:
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon" and icon.content[:4] == b"\0\0\1\0"
    docs = client.get("/docs").text
    assets = re.findall(r'(?:src|href)="([^"]+)"', docs)
    assert "SwaggerUIBundle" in docs and "http:" not in docs and "https:" not in docs and len(assets) == 3
    for asset in assets:  # the script, its style and the icon
        assert asset.startswith("/") and not asset.startswith("//"), asset
        assert client.get(asset).status_code == 200, asset


def test_hardware_lists_stored_and_catalog(client: httpx.Client) -> None:
    data = client.get("/v1/hardware").json()
    assert {h["fingerprint"] for h in data["stored"]} == {factory.H100[1], factory.CPU[1]}
    assert "h200" in {a["short_name"] for a in data["catalog"]}


def test_plan_is_the_cli_json(client: httpx.Client, db: str) -> None:
    response = client.get("/v1/plan", params={"hardware": "h200", "model": PLAN_TARGET, "concurrencies": "1,8",
                                              "isl": 512, "dtype": "fp8", "engine": "vllm"})
    assert response.status_code == 200, response.text
    assert response.json() == cli_json("plan", "--hardware", "h200", "--model", PLAN_TARGET, "--concurrency", "1,8",
                                       "--isl", "512", "--dtype", "fp8", "--engine", "vllm", "--db", db)
    assert [row["concurrency"] for row in response.json()["per_concurrency"]] == [1, 8]


def test_the_old_query_names_answer_as_the_new_ones(client: httpx.Client) -> None:
    """Before issue 38 the axis was called batch size: ``batch_size`` and ``batch_sizes`` are still read
    (left out of the API docs); next to the new name, the old one is a 422 naming it."""
    best, plan = {"model": "tiny-target", "hardware": factory.H100[0]}, {"hardware": "h200", "model": PLAN_TARGET}
    old = client.get("/v1/profiles/best", params={**best, "batch_size": 4})
    assert old.status_code == 200, old.text
    assert old.json() == client.get("/v1/profiles/best", params={**best, "concurrency": 4}).json()
    old = client.get("/v1/plan", params={**plan, "batch_sizes": "1,8"})
    assert old.status_code == 200, old.text
    assert old.json() == client.get("/v1/plan", params={**plan, "concurrencies": "1,8"}).json()
    for path, params, name in (("/v1/profiles/best", {**best, "concurrency": 4, "batch_size": 4}, "batch_size"),
                               ("/v1/plan", {**plan, "concurrencies": "1", "batch_sizes": "1"}, "batch_sizes")):
        both = client.get(path, params=params)
        assert "old name" in error_of(both, 422) and both.json()["error"]["field"] == name
    documented = json.dumps(client.get("/openapi.json").json()["paths"])
    assert "batch_size" not in documented


def test_healthz_says_read_only(client: httpx.Client) -> None:
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["schema_is_head"] is True
    assert health["read_only"] is True and "AUTOTUNE_API_TOKEN" in health["writes"]


def test_openapi_documents_every_route(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert set(spec["paths"]) >= {
        "/healthz", "/metrics", "/v1/profiles", "/v1/profiles/best", "/v1/profiles/{profile_id}",
        "/v1/profiles/{profile_id}/export", "/v1/studies", "/v1/studies/{name}/trials", "/v1/studies/{name}/report",
        "/v1/studies/{name}/plots", "/v1/studies/{name}/{plot}.png",
        "/v1/hardware", "/v1/plan", "/v1/tune", "/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/cancel"}
    writes = {path: set(methods) for path, methods in spec["paths"].items() if set(methods) != {"get"}}
    assert writes == {"/v1/tune": {"post"}, "/v1/jobs/{job_id}/cancel": {"post"}}  # only these write
    assert all({401, 403} <= set(map(int, spec["paths"][path]["post"]["responses"])) for path in writes)
    assert "AUTOTUNE_API_TOKEN" in spec["info"]["description"]
    assert client.get("/docs").status_code == 200
