"""``/metrics``: Prometheus' text format, requests counted by method, route template and status,
and their latency."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def samples(client: httpx.Client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def count(found: dict, route: str, status: str) -> float:
    return found.get(("autotune_http_requests_total", (("method", "GET"), ("route", route), ("status", status))), 0.0)


def test_requests_are_counted_by_route_template_and_status(client: httpx.Client, ids: dict[str, int]) -> None:
    before = samples(client)
    client.get(f"/v1/profiles/{ids['cpu']}")
    client.get("/v1/profiles/999")
    client.get("/v1/profiles/abc")
    client.get("/no/such/route")
    after = samples(client)
    route = "/v1/profiles/{profile_id}"
    assert count(after, route, "200") - count(before, route, "200") == 1
    assert count(after, route, "404") - count(before, route, "404") == 1
    assert count(after, route, "422") - count(before, route, "422") == 1
    assert count(after, "unmatched", "404") - count(before, "unmatched", "404") == 1
    assert not any("999" in str(labels) or "abc" in str(labels) for _, labels in after)  # no raw paths
    latency = ("autotune_http_request_duration_seconds_count", (("method", "GET"), ("route", route)))
    assert after[latency] - before.get(latency, 0.0) == 3
