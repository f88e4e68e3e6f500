"""Fixtures of the TensorRT-LLM engine tests: the fake ``tensorrt_llm`` package and model folders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import hf_model_factory
from autotune.engines.trtllm.runner import TrtLlmRunner

FAKE_TRTLLM_DIR = Path(__file__).parent / "fake_trtllm"  # made importable by tests/conftest.py's fake_trtllm


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


def unload_fake() -> None:
    """Forget the fake's modules, so that the next import reads FAKE_TRTLLM_VERSION again."""
    for name in [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]:
        del sys.modules[name]


@pytest.fixture
def fake_release(monkeypatch: pytest.MonkeyPatch):
    """``load(version)``: the fake's llmapi module imported in this process as release ``version``
    (runners built here import that one too); unloaded afterwards."""
    monkeypatch.syspath_prepend(str(FAKE_TRTLLM_DIR))

    def load(version: str):
        unload_fake()
        monkeypatch.setenv("FAKE_TRTLLM_VERSION", version)
        import tensorrt_llm.llmapi as llmapi

        return llmapi

    yield load
    unload_fake()


@pytest.fixture
def make_runner(monkeypatch: pytest.MonkeyPatch):
    """``make(target, **kwargs)``: a :class:`TrtLlmRunner` in this process over the stand-in (stats
    timeout 0.1 s unless given); every one closed and the stand-in unloaded afterwards."""
    monkeypatch.syspath_prepend(str(FAKE_TRTLLM_DIR))
    made: list[TrtLlmRunner] = []

    def make(target: Path, **kwargs) -> TrtLlmRunner:
        made.append(TrtLlmRunner(str(target), **{"stats_timeout_s": 0.1, **kwargs}))
        return made[-1]

    yield make
    for runner in made:
        runner.close()
    unload_fake()


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
