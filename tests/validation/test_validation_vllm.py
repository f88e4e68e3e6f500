"""``autotune validate`` end to end on vLLM 0.32.0 (CPU): a stored none-vs-draft profile of the built-in
models exported as Hugging Face folders, one concurrency level, one run: three real ``vllm serve``
servers started from their scripts, real ``vllm bench serve`` runs, the result stored and shown; and a
server that misses a tiny start timeout: one line, exit 2, nothing stored. Neither leaves a process.

About 3 x (server start + one run): 7 minutes here on two busy CPU cores (a start took 60-90 s).
"""

from __future__ import annotations

import json
import os
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


def autotune(*args: str, tmp: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """``autotune ARGS`` in this venv (vLLM is reached through --vllm-python); its work folder, and the
    server log a failure keeps there, under ``tmp``."""
    return subprocess.run([sys.executable, "-c", "from autotune.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, env=vllm_env(TMPDIR=str(tmp)))


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
    done = autotune("validate", str(profile_id), "--db", url, "--concurrency", "1", "--runs", "1", "--json",
                    "--vllm-python", str(vllm_python), "--server-arg=--enforce-eager", tmp=tmp_path)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    print(f"autotune validate: {seconds:.0f} s; tok/s at concurrency 1: " + ", ".join(
        f"{s['name']} {s['points'][0]['figures']['output_tokens_per_s']['value']:.1f}" for s in result["servers"]))
    assert [s["name"] for s in result["servers"]] == ["schedule", "fixed", "none"]
    for server in result["servers"]:
        (point,) = server["points"]
        assert point["concurrency"] == 1 and point["runs"] == 1
        assert point["figures"]["output_tokens_per_s"]["value"] > 0
        assert point["figures"]["tpot_ms_p50"]["value"] > 0 and point["figures"]["ttft_ms_p99"]["value"] > 0
    schedule, fixed, none = result["servers"]
    assert 0 < schedule["points"][0]["figures"]["acceptance_rate"]["value"] <= 1  # counted by vLLM's /metrics
    assert "acceptance_rate" not in none["points"][0]["figures"]
    assert result["gaps"]["1"] is not None and result["tuned_tokens_per_s"]["1"] > 0
    assert result["engine_version"].startswith("0.32")
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
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert done.stderr.strip().splitlines() == errors and "did not answer /health within 3 s" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert stored_validations(url) == 0
    assert processes_naming(str(hf_models["target"])) == []
    (work,) = tmp_path.glob("autotune-validate-*")  # kept for its server log, which the error names
    assert (work / "schedule.log").exists() and str(work / "schedule.log") in errors[0]
