"""Architecture checks as each engine's FolderSupport answers them: TensorRT-LLM's PyTorch model table,
vLLM's any-generative rule, MTP availability, EAGLE-3 heads."""

from __future__ import annotations

import pytest

from autotune.engines.trtllm.checks import TRTLLM_PYTORCH_ARCHITECTURES, TRTLLM_SUPPORT
from autotune.engines.vllm.checks import VLLM_SUPPORT
from autotune.models.folder import read_model
from autotune.models.kind import mtp_layers
from autotune.preflight.architecture import check_draft_architecture, check_mtp, check_target_architecture
from hf_model_factory import llama_config, write_model


def model(tmp_path, name, **config):
    return read_model(write_model(tmp_path / name, llama_config(**config), weights=False), name)


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                          "MistralForCausalLM", "DeepseekV3ForCausalLM"])
def test_common_architectures_are_supported(tmp_path, architecture) -> None:
    assert architecture in TRTLLM_PYTORCH_ARCHITECTURES
    assert check_target_architecture(model(tmp_path, "t", architectures=[architecture]), TRTLLM_SUPPORT).status == "ok"


def test_unsupported_architecture_is_an_error_naming_it(tmp_path) -> None:
    check = check_target_architecture(model(tmp_path, "t", architectures=["GPT2LMHeadModel"]), TRTLLM_SUPPORT)
    assert check.status == "error" and "GPT2LMHeadModel" in check.message
    assert check_target_architecture(model(tmp_path, "u", architectures=[]), TRTLLM_SUPPORT).status == "error"


def test_mtp_available_with_its_depth_range(tmp_path) -> None:
    target = model(tmp_path, "t", architectures=["DeepseekV3ForCausalLM"], num_nextn_predict_layers=1)
    check = check_mtp(target, [1, 2, 3], requested=True, support=TRTLLM_SUPPORT)
    assert check.status == "ok" and check.details["mtp_layers"] == 1 and check.details["depth_range"] == [1, 16]
    assert "depths 1..1 use them directly" in check.message


def test_mtp_absent_is_an_error_only_when_asked_for(tmp_path) -> None:
    target = model(tmp_path, "t")
    assert mtp_layers(target.config) == 0
    assert check_mtp(target, [1], requested=True, support=TRTLLM_SUPPORT).status == "error"
    assert check_mtp(target, [1], requested=False, support=TRTLLM_SUPPORT).status == "ok"


def test_mtp_layers_of_other_families(tmp_path) -> None:
    qwen_next = model(tmp_path, "q", architectures=["Qwen3NextForCausalLM"], mtp_num_hidden_layers=1)
    assert mtp_layers(qwen_next.config) == 1
    glm = model(tmp_path, "g", architectures=["Glm4MoeForCausalLM"], num_nextn_predict_layers=1)
    # modules present, support not listed by NVIDIA
    assert check_mtp(glm, [2], requested=True, support=TRTLLM_SUPPORT).status == "warn"
    nested = {"text_config": {"num_nextn_predict_layers": 2}}
    assert mtp_layers(nested) == 2


def test_draft_kinds(tmp_path) -> None:
    llama = model(tmp_path, "t")
    deepseek = model(tmp_path, "d", architectures=["DeepseekV3ForCausalLM"])
    head = model(tmp_path, "h", architectures=["LlamaForCausalLMEagle3"])
    assert check_draft_architecture(llama, head, "h", TRTLLM_SUPPORT).status == "ok"
    check = check_draft_architecture(deepseek, head, "h", TRTLLM_SUPPORT)
    assert check.status == "error" and "use MTP" in check.message
    old_head = model(tmp_path, "o", architectures=["EagleLlamaForCausalLM"])
    assert "EAGLE-3 heads only" in check_draft_architecture(llama, old_head, "o", TRTLLM_SUPPORT).message
    assert check_draft_architecture(llama, model(tmp_path, "x", architectures=["BloomForCausalLM"]), "x", TRTLLM_SUPPORT).status == "error"


def test_vllm_runs_any_generative_architecture_and_eagle3_with_any_target(tmp_path) -> None:
    assert check_target_architecture(model(tmp_path, "b", architectures=["BloomForCausalLM"]), VLLM_SUPPORT).status == "ok"
    check = check_target_architecture(model(tmp_path, "c", architectures=["BertForSequenceClassification"]), VLLM_SUPPORT)
    assert check.status == "error" and "not a generative model vLLM serves" in check.message
    deepseek = model(tmp_path, "d", architectures=["DeepseekV3ForCausalLM"])
    head = model(tmp_path, "h", architectures=["LlamaForCausalLMEagle3"])
    assert check_draft_architecture(deepseek, head, "h", VLLM_SUPPORT).status == "ok"
