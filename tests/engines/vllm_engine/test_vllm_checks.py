"""What the vLLM engine checks in the model folders before anything starts (check_config)."""

from __future__ import annotations

import pytest

import hf_model_factory as hf
from autotune.engines.base import EngineConfig
from autotune.engines.registry import engine_adapter
from autotune.engines.vllm.checks import check_config
from autotune.errors import ConfigurationError, UnsupportedConfigError
from autotune.models.folder import ModelFolders


@pytest.mark.parametrize("config", [EngineConfig("none"), EngineConfig("ngram", 4)])
def test_methods_without_a_draft_folder_need_no_kind(llama_target, config) -> None:
    assert check_config(config, llama_target, ModelFolders()) is None


def test_a_whole_draft_model_is_draft_target(llama_target, draft_folder) -> None:
    assert check_config(EngineConfig("draft", 3, str(draft_folder)), llama_target, ModelFolders()) == "draft_target"


def test_an_eagle3_head_is_eagle3(llama_target, eagle3_head) -> None:
    assert check_config(EngineConfig("draft", 3, str(eagle3_head)), llama_target, ModelFolders()) == "eagle3"


def test_an_eagle_1_or_2_head_is_unsupported(llama_target, eagle_head) -> None:
    with pytest.raises(UnsupportedConfigError) as failure:
        check_config(EngineConfig("draft", 2, str(eagle_head)), llama_target, ModelFolders())
    assert str(failure.value).startswith("eagle-head is an EAGLE-1/2 head; this adapter runs EAGLE-3 heads")


@pytest.mark.parametrize("draft", [None, "builtin"])
def test_a_draft_without_a_folder_is_refused_before_anything_starts(llama_target, draft) -> None:
    with pytest.raises(ConfigurationError) as failure:
        check_config(EngineConfig("draft", 2, draft), llama_target, ModelFolders())
    assert "--draft DRAFT_FOLDER" in str(failure.value)
    assert "autotune models export-hf" in str(failure.value)


def test_a_draft_that_is_not_a_folder(llama_target, tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="is not a folder"):
        check_config(EngineConfig("draft", 2, str(tmp_path / "missing")), llama_target, ModelFolders())


def test_a_draft_folder_without_config_json(llama_target, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="has no config.json"):
        check_config(EngineConfig("draft", 2, str(tmp_path / "empty")), llama_target, ModelFolders())


def test_mtp_on_an_architecture_vllm_runs(mimo_target) -> None:
    assert check_config(EngineConfig("mtp", 2), mimo_target, ModelFolders()) is None


def test_mtp_named_by_model_type_and_the_other_config_key(tmp_path) -> None:
    config = hf.llama_config(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", mtp_num_hidden_layers=1)
    target = hf.write_model(tmp_path / "deepseek", config, weights=False)
    assert check_config(EngineConfig("mtp", 1), target, ModelFolders()) is None


def test_mtp_layers_on_an_architecture_without_a_vllm_drafter(llama_mtp_target) -> None:
    with pytest.raises(UnsupportedConfigError) as failure:
        check_config(EngineConfig("mtp", 2), llama_mtp_target, ModelFolders())
    assert str(failure.value) == ("vLLM has no MTP drafter for LlamaForCausalLM (model_type 'llama'); "
                                  "use draft or ngram")


def test_mtp_on_a_target_without_mtp_layers(llama_target) -> None:
    with pytest.raises(UnsupportedConfigError) as failure:
        check_config(EngineConfig("mtp", 2), llama_target, ModelFolders())
    message = str(failure.value)
    assert "llama-target has none" in message
    assert "num_nextn_predict_layers / mtp_num_hidden_layers" in message


def test_mtp_layers_set_to_zero_are_none(tmp_path) -> None:
    config = hf.llama_config(architectures=["MiMoForCausalLM"], model_type="mimo", num_nextn_predict_layers=0)
    target = hf.write_model(tmp_path / "mimo-without-mtp", config, weights=False)
    with pytest.raises(UnsupportedConfigError, match="has none"):
        check_config(EngineConfig("mtp", 1), target, ModelFolders())


def test_mtp_on_a_target_that_is_not_a_folder(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="target .* is not a folder"):
        check_config(EngineConfig("mtp", 1), tmp_path / "missing", ModelFolders())


def test_an_invalid_configuration(llama_target, draft_folder) -> None:
    with pytest.raises(ConfigurationError, match="only used by method draft"):
        check_config(EngineConfig("ngram", 2, str(draft_folder)), llama_target, ModelFolders())
    with pytest.raises(ConfigurationError, match="needs depth >= 1"):
        check_config(EngineConfig("mtp", 0), llama_target, ModelFolders())


@pytest.mark.parametrize(("depth", "refused"), [(1, False), (2, False), (3, True), (4, False), (5, True), (6, False)])
def test_mtp_depths_past_the_layers_must_be_multiples_of_them(tmp_path, depth, refused) -> None:
    """vLLM 0.32.0 reuses a target's MTP layers in whole rounds (vllm/config/speculative.py
    l.1493-1501): 2 layers run depths 1, 2, 4, 6, not 3 or 5. The study leaves those out before
    building (the adapter's depth_refusal, the plan's infeasibility); a measure fails at once."""
    config = hf.llama_config(architectures=["MiMoForCausalLM"], model_type="mimo", num_nextn_predict_layers=2)
    target = hf.write_model(tmp_path / "mimo-2", config, weights=False)
    why = engine_adapter("vllm").depth_refusal("mtp", depth, ModelFolders().get(target, "target"))
    assert (why is not None) == refused
    assert engine_adapter("vllm").depth_refusal("draft", depth, ModelFolders().get(target, "target")) is None
    assert engine_adapter("trtllm").depth_refusal("mtp", depth, ModelFolders().get(target, "target")) is None
    if refused:
        assert f"depth {depth} is neither" in why and "2 MTP layers" in why
        with pytest.raises(UnsupportedConfigError, match=f"depth {depth} is neither"):
            check_config(EngineConfig("mtp", depth), target, ModelFolders())
    else:
        assert check_config(EngineConfig("mtp", depth), target, ModelFolders()) is None
