"""``autotune serve`` on the command line: its help, a bad database as one line before anything
listens, and a real server process answering on the port it was given, saying so in one line:
where, which database (never its password) and whether it takes writes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from autotune.cli import cli
from autotune.service.server import serving


def test_help_shows_examples_and_the_default_host() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    assert "127.0.0.1" in result.output and "autotune serve --port" in result.output and "curl" in result.output


def test_an_unusable_database_is_one_line_before_listening() -> None:
    result = CliRunner().invoke(cli, ["serve", "--db", "mysql://u:pw@h/db", "--port", "1"])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "Error:" in result.output
    assert "pw" not in result.output


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_command_serves_until_interrupted(tmp_path: Path, sqlite_url: str) -> None:
    """The real command in a process of its own (the fixtures run the app in a thread)."""
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "AUTOTUNE_API_TOKEN"}
    env["AUTOTUNE_DB_URL"] = sqlite_url
    process = subprocess.Popen([sys.executable, "-m", "autotune.cli", "serve", "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 25
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
                time.sleep(0.1)
        assert health.status_code == 200 and health.json()["read_only"] is True
        assert httpx.get(f"http://127.0.0.1:{port}/v1/studies", timeout=30).json() == []
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=15)
    assert process.returncode == 130 and "Interrupted." in output, output  # the CLI's Ctrl-C, after a clean shutdown
    assert "Application shutdown complete" in output
    started = [line for line in output.splitlines() if "autotune serve: listening" in line]
    assert started == [f"INFO:     autotune serve: listening on http://127.0.0.1:{port} · database {sqlite_url} · "
                       "writes off (read-only: AUTOTUNE_API_TOKEN is not set)"], output


def test_the_start_up_line_hides_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOTUNE_API_TOKEN", "t0ken")
    line = serving("postgresql://me:s3cret@dbhost:5433/autotune?sslmode=require")
    assert line == "database postgresql://me:***@dbhost:5433/autotune?sslmode=require · writes on, with the bearer token"
