"""Prometheus metrics of the service: requests by method, route and status, and their latency.

Each app has a registry of its own (two apps in one process, as in the tests, do not share
counts). The route label is the route's template (``/v1/profiles/{profile_id}``), never the raw
path, so a client cannot grow the number of series; requests no route matched count as
``unmatched``.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The registry, its two metrics, the middleware that fills them and the ``/metrics`` route."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("autotune_http_requests", "HTTP requests answered, by method, route and status.",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("autotune_http_request_duration_seconds", "Time to answer an HTTP request.",
                                 ["method", "route"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.router = APIRouter()
        self.router.add_api_route("/metrics", self.exposition, methods=["GET"], tags=["service"],
                                  summary="Prometheus metrics (text exposition format)",
                                  response_class=Response)

    def exposition(self) -> Response:
        """The metrics in Prometheus' text format."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """``app`` wrapped so that every HTTP request is counted and timed."""

        async def measured(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            status = 500  # what the client sees if the app fails before it answers
            start = time.perf_counter()

            async def recording_send(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await app(scope, receive, recording_send)
            finally:
                route = scope.get("route")
                label = getattr(route, "path", UNMATCHED)
                self.requests.labels(scope["method"], label, str(status)).inc()
                self.latency.labels(scope["method"], label).observe(time.perf_counter() - start)

        return measured
