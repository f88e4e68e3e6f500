"""Engines by name: lazy imports, unknown names, and factories a worker process can build."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.registry import ENGINES, check_engine, create_engine, engine_adapter, engine_spec, folder_support
from autotune.engines.worker import EngineWorker
from autotune.errors import ConfigurationError
from autotune.workload import Request, Workload


def test_importing_the_registry_loads_no_engine() -> None:
    code = (
        "import sys, autotune.engines.registry, autotune.engines.trtllm.engine, autotune.preflight; "
        "print(sorted(m for m in ('torch', 'tensorrt_llm', 'vllm') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("make", [check_engine, create_engine, engine_spec, engine_adapter])
def test_unknown_engine_is_a_configuration_error(make) -> None:
    with pytest.raises(ConfigurationError, match="unknown engine 'sglang'; choose one of embedded, trtllm, vllm"):
        make("sglang")
    assert ENGINES == ("embedded", "trtllm", "vllm")


def test_each_engine_carries_its_capabilities() -> None:
    capabilities = {name: (engine_adapter(name).runs_model_folders, engine_adapter(name).times_steps,
                           engine_adapter(name).default_sampler, engine_adapter(name).needs_cuda) for name in ENGINES}
    assert capabilities == {
        "embedded": (False, True, "model", False),
        "trtllm": (True, True, "model", True),
        "vllm": (True, True, "model", False),
    }


def test_the_embedded_study_spec_runs_on_the_study_device() -> None:
    spec = engine_adapter("embedded").study_spec("target.safetensors", max_batch_size=8, device="cuda")
    assert spec == engine_spec("embedded", target="target.safetensors", device="cuda")


def test_embedded_engine_in_process_and_in_a_worker() -> None:
    engine = create_engine("embedded", device="cpu")
    assert engine.name == "embedded"
    workload = Workload("tiny", [Request("def f(x):", 4), Request("import os", 3)])
    with EngineWorker(engine_spec("embedded", device="cpu"), timeout_s=120) as worker:
        runs = [worker.measure(EngineConfig("none"), workload, concurrency) for concurrency in (1, 2)]
        assert worker.starts == 1  # one process serves every concurrency of a configuration
    # Each a stream of at least 4 requests per slot: the two prompts 2 and 4 times.
    assert [run.output_tokens for run in runs] == [14, 28] and runs[0].outputs == runs[1].outputs[:4]


def test_folder_support_for_the_engines_that_run_hugging_face_folders() -> None:
    assert folder_support("trtllm").engine == "trtllm" and folder_support("vllm").engine == "vllm"
    with pytest.raises(ConfigurationError, match="does not run Hugging Face model folders; use --engine trtllm or vllm"):
        folder_support("embedded")
