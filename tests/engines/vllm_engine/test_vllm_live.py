"""The vLLM adapter against a real vLLM (the venv named by AUTOTUNE_TEST_VLLM_PYTHON, see
tests/vllm_support.py), on the built-in models exported as Hugging Face folders:

* ``autotune tune --engine vllm`` runs the model-guided search by default on step costs timed with
  synthetic acceptance, predicts its trials, completes and stores a profile; its draft trials count
  acceptance within 5 percentage points of our embedded engine's on the same workload (``autotune
  measure --engine vllm`` and the protocol's repeated, paired rounds on vLLM: test_vllm_mtp_live);
* ``scripts/vllm_greedy_check.py``: vLLM's greedy output equals ours for the draft, and for the
  target while the draft speculates, whose acceptance counters (vLLM's Prometheus ones) equal ours.

Each test starts vLLM engines (about 15-25 s per build on two cores), so they are few and small.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.workload import load_workload
from vllm_support import vllm_bin, vllm_env

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
ACCEPTANCE_TOLERANCE = 0.05  # the bound: 5 percentage points
# Six of the built-in prompts, 48 tokens each: greedy acceptance is deterministic, so a short workload
# checks what the full one does in a third of the decode time (the greedy check below runs the full one).
SHORT_WORKLOAD = ROOT / "tests" / "data" / "short.jsonl"


def run_vllm_cli(python: Path, *args: str, timeout_s: float = 900) -> subprocess.CompletedProcess:
    """``autotune ARGS`` with the vLLM venv's console script; fails the test with stderr's tail on error."""
    done = subprocess.run([str(vllm_bin(python, "autotune")), *args], capture_output=True, text=True,
                          timeout=timeout_s, env=vllm_env())
    assert done.returncode == 0, f"autotune {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}"
    return done


def embedded_acceptance(method: str, depth: int, concurrency: int) -> float:
    engine = EmbeddedEngine()
    try:
        engine.load(EngineConfig(method, depth))
        return engine.measure(load_workload(SHORT_WORKLOAD), concurrency, temperature=0.0).acceptance_rate
    finally:
        engine.close()


def test_tune_is_model_guided_by_default_on_synthetic_acceptance_timings(vllm_python: Path, hf_models: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    """The issue's done-when in its cheapest form: ``autotune tune --engine vllm`` without --sampler
    runs the model-guided search. Step costs are timed first with every draft accepted (none and
    draft@1 at concurrency levels 1 and 2: two builds, refused if vLLM's counters show a rejection) and
    stored as the study's cost profile; then every trial after the draft's first (its acceptance
    calibration, the first trial: no baseline pass is planned) carries a prediction, and the study
    completes and stores a profile. No
    confirmation: the protocol's rounds on vLLM are checked by the measure test above."""
    db_path = tmp_path / "vllm.db"
    db = f"sqlite:///{db_path}"
    run_vllm_cli(
        vllm_python, "tune", "--db", db, "--engine", "vllm", "--target", str(hf_models["target"]),
        "--draft", str(hf_models["draft"]), "--method", "none", "--method", "draft", "--max-depth", "1",
        # The short workload and no depths past 1: a bounded study whose time is builds, not decoding.
        "--concurrency", "1,2", "--seed", "1", "--no-confirm", "--no-explore-beyond", "--workload", str(SHORT_WORKLOAD),
    )
    with sqlite3.connect(db_path) as connection:
        costs = connection.execute("SELECT engine, source, points FROM autotune_cost_profiles").fetchall()
    assert [(engine, source) for engine, source, _ in costs] == [("vllm", "timed")]
    points = json.loads(costs[0][2])
    assert {(p["method"], p["depth"], p["concurrency"]) for p in points} == {
        (method, depth, b) for method, depth in (("none", 0), ("draft", 1)) for b in (1, 2)}
    assert all(p["drafted_per_step"] == p["depth"] and p["verify_s"] > 0 for p in points)  # every row drafted, forced
    profiles = json.loads(run_vllm_cli(vllm_python, "profiles", "list", "--db", db, "--json").stdout)
    assert len(profiles) == 1 and profiles[0]["model"] == "autotune-byte-target"
    trials = json.loads(run_vllm_cli(vllm_python, "trials", profiles[0]["study"], "--db", db, "--json").stdout)
    complete = [t for t in trials if t["state"] == "complete"]
    # No baseline is planned: one is screened only where its prediction could lead (guide.py, step 1).
    assert all(t["prediction"] for t in complete if t["method"] == "none")
    drafted = [t for t in complete if t["method"] == "draft"]
    assert drafted and all(t["drafted_tokens"] > 0 and t["acceptance_rate"] > 0 for t in drafted)
    for trial in drafted:  # counted by vLLM, and what our engine accepts on the same prompts (both greedy)
        ours = embedded_acceptance("draft", 1, trial["concurrency"])
        assert abs(trial["acceptance_rate"] - ours) <= ACCEPTANCE_TOLERANCE, (trial["acceptance_rate"], ours)
    unpredicted = [(t["method"], t["depth"], t["concurrency"]) for t in complete if not t["prediction"]]
    assert unpredicted == [("draft", 1, drafted[0]["concurrency"])]  # the calibration run: no curve before it


def test_vllm_greedy_output_equals_ours(vllm_python: Path, hf_models: dict[str, Path]) -> None:
    """The target with the draft speculating at depth 3: vLLM's output must still be the target's
    greedy output, and its acceptance counters must be ours, which they can only be where vLLM's
    draft proposes what ours does (so the draft folder is checked too, without a run of its own)."""
    args = [str(vllm_python), str(ROOT / "scripts" / "vllm_greedy_check.py"), str(hf_models["target"]), "--json",
            "--spec-draft", str(hf_models["draft"]), "--spec-depth", "3", "--requests", "8", "--max-tokens", "64"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=vllm_env())
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["matching"] == result["requests"] == 8
    counters, ours = result["vllm_acceptance"]["counters"], result["our_acceptance"]
    assert counters["vllm:spec_decode_num_draft_tokens"] == ours["drafted_tokens"] > 0
    assert counters["vllm:spec_decode_num_accepted_tokens"] == ours["accepted_tokens"]
