"""Helpers of the service tests: a live ``autotune serve`` (uvicorn on 127.0.0.1 at a free port, in
a thread of the test process), the database it serves (the profile tests' four studies and their
profiles, plus a target ``/v1/plan`` can plan), the check of the error shape and the CLI's output
for the same question."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from contextlib import contextmanager

import httpx
import uvicorn
from click.testing import CliRunner
from fastapi import FastAPI

import profile_factory as factory
from autotune.cli import cli
from autotune.service import create_app
from autotune.service.server import server_config
from autotune.store import open_database, performance, results
from autotune.workload import load_workload

PLAN_TARGET = "plan-target"
PLAN_CONFIG = {"vocab_size": 259, "d_model": 320, "n_layers": 5, "n_heads": 5, "d_ff": 864, "max_seq_len": 1024,
               "n_mtp": 0}


def fill(url: str) -> dict[str, int]:
    """The factory's studies (profile ids by study name) and :data:`PLAN_TARGET` with an n-gram
    acceptance profile on the built-in workload."""
    ids = factory.populate(url)
    workload = load_workload(None)
    with open_database(url) as database, database.session() as session:
        target = results.upsert_model(session, results.ModelEntry(fingerprint="a" * 64, name=PLAN_TARGET, role="target",
                                      source=f"builtin:{PLAN_TARGET}", num_params=9_300_000, num_mtp_modules=0,
                                      vocab_size=259, config=PLAN_CONFIG))
        performance.save_acceptance(session, performance.AcceptanceKey(target.id, "ngram", workload.sha256),
                                    draft_model_id=None, positions=[{"steps": 100, "accepted": 30, "drafted": 100}],
                                    sources=[1], workload_name=workload.label, max_depth=1)
    return ids


@contextmanager
def live_server(db_url: str | None, app: FastAPI | None = None, **app_options: Any) -> Iterator[httpx.Client]:
    """``autotune serve``'s app on a free loopback port (``app``: one made by a test, else
    ``create_app(db_url, **app_options)``); an httpx client on it. Always stopped."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(app or create_app(db_url, **app_options), "127.0.0.1", port))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def error_of(response: httpx.Response, status: int) -> str:
    """The message of an error response, after checking its status and the one error shape."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["status"] == status, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]["message"]


def cli_output(*args: str) -> str:
    """What ``autotune ARGS`` prints (it must succeed)."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output
