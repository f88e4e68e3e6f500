"""Run the app under uvicorn, with the server-side bounds (header size, concurrent connections)."""

from __future__ import annotations

import ipaddress
import logging
from types import FrameType

import uvicorn
from fastapi import FastAPI

from autotune import api
from autotune.jobs.roots import ModelRoots
from autotune.service.app import create_app
from autotune.service.auth import ENV_API_TOKEN, server_token

LOG = logging.getLogger("autotune.service")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8321
MAX_HEADER_BYTES = 16 * 1024
# Beyond this many open connections and requests uvicorn answers 503 rather than queue without end.
MAX_CONCURRENCY = 256
# How long `autotune serve` keeps a best-profile answer (autotune/service/answers.py says why a few
# seconds of staleness is fine for that question).
DEFAULT_ANSWER_CACHE_S = 2.0


def server_config(app: FastAPI, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                  access_log: bool = False) -> uvicorn.Config:
    """uvicorn's configuration for ``app``: the bounds above, no Server header; ``access_log``: a
    line per request (method, path, status; never headers)."""
    return uvicorn.Config(app, host=host, port=port, limit_concurrency=MAX_CONCURRENCY,
                          h11_max_incomplete_event_size=MAX_HEADER_BYTES, server_header=False,
                          log_level="info", access_log=access_log)


def serve(db_url: str | None = None, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          model_roots: ModelRoots | None = None, answer_cache_s: float = DEFAULT_ANSWER_CACHE_S,
          access_log: bool = False) -> None:
    """Check that the database answers (a bad URL fails here, as one line), then serve until
    interrupted; on SQLite, run the queued jobs meanwhile. ``model_roots``: where a job may read
    files (None: not checked here, the workers check); ``answer_cache_s``: how long a best-profile
    answer is kept (0: never); ``access_log``: a line per request."""
    api.db_status(db_url)
    if not _loopback(host):
        LOG.warning("listening on %s: every client that can reach it reads every stored result", host)
    LOG.info("writes (queued tunes, cancellations) %s", "need the bearer token" if server_token() else
             f"are refused: {ENV_API_TOKEN} is not set")
    app = create_app(db_url, model_roots=model_roots, answer_cache_s=answer_cache_s)
    server = _SignalAwareServer(server_config(app, host, port, access_log))
    server.run()
    if server.stopped_by_signal:  # Ctrl-C / SIGTERM: the CLI says so (exit 130)
        raise KeyboardInterrupt


class _SignalAwareServer(uvicorn.Server):
    """uvicorn's server, remembering whether a signal stopped it: uvicorn handles SIGINT/SIGTERM itself
    and returns from ``run()`` as from a normal stop, so ``serve`` could not tell them apart."""

    stopped_by_signal = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopped_by_signal = True
        super().handle_exit(sig, frame)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
