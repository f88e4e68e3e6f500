"""``autotune plan`` on measured silicon: the real aiconfigurator-core (the ``plan`` extra) prices
each part of a step; the plan says which source priced what and which engine version the data is
from; the roofline takes over where the data has nothing, and bad input is one line, exit 2, with
nothing written."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from autotune.cli import cli
from autotune.errors import ConfigurationError
from autotune.hardware.catalog import accelerator
from autotune.planning import GivenAcceptance, Scope, plan_from_config
from autotune.planning.costs import Pricing
from autotune.planning.inputs import Deployment, compute_dtype, deployment_spec, read_config_model

pytest.importorskip("aiconfigurator_core", reason="the plan extra (aiconfigurator-core) is not installed")

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
LLAMA_8B, LLAMA_70B = str(CONFIGS / "llama-3.1-8b.json"), str(CONFIGS / "llama-3.3-70b.json")
EAGLE_70B, DEEPSEEK = str(CONFIGS / "eagle3-llama-3.3-70b.json"), str(CONFIGS / "deepseek-v3.json")
NOWHERE = "sqlite:///nowhere-at-all.db"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--db", NOWHERE])


def silicon_plan(config: str = LLAMA_8B, hardware: str = "h200", **options):  # noqa: ANN003, ANN201
    deployment = Deployment(**{k: options.pop(k) for k in ("tp", "ep", "dtype", "engine", "isl", "osl", "step_costs",
                                                           "engine_version") if k in options})
    return plan_from_config(NOWHERE, hardware=hardware, config=config, acceptance=GivenAcceptance(length=(2.8, 3)),
                            scope=Scope(concurrencies=options.pop("concurrencies", None)), deployment=deployment,
                            **options)


def test_deepseek_r1_mtp_on_8_h200_is_priced_by_the_trtllm_kernels_part_by_part() -> None:
    plan = silicon_plan(DEEPSEEK, tp=8, ep=8, isl=1024, osl=2048, concurrencies=(1, 64), step_costs="silicon")
    cost = plan.basis["cost"]
    assert cost["source"] == "silicon" and cost["data"] == "aiconfigurator-core 0.12.0, h200_sxm trtllm 1.3.0rc20"
    assert set(cost["parts"]) == {"target", "prefill", "mtp"}
    assert plan.title.startswith("PREDICTED — measured kernels (aiconfigurator-core 0.12.0, h200_sxm trtllm 1.3.0rc20)")
    lines = plan.basis_lines()
    assert any(line.startswith("step costs: measured kernels") for line in lines)
    assert any("mtp: aiconfigurator-core 0.12.0" in line and "one target layer" in line for line in lines)
    assert "added to the measured kernels" in plan.basis["calibration"]  # the roofline's shares are not used
    row = plan.rows[0]
    assert row.method == "mtp" and row.predicted_tokens_per_s_low < row.predicted_tokens_per_s < row.predicted_tokens_per_s_high
    # A plain step at batch 1 is the kernel data's (6.8 ms at 1.5k context on 1.3.0rc20) plus 100 us of
    # step overhead: nothing like the roofline's 5.9 ms of kernel floors and all-reduces.
    assert 6.5e-3 < 1 / row.predicted_baseline_tokens_per_s < 7.5e-3
    assert any("rows the library marks measured" in note for note in plan.notes)


def test_verifying_more_tokens_costs_more_gemm_rows_but_reads_the_kv_cache_once() -> None:
    model = read_config_model(LLAMA_8B, "target")
    base = accelerator("h100-sxm")
    spec = deployment_spec(base, Deployment(), compute_dtype(model.shape, base, None), None)
    pricing = Pricing(mode="silicon", gpu="NVIDIA H100 80GB HBM3", engine="vllm", target=model.source)
    pricer = pricing.price(spec, model.shape, {}, 2048, 1024).pricer
    one, four = pricer.target_s(256, 1), pricer.target_s(256, 4)
    attention = sum(s for name, s, _ in pricer._ops(pricer.target, 256) if name.endswith("_attention"))
    assert attention > 0.5 * one  # 256 rows x 2k context: the KV cache is most of a plain step
    assert four < one + 3 * (one - attention)  # the extra tokens add GEMM rows, not KV reads


def test_an_eagle3_head_of_the_targets_width_is_priced_as_target_layers() -> None:
    plan = silicon_plan(LLAMA_70B, tp=8, draft_config=EAGLE_70B, concurrencies=(4,), step_costs="silicon")
    parts = plan.basis["cost"]["parts"]
    assert "1 target layer(s) and the LM head over 32,000 tokens" in parts["draft eagle3-llama-3.3-70b"]


def test_auto_falls_back_to_the_roofline_and_says_why() -> None:
    plan = silicon_plan(hardware="h20", concurrencies=(1,))  # no H20 in the kernel data
    assert plan.basis["cost"]["source"] == "roofline" and plan.title.startswith("PREDICTED — roofline for")
    assert any(note.startswith("step costs from the roofline: aiconfigurator-core 0.12.0 has no measured data for "
                               "the NVIDIA H20") for note in plan.notes)


def test_without_the_extra_auto_says_how_to_install_it_and_silicon_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_aiconfigurator(name, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if name.startswith("aiconfigurator_core"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_aiconfigurator)
    plan = silicon_plan(concurrencies=(1,))
    [why] = [note for note in plan.notes if note.startswith("step costs from the roofline")]
    assert 'pip install -e ".[plan]"' in why and "\n" not in why
    with pytest.raises(ConfigurationError, match=r"aiconfigurator-core is not installed: pip install"):
        silicon_plan(concurrencies=(1,), step_costs="silicon")


@pytest.mark.parametrize("args, fragment", [
    (("--hardware", "h20", "--step-costs", "silicon"), "has no measured data for the NVIDIA H20"),
    (("--hardware", "h200", "--engine-version", "1.2.0"), "has no trtllm 1.2.0 data for h200_sxm (it has 1.3.0rc20"),
    (("--hardware", "h200", "--engine", "vllm", "--engine-version", "0.9.0", "--step-costs", "silicon"),
     "has no vllm 0.9.0 data"),
    (("--hardware", "h200", "--engine-version", "1.3.0rc20", "--step-costs", "roofline"), "--engine-version picks"),
    (("--hardware", "h200", "--step-costs", "kernels"), "--step-costs must be one of auto, silicon, roofline"),
    (("--hardware", "h200", "--tp", "8", "--ep", "3"), "--ep must divide --tp 8"),
])
def test_bad_silicon_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, args: tuple[str, ...],
                                                                  fragment: str) -> None:
    database = tmp_path / "autotune.db"
    result = CliRunner().invoke(cli, ["plan", "--config", LLAMA_8B, "--acceptance-length", "2.5", *args,
                                      "--db", f"sqlite:///{database}"])
    assert result.exit_code == 2, result.output
    assert fragment in result.output and len(result.output.strip().splitlines()) == 1
    assert not database.exists()


def test_a_config_with_no_layers_is_refused_in_one_line(tmp_path: Path) -> None:
    config = json.loads(Path(LLAMA_8B).read_text())
    config["num_hidden_layers"] = 0
    path = tmp_path / "no-layers.json"
    path.write_text(json.dumps(config))
    result = run("plan", "--config", str(path), "--hardware", "h200", "--acceptance-length", "2.5")
    assert result.exit_code == 2 and "lacks num_hidden_layers" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_export_writes_the_planned_parallelism(tmp_path: Path) -> None:
    out = tmp_path / "plan.yaml"
    result = run("plan", "--config", DEEPSEEK, "--hardware", "h200", "--acceptance-length", "2.8@3", "--tp", "8",
                 "--ep", "8", "--concurrency", "1", "--export", "trtllm", "-o", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    config = yaml.safe_load(text)
    assert config["tensor_parallel_size"] == 8 and config["moe_expert_parallel_size"] == 8
    assert text.startswith("# PREDICTED by autotune plan (measured kernels (aiconfigurator-core 0.12.0")
    vllm = tmp_path / "plan.sh"
    assert run("plan", "--config", DEEPSEEK, "--hardware", "h200", "--acceptance-length", "2.8@3", "--tp", "8",
               "--ep", "8", "--concurrency", "1", "--export", "vllm", "-o", str(vllm)).exit_code == 0
    assert "--tensor-parallel-size 8 --enable-expert-parallel" in vllm.read_text()
