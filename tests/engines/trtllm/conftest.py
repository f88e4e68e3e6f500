"""Fixtures of the TensorRT-LLM engine tests: the fake ``tensorrt_llm`` package and model folders."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import hf_model_factory

FAKE_TRTLLM_DIR = Path(__file__).parent / "fake_trtllm"


@pytest.fixture
def fake_trtllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[], list[dict]]:
    """Make the fake TensorRT-LLM importable (worker processes inherit sys.path); returns a reader
    of its event log. The test process itself must never import it."""
    monkeypatch.syspath_prepend(str(FAKE_TRTLLM_DIR))
    log = tmp_path / "fake-trtllm.jsonl"
    monkeypatch.setenv("FAKE_TRTLLM_LOG", str(log))
    monkeypatch.delenv("FAKE_TRTLLM_FAULT", raising=False)

    def events() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    yield events
    assert "tensorrt_llm" not in sys.modules, "the test process imported tensorrt_llm; only workers may"


@pytest.fixture
def fake_trtllm_dir() -> Path:
    return FAKE_TRTLLM_DIR


@pytest.fixture
def fake_llmapi(monkeypatch: pytest.MonkeyPatch):
    """The fake's llmapi module, imported in this process (for checking names, not for engines)."""
    monkeypatch.syspath_prepend(str(FAKE_TRTLLM_DIR))
    import tensorrt_llm.llmapi as llmapi

    yield llmapi
    for name in [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]:
        del sys.modules[name]


@pytest.fixture
def target_dir(tmp_path: Path) -> Path:
    return hf_model_factory.write_model(tmp_path / "target")


@pytest.fixture
def mtp_target_dir(tmp_path: Path) -> Path:
    config = hf_model_factory.llama_config(architectures=["DeepseekV3ForCausalLM"], num_nextn_predict_layers=1)
    return hf_model_factory.write_model(tmp_path / "mtp-target", config)


@pytest.fixture
def draft_dir(tmp_path: Path) -> Path:
    return hf_model_factory.write_model(tmp_path / "draft", hf_model_factory.llama_config(num_hidden_layers=1))


@pytest.fixture
def eagle3_dir(tmp_path: Path) -> Path:
    config = hf_model_factory.llama_config(architectures=["LlamaForCausalLMEagle3"], num_hidden_layers=1,
                                           draft_vocab_size=64)
    return hf_model_factory.write_model(tmp_path / "eagle3-head", config, tokenizer=None, weights=False)
