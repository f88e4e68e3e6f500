"""vLLM's MiMo MTP drafter on the built-in target exported as a MiMo folder
(``autotune models export-hf --format mimo``), through ``autotune measure --engine vllm --method mtp``
in the venv named by AUTOTUNE_TEST_VLLM_PYTHON (tests/vllm_support.py).

At depth 1 vLLM and our engine both draft with MTP module 0 alone, so the counted acceptance must
agree (docs/vllm.md, "MTP through vLLM (MiMo export)": the only difference left is vLLM zeroing the
token embedding at position 0 of the MTP layer). Deeper drafts are not compared: vLLM reuses module 0
with its normed output where ours runs module 1.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.embedded.hf_export import export_builtin
from autotune.workload import load_workload
from vllm_support import vllm_bin, vllm_env

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ACCEPTANCE_TOLERANCE = 0.05  # 5 percentage points; measured difference: see docs/vllm.md
# Six of the built-in prompts, 48 tokens each: greedy acceptance is deterministic, so a short workload
# checks the same thing as the full one in a third of the decode time.
SHORT_WORKLOAD = Path(__file__).resolve().parents[2] / "data" / "short.jsonl"


@pytest.fixture(scope="module")
def mimo_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (target,) = export_builtin(tmp_path_factory.mktemp("hf-mimo"), "target", architecture="mimo")
    return target


def test_measure_mtp_depth_1_acceptance_matches_the_embedded_engine(vllm_python: Path, mimo_target: Path) -> None:
    args = ["measure", "--engine", "vllm", "--target", str(mimo_target), "--method", "mtp", "--depth", "1",
            # Three rounds, the protocol's minimum: its repeated, paired rounds on vLLM are checked here.
            "--concurrency", "1", "--max-repetitions", "3", "--workload", str(SHORT_WORKLOAD), "--json"]
    done = subprocess.run([str(vllm_bin(vllm_python, "autotune")), *args], capture_output=True, text=True,
                          timeout=900, env=vllm_env())
    assert done.returncode == 0, f"autotune {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}"
    report = json.loads(done.stdout)  # vLLM's own logging goes to the worker's log, not to stdout
    measured = report["measurement"]
    assert measured["engine"] == "vllm" and measured["method"] == "mtp" and measured["depth"] == 1
    assert measured["drafted_tokens"] > 0 and len(measured["acceptance_by_position"]) == 1
    # Paired with vLLM's own baseline at the same concurrency, over repeated rounds, with an interval.
    assert report["repetitions"] >= 3 and report["baseline"]["measurement"]["method"] == "none"
    assert report["speedup"]["low"] <= report["speedup"]["value"] <= report["speedup"]["high"]

    engine = EmbeddedEngine()
    try:
        engine.load(EngineConfig("mtp", 1))
        ours = engine.measure(load_workload(SHORT_WORKLOAD), 1, temperature=0.0).acceptance_rate
    finally:
        engine.close()
    assert abs(measured["acceptance_rate"] - ours) <= ACCEPTANCE_TOLERANCE, (measured["acceptance_rate"], ours)
