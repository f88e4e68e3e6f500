"""Run the app under uvicorn, with the server-side bounds (header size, concurrent connections)."""

from __future__ import annotations

import ipaddress
import logging
import socket
from types import FrameType

import uvicorn
from fastapi import FastAPI
from uvicorn.config import LOGGING_CONFIG

from autotune import api
from autotune.jobs.roots import ModelRoots
from autotune.service.app import create_app
from autotune.service.auth import ENV_API_TOKEN, server_token
from autotune.store import resolve_database_url
from autotune.store.database import display_url

LOG = logging.getLogger("autotune.service")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8321
MAX_HEADER_BYTES = 16 * 1024
# Beyond this many open connections and requests uvicorn answers 503 rather than queue without end.
MAX_CONCURRENCY = 256
# How long `autotune serve` keeps a best-profile answer (autotune/service/answers.py says why a few
# seconds of staleness is fine for that question).
DEFAULT_ANSWER_CACHE_S = 2.0
# uvicorn's logging, with autotune's loggers (the start-up line, jobs, errors) at INFO through its
# handler: without one of their own their INFO lines went nowhere.
LOG_CONFIG = {**LOGGING_CONFIG, "loggers": {**LOGGING_CONFIG["loggers"],
                                            "autotune": {"handlers": ["default"], "level": "INFO"}}}


def server_config(app: FastAPI, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                  access_log: bool = False) -> uvicorn.Config:
    """uvicorn's configuration for ``app``: the bounds above, no Server header; ``access_log``: a
    line per request (method, path, status; never headers)."""
    return uvicorn.Config(app, host=host, port=port, limit_concurrency=MAX_CONCURRENCY,
                          h11_max_incomplete_event_size=MAX_HEADER_BYTES, server_header=False,
                          log_level="info", log_config=LOG_CONFIG, access_log=access_log)


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
    app = create_app(db_url, model_roots=model_roots, answer_cache_s=answer_cache_s)
    server = _SignalAwareServer(server_config(app, host, port, access_log), serving(db_url))
    server.run()
    if server.stopped_by_signal:  # Ctrl-C / SIGTERM: the CLI says so (exit 130)
        raise KeyboardInterrupt


def serving(db_url: str | None) -> str:
    """What the start-up line says beside the address: the database (its password hidden) and
    whether writes are on."""
    writes = ("on, with the bearer token" if server_token() else
              f"off (read-only: {ENV_API_TOKEN} is not set)")
    return f"database {display_url(resolve_database_url(db_url))} · writes {writes}"


class _SignalAwareServer(uvicorn.Server):
    """uvicorn's server, logging one line once it listens (where, and ``serving``), and remembering
    whether a signal stopped it: uvicorn handles SIGINT/SIGTERM itself and returns from ``run()`` as
    from a normal stop, so ``serve`` could not tell them apart."""

    stopped_by_signal = False

    def __init__(self, config: uvicorn.Config, serving: str) -> None:
        super().__init__(config)
        self.serving = serving

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # the address bound, the real port when 0 was asked
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            LOG.info("autotune serve: listening on http://%s:%d · %s", f"[{host}]" if ":" in host else host, port,
                     self.serving)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopped_by_signal = True
        super().handle_exit(sig, frame)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
