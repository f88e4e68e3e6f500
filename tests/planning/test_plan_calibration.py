"""`autotune plan` calibrated from a stored real-engine cost profile (issue 22, item 2): the step
overhead (and the bandwidth share, where the points identify it) fitted to a tune's timed baseline
steps on the same GPU model and engine, the plan moving as the physics says, the plan saying which
calibration it used, and falling back to the named constants, saying so, when none is stored.

The profiles are written through the store's API into a real SQLite file, their points built from
the roofline with a known overhead and bandwidth share, so the fit must find them again."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli import cli
from autotune.hardware.catalog import accelerator
from autotune.perfmodel.calibration import BANDWIDTH_FRACTION, ENGINE_STEP_OVERHEAD_US
from autotune.perfmodel.cost import CostPoint
from autotune.perfmodel.roofline import forward_pass
from autotune.perfmodel.step_fit import fit_step_costs
from autotune.perfmodel.roofline import ModelShape
from autotune.planning import GivenAcceptance, Scope, plan_deployment, plan_from_config
from autotune.planning.inputs import Deployment, read_config_model
from autotune.store import open_database, performance, profile_queries, repository, results
from test_plan import TARGET, TARGET_CONFIG
from test_plan import url as tuned_url  # noqa: F401 - the tuned target's database fixture

LLAMA_8B = Path(__file__).parents[1] / "data" / "configs" / "llama-3.1-8b.json"
TRUE_OVERHEAD_US = 600.0  # what the made-up engine spends per step (vLLM's assumed one is 250)
CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64)


def timed_points(overhead_us: float, bandwidth: float, prompt: int, shape: ModelShape | None = None) -> list[dict]:
    """Baseline steps of ``shape`` (default Llama-3.1-8B) on one H200 as the roofline gives them at
    ``bandwidth`` of the peak plus ``overhead_us`` per step, three rounds each (the store keeps them
    as dicts)."""
    spec = replace(accelerator("h200"), bandwidth_fraction=bandwidth, gemm_fraction=0.7, pass_overhead_us=overhead_us)
    shape = shape or read_config_model(LLAMA_8B, "target").shape
    return [CostPoint("none", None, 0, rows, 0.0, forward_pass(spec, shape, rows, 1, prompt).seconds, 0.01,
                      rows * prompt, round=r).to_dict() for rows in CONCURRENCIES for r in range(3)]


def database(tmp_path: Path, engine: str = "vllm", *, bandwidth: float = BANDWIDTH_FRACTION, prompt: int = 64) -> str:
    """A SQLite file holding one H200 and a timed cost profile of Llama-3.1-8B on it with ``engine``."""
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    llama = read_config_model(LLAMA_8B, "target")
    with open_database(url) as db, db.session() as session:
        target = results.upsert_model(session, results.ModelEntry(
            fingerprint="8" * 64, name="Llama-3.1-8B", role="target",
                                      source=str(LLAMA_8B), num_params=llama.shape.total_params, num_mtp_modules=0,
                                      vocab_size=llama.shape.vocab, config=llama.info.config))
        save_h200_profile(session, target.id, engine, timed_points(TRUE_OVERHEAD_US, bandwidth, prompt))
    return url


def save_h200_profile(session, target_id: int, engine: str, points: list[dict]) -> None:  # noqa: ANN001
    """A stored H200 (as `autotune probe` records one) and a timed cost profile of the target on it."""
    gpu = repository.upsert_hardware(
        session, fingerprint="beef000011112222", name="1x NVIDIA H200", device_type="cuda", device_count=1,
        memory_total_bytes=150_000_000_000,
        spec={"devices": [{"index": 0, "name": "NVIDIA H200", "memory_total_bytes": 150_000_000_000}],
              "benchmarked_device": 0})
    performance.save_cost_profile(session, performance.CostProfileKey(gpu.id, engine, target_id, "k" * 32),
                                  source="timed", points=points, settings={"steps": 8, "rounds": 3}, duration_s=12.0)


def plan(url: str, calibration: str = "auto", engine: str = "vllm"):  # noqa: ANN201 - a DeploymentPlan
    return plan_from_config(url, hardware="h200", config=LLAMA_8B, acceptance=GivenAcceptance(length=(3.2, 4)),
                            scope=Scope(concurrencies=(1,)),
                            deployment=Deployment(engine=engine, calibration=calibration, isl=64, osl=64,
                                                  step_costs="roofline"))


def test_the_fitted_overhead_replaces_the_assumed_one_and_moves_the_plan_as_the_physics_says(tmp_path: Path) -> None:
    url = database(tmp_path)
    fitted, assumed = plan(url), plan(url, calibration="assumed")
    assert fitted.hardware.pass_overhead_us == pytest.approx(TRUE_OVERHEAD_US, abs=1.0)
    assert assumed.hardware.pass_overhead_us == ENGINE_STEP_OVERHEAD_US["vllm"]
    # an 8B model's weights at b <= 64 and 64-token prompts: the memory time barely moves, so the
    # bandwidth share is not identifiable and stays the assumed one
    assert fitted.hardware.bandwidth_fraction == BANDWIDTH_FRACTION
    # one plain step is slower by the overhead's difference, the rest of the roofline unchanged
    slower = 1 / fitted.rows[0].predicted_baseline_tokens_per_s - 1 / assumed.rows[0].predicted_baseline_tokens_per_s
    assert slower == pytest.approx((TRUE_OVERHEAD_US - ENGINE_STEP_OVERHEAD_US["vllm"]) * 1e-6, rel=0.05)
    # n-gram (no draft pass) verifying 5 tokens of a memory-bound 8B costs one plain step, overhead
    # included: tokens/s fall with the overhead, the speedup (the acceptance length) does not move
    assert fitted.rows[0].method == "ngram" and fitted.rows[0].predicted_tokens_per_s < assumed.rows[0].predicted_tokens_per_s
    assert fitted.rows[0].predicted_speedup == pytest.approx(assumed.rows[0].predicted_speedup, rel=1e-3)
    assert "fitted to the timed cost profile 1 of Llama-3.1-8B on 1x NVIDIA H200" in fitted.basis["calibration"]
    assert fitted.to_dict()["basis"]["calibrated_from"].startswith("the timed cost profile 1")
    assert "--calibration assumed" in assumed.basis["calibration"] and assumed.hardware.calibrated_from is None


def test_the_bandwidth_share_is_fitted_where_the_kv_reads_make_it_identifiable(tmp_path: Path) -> None:
    url = database(tmp_path, bandwidth=0.7, prompt=8192)  # 64 rows x 8k tokens: ~70 GB of KV against 15 GB of weights
    spec = plan(url).hardware
    assert spec.bandwidth_fraction == pytest.approx(0.7, rel=0.02)
    assert spec.pass_overhead_us == pytest.approx(TRUE_OVERHEAD_US, rel=0.02)
    assert "bandwidth 0.70 of peak fitted to the timed cost profile" in spec.calibration


def test_an_absent_profile_falls_back_to_the_constants_and_the_plan_says_so(tmp_path: Path) -> None:
    url = database(tmp_path, engine="trtllm")  # a profile of another engine does not count
    fallback = plan(url)
    assert fallback.hardware.pass_overhead_us == ENGINE_STEP_OVERHEAD_US["vllm"]
    assert fallback.hardware.calibrated_from is None
    assert "no timed cost profile of the NVIDIA H200 with vllm is stored" in fallback.basis["calibration"]
    result = CliRunner().invoke(cli, ["plan", "--config", str(LLAMA_8B), "--hardware", "h200", "--engine", "vllm",
                                      "--acceptance-length", "3.2", "--concurrency", "1", "--json", "--step-costs", "roofline",
                                      "--db", url])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert "step overhead 250 us (assumed; no timed cost profile" in data["calibration"]
    assert data["basis"]["calibrated_from"] is None
    text = CliRunner().invoke(cli, ["plan", "--config", str(LLAMA_8B), "--hardware", "h200", "--engine", "trtllm",
                                    "--acceptance-length", "3.2", "--concurrency", "1", "--step-costs", "roofline",
                                    "--db", url])
    assert "calibration: " in text.output and "fitted to the timed cost profile 1" in text.output


def test_a_tuned_targets_plan_uses_the_profile_of_the_gpu_model_and_engine(tuned_url: str) -> None:  # noqa: F811
    shape = ModelShape.from_config(TARGET_CONFIG, params=9_300_000)  # the tuned built-in target: all overhead
    with open_database(tuned_url) as db, db.session() as session:
        [target] = profile_queries.find_models(session, TARGET)
        save_h200_profile(session, target.id, "vllm", timed_points(TRUE_OVERHEAD_US, BANDWIDTH_FRACTION, 32, shape))
    fitted = plan_deployment(tuned_url, hardware="h200", model=TARGET, scope=Scope(concurrencies=(1,)),
                             deployment=Deployment(engine="vllm"))
    assert fitted.hardware.pass_overhead_us == pytest.approx(TRUE_OVERHEAD_US, abs=1.0)
    assert "fitted to the timed cost profile 1 of autotune-byte-target on 1x NVIDIA H200" in fitted.basis["calibration"]
    assert not any("assumed step overhead" in w for w in fitted.warnings)  # measured, not assumed
    other = plan_deployment(tuned_url, hardware="h200", model=TARGET, scope=Scope(concurrencies=(1,)))  # trtllm: no profile
    assert "no timed cost profile of the NVIDIA H200 with trtllm" in other.basis["calibration"]


def test_the_fit_needs_baseline_points() -> None:
    spec, shape = accelerator("h200"), read_config_model(LLAMA_8B, "target").shape
    assert fit_step_costs(spec, shape, [CostPoint("ngram", None, 2, 1, 0.0, 0.01, 0.01, 64)], "x") is None


@pytest.mark.parametrize("args, fragment", [
    (("--calibration", "measured"), "--calibration must be one of auto, stored, assumed"),
    (("--calibration", "stored", "--engine", "sglang"), "--calibration stored: no timed cost profile of the NVIDIA H200"),
])
def test_bad_calibration_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], fragment: str) -> None:
    url = database(tmp_path)
    result = CliRunner().invoke(cli, ["plan", "--config", str(LLAMA_8B), "--hardware", "h200",
                                      "--acceptance-length", "3.2", "--db", url, *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], result.stderr
