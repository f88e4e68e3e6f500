"""One server process: the exported script started as written, on 127.0.0.1 at a free port, in a
process group of its own so that stopping it stops vLLM's engine core and workers too.

:class:`Server` is a context manager: whatever happens inside (a load generator failing, Ctrl-C,
a timeout), leaving it sends SIGTERM to the whole group, then SIGKILL to what is left.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from autotune.errors import ConfigurationError, EngineError

HOST = "127.0.0.1"
DEFAULT_START_TIMEOUT_S = 600.0  # a tiny model on 2 busy CPU cores takes 30-90 s; a real one minutes
STOP_GRACE_S = 30.0
POLL_S = 1.0
LOG_TAIL_LINES = 3


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def check_port_free(port: int) -> None:
    """ConfigurationError when something already holds ``port`` on 127.0.0.1: the server would fail
    later, or worse, the load generator would measure the other process."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise ConfigurationError(f"port {port} on {HOST} is in use ({exc.strerror}); choose another with "
                                     "--port, or leave it out for a free one") from None


class Server:
    """``bash SCRIPT --host 127.0.0.1 --port PORT EXTRA...`` with its output in ``log``; entering
    starts it and waits for /health (EngineError when it exits or ``start_timeout_s`` passes first)."""

    def __init__(self, script: Path, port: int, log: Path, env: dict[str, str], extra_args: list[str],
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        self.script, self.port, self.log, self.env = script, port, log, env
        self.extra_args, self.start_timeout_s = extra_args, start_timeout_s
        self.process: subprocess.Popen | None = None
        self.start_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> Server:
        check_port_free(self.port)
        with self.log.open("wb") as log_file:
            self.process = subprocess.Popen(
                ["bash", str(self.script), "--host", HOST, "--port", str(self.port), *self.extra_args],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env,
                cwd=self.script.parent, start_new_session=True)
        try:
            self.start_s = self._wait_for_health()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def get(self, route: str, timeout_s: float = 30.0) -> str:
        """The body of GET ``route`` on this server."""
        with urllib.request.urlopen(f"{self.base_url}{route}", timeout=timeout_s) as response:
            return response.read().decode()

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL what is left after a grace period; idempotent."""
        process = self.process
        if process is None:
            return
        _signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        # The group's other members (vLLM's engine core), or a server that ignored SIGTERM.
        _signal_group(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_GRACE_S)
        _wait_group_gone(process.pid)

    def _wait_for_health(self) -> float:
        """Seconds until /health answered 200."""
        assert self.process is not None
        start = time.monotonic()
        while True:
            if self.process.poll() is not None:
                raise EngineError(f"the server of {self.script.name} exited with status {self.process.returncode} "
                                  f"before /health answered: {self._log_tail()} (log: {self.log})")
            try:
                self.get("/health", timeout_s=5.0)
                return time.monotonic() - start
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() - start > self.start_timeout_s:
                raise EngineError(f"the server of {self.script.name} did not answer /health within "
                                  f"{self.start_timeout_s:g} s (raise --start-timeout; log: {self.log})")
            time.sleep(POLL_S)

    def _log_tail(self) -> str:
        try:
            lines = [line.strip() for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "no log"
        return " | ".join(lines[-LOG_TAIL_LINES:]) or "no output"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_group_gone(pgid: int, timeout_s: float = 10.0) -> None:
    """Wait until no process of group ``pgid`` is left (children reparented to init die a moment
    after the SIGKILL); signal 0 probes without sending anything."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.1)
