"""Real config.json files under ``autotune plan``: every config we ship (tests/data/configs, copied
from the checkpoints' Hugging Face repositories by way of aiconfigurator-core's model_configs) and
every one aiconfigurator-core ships either plans with weights within 5 % of the published parameter
count x the checkpoint's bytes per weight, or is refused in one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli import cli
from autotune.errors import ConfigurationError
from autotune.models.quantization import MXFP4_BYTES, NVFP4_BYTES
from autotune.planning.inputs import read_config_model

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
try:
    import aiconfigurator_core
    SHIPPED = Path(aiconfigurator_core.__file__).parent / "model_configs"
except ImportError:  # the plan extra is not installed: our own configs only
    SHIPPED = None
# Total parameters as the model cards publish them (embeddings and MTP modules included), by the
# name a config file's stem or aiconfigurator-core's file name starts with.
PUBLISHED = {
    "llama-4-maverick": 400e9,  # meta-llama/Llama-4-Maverick-17B-128E: "17B active, 400B total"
    "meta-llama--Llama-4-Maverick": 400e9,
    "meta-llama--Llama-4-Scout": 109e9,  # "17B active, 109B total"
    "deepseek-v3": 685e9,  # DeepSeek-V3 README: 671B main model + 14B MTP module
    "deepseek-ai--DeepSeek-R1": 685e9, "deepseek-ai--DeepSeek-V3_": 685e9, "nvidia--DeepSeek-V3.1-NVFP4": 685e9,
    "qwen3-30b-a3b": 30.5e9,  # Qwen3 model cards: 30.5B total, 3.3B active
    "Qwen--Qwen3-30B-A3B": 30.5e9, "Qwen--Qwen3-235B-A22B": 235e9, "Qwen--Qwen3-32B": 32.8e9,
    "Qwen--Qwen3-8B": 8.2e9, "Qwen--Qwen3-Coder-480B-A35B": 480e9, "nvidia--Qwen3-235B-A22B": 235e9,
    "gemma-4-26b-a4b": 26e9, "google--gemma-4-26B-A4B": 26e9,  # the name's count (no model card read)
    "gpt-oss-120b": 117e9, "openai--gpt-oss-120b": 117e9, "openai--gpt-oss-20b": 21e9,  # gpt-oss model card
    "llama-3.1-8b": 8.03e9, "meta-llama--Meta-Llama-3.1-8B": 8.03e9, "llama-3.3-70b": 70.6e9,
    "meta-llama--Meta-Llama-3.1-70B": 70.6e9, "meta-llama--Meta-Llama-3.1-405B": 405.9e9,
    "mistralai--Mixtral-8x7B": 46.7e9, "mistralai--Mixtral-8x22B": 141e9,  # Mistral's announcements
    "moonshotai--Kimi-K2-Instruct": 1.0e12,  # "1 trillion total parameters"
    "MiniMaxAI--MiniMax-M2.5": 230e9, "XiaomiMiMo--MiMo-V2-Flash": 309e9,
}


def all_configs() -> list[Path]:
    ours = [p for p in sorted(CONFIGS.glob("*.json")) if not p.name.endswith("hf_quant_config.json")]
    theirs = [] if SHIPPED is None else [p for p in sorted(SHIPPED.glob("*_config.json"))
                                         if not p.name.endswith("hf_quant_config.json")]
    return ours + theirs


def published(path: Path) -> float | None:
    return next((count for prefix, count in PUBLISHED.items() if path.name.startswith(prefix)), None)


@pytest.mark.parametrize("path", all_configs(), ids=lambda p: p.name)
def test_every_shipped_config_plans_with_its_weights_or_is_refused_naming_the_field(path: Path) -> None:
    role = "draft" if path.name.startswith("eagle3") else "target"
    try:
        model = read_config_model(path, role)
    except ConfigurationError as exc:
        message = str(exc)
        assert "\n" not in message and any(word in message for word in ("lacks", "declares")), message
        return
    shape = model.shape
    assert shape.total_params > 0 and shape.weight_bytes() > 0
    count = published(path)
    if count is not None:
        for tp in (1, 8):
            per_gpu = shape.footprint(path.stem, tp).weight_bytes
            assert per_gpu == pytest.approx(count * shape.bytes_per_param / tp, rel=0.05), path.name


@pytest.mark.parametrize("name, bytes_per_param", [
    ("llama-4-maverick-17b-128e-instruct.json", 2.0), ("deepseek-v3.json", 1.0), ("gpt-oss-120b.json", MXFP4_BYTES),
    ("deepseek-v3.1-nvfp4_config.json", NVFP4_BYTES), ("qwen3-30b-a3b.json", 2.0), ("gemma-4-26b-a4b.json", 2.0),
])
def test_the_checkpoints_bytes_per_weight_come_from_its_quantisation(name: str, bytes_per_param: float) -> None:
    assert read_config_model(CONFIGS / name, "target").shape.bytes_per_param == pytest.approx(bytes_per_param)


def test_llama_4_maverick_interleaves_dense_and_moe_layers() -> None:
    shape = read_config_model(CONFIGS / "llama-4-maverick-17b-128e-instruct.json", "target").shape
    assert (shape.layers, shape.moe_layers, shape.experts, shape.experts_per_token) == (48, 24, 128, 1)
    assert (shape.d_ff, shape.expert_d_ff, shape.shared_d_ff) == (16384, 8192, 8192)


@pytest.mark.parametrize("config, tp, low_gib, high_gib", [
    ("llama-4-maverick-17b-128e-instruct.json", 8, 90, 97),  # 400B x 2 bytes / 8: ~93 GiB (issue 41: was 182)
    ("deepseek-v3.json", 8, 78, 82),  # 685B x 1 byte / 8
    ("qwen3-30b-a3b.json", 1, 55, 59),  # 30.5B x 2 bytes
    ("gemma-4-26b-a4b.json", 1, 46, 50),
])
def test_the_named_families_plan_with_sane_weights_per_gpu(tmp_path: Path, config: str, tp: int, low_gib: float,
                                                           high_gib: float) -> None:
    result = CliRunner().invoke(cli, ["plan", "--config", str(CONFIGS / config), "--hardware", "b200", "--tp", str(tp),
                                      "--acceptance-length", "2.5", "--concurrency", "1", "--step-costs", "roofline",
                                      "--json", "--db", f"sqlite:///{tmp_path / 'none.db'}"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)["per_concurrency"][0]
    weights_gib = read_config_model(CONFIGS / config, "target").shape.footprint("x", tp).weight_bytes / 2 ** 30
    assert low_gib < weights_gib < high_gib and row["memory_bytes"] / 2 ** 30 > weights_gib and row["fits"]
