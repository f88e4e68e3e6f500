"""scripts/gpu_smoke_trtllm.py against the stand-in (issue 13, item 9): the issue's points become rows
of a pasteable markdown table, trtllm-serve / trtllm-bench (the stand-in's, on PATH) load each YAML,
and what a release cannot do shows up as PASS (refused) or FAIL rows, not as a silent pass."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import profile_factory as factory

pytestmark = pytest.mark.slow  # the GPU smoke script end to end against two stand-in lines

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gpu_smoke_trtllm.py"


def load_script():  # noqa: ANN201
    spec = importlib.util.spec_from_file_location("gpu_smoke_trtllm", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script is executed
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def run_script(fake_trtllm_dir: Path, out: Path, release: str, *args: str) -> tuple[int, str, list[list[str]]]:
    environment = {
        **os.environ, "PYTHONPATH": os.pathsep.join([str(fake_trtllm_dir), os.environ.get("PYTHONPATH", "")]),
        "PATH": os.pathsep.join([str(fake_trtllm_dir / "bin"), os.environ["PATH"]]),
        "FAKE_TRTLLM_PYTHON": sys.executable, "FAKE_TRTLLM_VERSION": release,
    }
    environment.pop("FAKE_TRTLLM_FAULT", None)
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--probe-device", "cpu", "--requests", "2",
                           "--max-tokens", "6", "--depth", "2", "--serve-timeout-s", "60", *args],
                          capture_output=True, text=True, env=environment, timeout=600, check=False)
    table = (out / "table.md").read_text()
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table.splitlines()[4:] if line.startswith("|")]
    return done.returncode, done.stdout + done.stderr, rows


def test_markdown_table_keeps_the_order_and_escapes_cells() -> None:
    smoke = load_script()
    checks = smoke.Checks()
    checks.add("1", "none c1: steps", True, "a | b")
    checks.add("4/5", "x.yaml", "SKIP", "--skip-cli")
    table = smoke.markdown_table(checks, "1.2.0", "1.2")
    assert table.splitlines() == [
        "Smoke run, TensorRT-LLM 1.2.0 (rules of line 1.2):", "", "| point | check | status | detail |",
        "| --- | --- | --- | --- |", "| 1 | none c1: steps | PASS | a \\| b |", "| 4/5 | x.yaml | SKIP | --skip-cli |"]
    assert [c.status for c in checks.failed] == []
    assert [smoke.version_line(v) for v in ("1.0.1", "1.2.0rc6", "1.3.0rc12", "main")] == ["1.0", "1.2", "main", "main"]


def test_help_and_bash_syntax() -> None:
    assert "--export-db" in subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                                           check=True).stdout
    subprocess.run(["bash", "-n", str(SCRIPT.with_suffix(".sh"))], check=True)


def test_every_point_passes_against_the_1_2_stand_in(fake_trtllm_dir, mtp_target_dir, draft_dir, tmp_path) -> None:
    code, output, rows = run_script(fake_trtllm_dir, tmp_path / "out", "1.2.0", "--target", str(mtp_target_dir),
                                    "--draft", str(draft_dir), "--concurrency", "1", "2", "--trtllm-version", "1.2")
    assert code == 0, output
    assert {row[0] for row in rows} == {"1", "2", "3", "4/5", "6", "7", "8"}
    assert all(row[2] == "PASS" for row in rows), [row for row in rows if row[2] != "PASS"]
    # the step-count label says what is checked now (the context step is not a generation step)
    assert any("generation steps = decoding_iter - 1 per request" in row[1] for row in rows if row[0] == "1")
    assert any("mtp@2 at temperature 1.0: sampled" in row[1] for row in rows if row[0] == "2")
    served = [row for row in rows if row[0] == "4/5"]
    assert len(served) == 2 * 4 and all("trtllm-serve" in r[1] or "trtllm-bench" in r[1] for r in served)


def test_a_1_0_release_refuses_sampled_mtp_and_a_1_2_yaml_fails(fake_trtllm_dir, mtp_target_dir, draft_dir,
                                                                 tmp_path) -> None:
    # One concurrency: this release's refusals do not depend on it (the rebuild check, which needs two, is
    # the 1.2 test's).
    code, output, rows = run_script(fake_trtllm_dir, tmp_path / "out", "1.0.0", "--target", str(mtp_target_dir),
                                    "--draft", str(draft_dir), "--concurrency", "1", "--trtllm-version", "1.2")
    assert code == 1, output
    (sampling,) = [row for row in rows if row[0] == "2"]
    assert "refused" in sampling[1] and sampling[2] == "PASS"  # never a greedy run reported as sampled
    # 1.0 has neither Draft_Target nor allow_advanced_sampling; none and ngram read the same in both
    failed = {row[1].split(":")[0] for row in rows if row[2] == "FAIL"}
    assert failed == {"yaml_config draft@2", "yaml_config mtp@2"}


def test_exported_profiles_are_listed_for_loading(fake_trtllm_dir, tmp_path, sqlite_url) -> None:
    factory.populate(sqlite_url)
    code, output, rows = run_script(fake_trtllm_dir, tmp_path / "out", "1.2.0", "--target", str(tmp_path),
                                    "--skip-engine", "--skip-cli", "--export-db", sqlite_url, "--trtllm-version", "main")
    assert code == 0, output
    assert rows and all(row[0] == "4/5" and row[1].startswith("autotune export ") and row[2] == "SKIP" for row in rows)
    assert sorted((tmp_path / "out").glob("profile-*.main.trtllm.yaml"))
