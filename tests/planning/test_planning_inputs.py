"""What a plan reads before it predicts: configs (causal LMs with their sizes, EAGLE-3 heads with
their draft vocabulary), the deployment's checks, the compute dtype a checkpoint and a GPU give."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.errors import ConfigurationError
from autotune.hardware.catalog import accelerator
from autotune.planning.inputs import Deployment, compute_dtype, deployment_spec, read_config_model

CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def test_a_config_or_its_folder_is_read_as_a_model(tmp_path: Path) -> None:
    llama = read_config_model(CONFIGS / "llama-3.1-8b.json", "target")
    assert llama.info.num_params == pytest.approx(8.03e9, rel=0.01) and llama.info.name == "llama-3.1-8b"
    folder = tmp_path / "Llama"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-3.1-8b.json").read_text())
    assert read_config_model(folder, "target").info.name == "Llama"
    head = read_config_model(CONFIGS / "eagle3-llama-3.1-8b.json", "draft")
    assert head.kind == "eagle3" and head.shape.vocab == 32000 and head.shape.layers == 1


def test_the_compute_dtype_follows_the_checkpoint_where_the_gpu_has_the_tensor_cores() -> None:
    deepseek = read_config_model(CONFIGS / "deepseek-v3.json", "target").shape  # FP8 weights
    assert compute_dtype(deepseek, accelerator("h200"), None) == "fp8"
    assert compute_dtype(deepseek, accelerator("a100-80gb"), None) == "bf16"  # weight-only: no FP8 cores
    assert compute_dtype(deepseek, accelerator("b200"), "fp4") == "fp4"
    with pytest.raises(ConfigurationError, match="no FP8 tensor cores"):
        compute_dtype(deepseek, accelerator("a100-80gb"), "fp8")


def test_the_deployment_is_checked() -> None:
    for bad in (dict(tp=0), dict(dtype="int4"), dict(engine="tgi"), dict(isl=0)):
        with pytest.raises(ConfigurationError):
            Deployment(**bad)
    shape = read_config_model(CONFIGS / "llama-3.1-8b.json", "target").shape
    assert Deployment(dtype="fp8", kv_dtype="fp8").shape(shape, "target").kv_bytes == 1
    with pytest.raises(ConfigurationError, match="does not divide"):
        Deployment(tp=3).shape(shape, "target")
    spec = deployment_spec(accelerator("h200"), Deployment(tp=2, engine="sglang"), "bf16", None)
    assert spec.tp == 2 and "sglang" in spec.calibration
    cpu = replace(accelerator("h200"), device_type="cpu")
    with pytest.raises(ConfigurationError, match="CPU"):
        deployment_spec(cpu, Deployment(tp=2), "bf16", None)


def test_a_config_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        read_config_model(bad, "target")
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(ConfigurationError, match="JSON object"):
        read_config_model(bad, "target")
