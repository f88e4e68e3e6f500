"""Model folders for the vLLM adapter's tests (written by tests/hf_model_factory.py) and a switch
that makes ``vllm`` look installed or missing to :func:`autotune.engines.vllm.require_vllm`."""

from __future__ import annotations

import importlib.machinery
import importlib.util

import pytest

import hf_model_factory as hf


def _find_spec_with_vllm(monkeypatch: pytest.MonkeyPatch, spec: importlib.machinery.ModuleSpec | None) -> None:
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return spec if name == "vllm" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.fixture
def no_vllm(monkeypatch):
    """``vllm`` is not importable (it is not in the project venv either)."""
    _find_spec_with_vllm(monkeypatch, None)


@pytest.fixture
def fake_vllm(monkeypatch):
    """``vllm`` looks installed; nothing ever imports it in these tests."""
    _find_spec_with_vllm(monkeypatch, importlib.machinery.ModuleSpec("vllm", None))


@pytest.fixture
def llama_target(tmp_path):
    return hf.write_model(tmp_path / "llama-target")


@pytest.fixture
def llama_mtp_target(tmp_path):
    """MTP layers in config.json, but an architecture vLLM has no MTP drafter for."""
    return hf.write_model(tmp_path / "llama-mtp-target", hf.llama_config(num_nextn_predict_layers=1), weights=False)


@pytest.fixture
def mimo_target(tmp_path):
    config = hf.llama_config(architectures=["MiMoForCausalLM"], model_type="mimo", num_nextn_predict_layers=1)
    return hf.write_model(tmp_path / "mimo-target", config, weights=False)


@pytest.fixture
def draft_folder(tmp_path):
    return hf.write_model(tmp_path / "draft", hf.llama_config(num_hidden_layers=1), weights=False)


@pytest.fixture
def eagle3_head(tmp_path):
    config = hf.llama_config(architectures=["LlamaForCausalLMEagle3"], num_hidden_layers=1)
    return hf.write_model(tmp_path / "eagle3-head", config, tokenizer=None, weights=False)


@pytest.fixture
def eagle_head(tmp_path):
    config = hf.llama_config(architectures=["LlamaForCausalLMEagle"], num_hidden_layers=1)
    return hf.write_model(tmp_path / "eagle-head", config, tokenizer=None, weights=False)
