"""``autotune validate`` end to end on vLLM 0.32.0 (CPU), run as a user runs it (no VLLM_CPU_KVCACHE_SPACE:
autotune sets every server's memory): a stored none-vs-draft profile of the built-in models exported as
Hugging Face folders, one concurrency level, two rounds: three real ``vllm serve`` servers started from
their scripts and up together, our load generator's runs in alternating order, the paired comparisons,
the result stored and shown, progress on the pipe; a server that misses a tiny start timeout: one line,
exit 2, nothing stored; a server killed mid-run (SIGKILL): reported within seconds in one line naming it
and the cause, nothing stored. None leaves a process.

About 3 server starts + 6 short runs for the first (5-8 minutes on two busy CPU cores), one start for
the last.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

import validation_support
from vllm_support import vllm_env

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def stored_profile(url: str, models: dict[str, Path]) -> int:
    return validation_support.stored_profile(url, models["target"], models["draft"], "vllm-validate")


AUTOTUNE = [sys.executable, "-c", "from autotune.cli import main; main()"]


def autotune(*args: str, tmp: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """``autotune ARGS`` in this venv (vLLM is reached through --vllm-python); its work folder, and the
    server log a failure keeps there, under ``tmp``."""
    return subprocess.run([*AUTOTUNE, *args], capture_output=True, text=True, timeout=timeout,
                          env=vllm_env(TMPDIR=str(tmp)))


def processes_naming(fragment: str) -> list[str]:
    """Command lines of live processes that mention ``fragment`` (the test's model folders)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if fragment in cmdline and state != "Z":
            found.append(cmdline)
    return found


def stored_validations(url: str) -> int:
    with create_engine(url).connect() as connection:
        return connection.execute(text("SELECT count(*) FROM autotune_validation_runs")).scalar()


def test_validate_serves_three_servers_and_stores_the_figures(vllm_python: Path, hf_models: dict[str, Path],
                                                              tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    profile_id = stored_profile(url, hf_models)
    started = time.monotonic()
    done = autotune("validate", str(profile_id), "--db", url, "--concurrency", "1", "--runs", "2", "--json",
                    "--vllm-python", str(vllm_python), "--server-arg=--enforce-eager", tmp=tmp_path)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    print(f"autotune validate: {seconds:.0f} s; tok/s at concurrency 1: " + ", ".join(
        f"{s['name']} {s['points'][0]['figures']['output_tokens_per_s']['value']:.1f}" for s in result["servers"]))
    assert [s["name"] for s in result["servers"]] == ["schedule", "fixed", "none"]
    assert result["servers_at_once"] == 3  # three servers of the built-in models fit this machine together
    for server in result["servers"]:
        (point,) = server["points"]
        assert point["concurrency"] == 1 and point["runs"] == 2
        assert point["figures"]["output_tokens_per_s"]["value"] > 0 and point["figures"]["occupancy"]["value"] > 0.9
        assert point["figures"]["tpot_ms_p50"]["value"] > 0 and point["figures"]["ttft_ms_p99"]["value"] > 0
    schedule, fixed, none = result["servers"]
    assert 0 < schedule["points"][0]["figures"]["acceptance_rate"]["value"] <= 1  # counted by vLLM's /metrics
    assert "acceptance_rate" not in none["points"][0]["figures"]
    assert result["gaps"]["1"] is not None and result["tuned_tokens_per_s"]["1"] > 0
    assert result["engine_version"].startswith("0.32")
    # The schedule runs depth 2 at concurrency 1, the best fixed depth too: not judged; none differs.
    assert [(c["other"], c["differ"], c["ratio"]["n"]) for c in result["comparisons"]] == [("fixed", False, 2),
                                                                                             ("none", True, 2)]
    # Progress on the pipe (stderr): a line per server start and per run, in alternating order.
    runs = re.findall(r"round (\d)/2 (\w+) c=1: ", done.stderr)
    assert runs == [("1", "schedule"), ("1", "fixed"), ("1", "none"), ("2", "none"), ("2", "fixed"),
                    ("2", "schedule")], done.stderr
    assert len(re.findall(r"/health answered after", done.stderr)) == 3
    shown = json.loads(autotune("profiles", "show", str(profile_id), "--db", url, "--json", tmp=tmp_path).stdout)
    assert shown["validations"] == [result]
    assert processes_naming(str(hf_models["target"])) == []


def test_a_server_past_its_start_timeout_is_stopped_and_nothing_stored(vllm_python: Path,
                                                                       hf_models: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    profile_id = stored_profile(url, hf_models)
    done = autotune("validate", str(profile_id), "--db", url, "--concurrency", "1", "--runs", "1",
                    "--vllm-python", str(vllm_python), "--start-timeout", "3", tmp=tmp_path)
    assert done.returncode == 2, done.stderr
    *progress, error = done.stderr.strip().splitlines()
    assert error.startswith("Error: the schedule server (") and "did not answer /health within 3 s" in error
    assert all(line.startswith("[") for line in progress), done.stderr  # the progress lines before it
    errors = [error]
    assert stored_validations(url) == 0
    assert processes_naming(str(hf_models["target"])) == []
    (work,) = tmp_path.glob("autotune-validate-*")  # kept for its server log, which the error names
    assert (work / "schedule.log").exists() and str(work / "schedule.log") in errors[0]


def test_a_server_killed_mid_run_is_reported_at_once_and_nothing_is_stored(vllm_python: Path,
                                                                           hf_models: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    profile_id = stored_profile(url, hf_models)
    validate = subprocess.Popen([*AUTOTUNE, "validate", str(profile_id), "--db", url, "--concurrency", "1", "--runs",
                                 "1", "--vllm-python", str(vllm_python), "--server-arg=--enforce-eager"],
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                env=vllm_env(TMPDIR=str(tmp_path)))
    lines = []
    try:
        port = None
        for line in validate.stderr:  # progress, one line each, as it happens
            lines.append(line)
            started = re.search(r"schedule server \(.*\): starting schedule.vllm.sh on port (\d+)", line)
            port = port or (started and started.group(1))
            if "schedule server" in line and "/health answered" in line:
                break
        assert port is not None, "".join(lines)
        (server,) = [pid for pid, cmdline in processes() if f"--port {port}" in cmdline and "bash" not in cmdline]
        os.kill(server, signal.SIGKILL)
        killed = time.monotonic()
        rest = validate.communicate(timeout=120)[1]
        reported = time.monotonic() - killed
    finally:
        if validate.poll() is None:
            validate.kill()
    print(f"reported {reported:.1f} s after the kill")
    assert validate.returncode == 2
    error = rest.strip().splitlines()[-1]
    assert error.startswith("Error: the schedule server (draft schedule c1:2, c2:1) died: killed by SIGKILL; "), rest
    assert "\n" not in error and "Traceback" not in rest
    assert reported < 15  # the fixed server was starting: the running one is watched all along
    assert stored_validations(url) == 0
    assert processes_naming(str(hf_models["target"])) == []


def processes() -> list[tuple[int, str]]:
    """(pid, command line) of the live processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
            except OSError:
                continue
    return found
