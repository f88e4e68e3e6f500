"""Our configuration -> vLLM's engine arguments (autotune.engines.vllm.mapping): pure, no vLLM."""

from __future__ import annotations

import pytest

import hf_model_factory as hf
from autotune.engines.base import EngineConfig
from autotune.engines.limits import DEFAULT_MAX_NGRAM
from autotune.engines.vllm.mapping import EngineSettings, engine_arguments, runs_mtp, speculative_config
from autotune.errors import ConfigurationError, UnsupportedConfigError

DRAFT = "/models/draft"


def test_the_default_ngram_window_is_the_embedded_engines() -> None:
    assert DEFAULT_MAX_NGRAM == 3


def test_ngram_is_prompt_lookup_from_the_window_down_to_one() -> None:
    assert speculative_config(EngineConfig("ngram", 4), None) == {
        "num_speculative_tokens": 4, "method": "ngram", "prompt_lookup_max": 3, "prompt_lookup_min": 1,
    }
    assert speculative_config(EngineConfig("ngram", 2), None, max_ngram=5) == {
        "num_speculative_tokens": 2, "method": "ngram", "prompt_lookup_max": 5, "prompt_lookup_min": 1,
    }


@pytest.mark.parametrize("kind", [None, "draft_target"])
def test_a_whole_draft_model_is_draft_model_with_its_folder(kind) -> None:
    assert speculative_config(EngineConfig("draft", 3, DRAFT), kind) == {
        "num_speculative_tokens": 3, "method": "draft_model", "model": DRAFT,
    }


def test_an_eagle3_head_is_eagle3_with_its_folder() -> None:
    assert speculative_config(EngineConfig("draft", 5, DRAFT), "eagle3") == {
        "num_speculative_tokens": 5, "method": "eagle3", "model": DRAFT,
    }


def test_mtp_names_no_model() -> None:
    assert speculative_config(EngineConfig("mtp", 2), None) == {"num_speculative_tokens": 2, "method": "mtp"}


def test_method_none_has_no_speculative_config() -> None:
    assert speculative_config(EngineConfig("none"), None) is None


@pytest.mark.parametrize("draft", [None, "builtin"])
def test_a_draft_without_a_folder_asks_for_one(draft) -> None:
    with pytest.raises(ConfigurationError) as failure:
        speculative_config(EngineConfig("draft", 2, draft), None)
    message = str(failure.value)
    assert "--draft DRAFT_FOLDER" in message
    assert "autotune models export-hf --out DIR" in message


def test_an_eagle_1_or_2_head_is_unsupported() -> None:
    with pytest.raises(UnsupportedConfigError, match="not a eagle draft"):
        speculative_config(EngineConfig("draft", 2, DRAFT), "eagle")


def test_an_invalid_configuration_is_refused_before_mapping() -> None:
    with pytest.raises(ConfigurationError, match="depth must be 0"):
        speculative_config(EngineConfig("none", 2), None)
    with pytest.raises(ConfigurationError, match="needs depth >= 1"):
        speculative_config(EngineConfig("ngram", 0), None)


def test_engine_arguments_of_a_speculative_configuration() -> None:
    # Built as `vllm serve` runs the export: compiled, vLLM's dtype, the exported step budget (8192).
    assert engine_arguments(EngineConfig("draft", 4, DRAFT), "/models/target", 8, "eagle3") == {
        "model": "/models/target", "tokenizer": "/models/target", "max_num_seqs": 8, "max_num_batched_tokens": 8192,
        "enforce_eager": False, "dtype": "auto", "seed": 0, "disable_log_stats": False,
        "speculative_config": {"num_speculative_tokens": 4, "method": "eagle3", "model": DRAFT},
    }


def test_engine_arguments_pass_the_options_through() -> None:
    arguments = engine_arguments(EngineConfig("ngram", 2), "/t", 3, None,
                                 EngineSettings(max_ngram=4, enforce_eager=True, dtype="float32", seed=7))
    assert arguments == {
        "model": "/t", "tokenizer": "/t", "max_num_seqs": 3, "max_num_batched_tokens": 8192, "enforce_eager": True,
        "dtype": "float32", "seed": 7, "disable_log_stats": False,
        "speculative_config": {"num_speculative_tokens": 2, "method": "ngram", "prompt_lookup_max": 4,
                               "prompt_lookup_min": 1},
    }


def test_method_none_has_no_speculative_config_argument() -> None:
    arguments = engine_arguments(EngineConfig("none"), "/t", 1, None, EngineSettings(dtype="bfloat16"))
    assert "speculative_config" not in arguments
    assert arguments["disable_log_stats"] is False  # the per-step statistics are where the counts come from
    assert arguments["dtype"] == "bfloat16"
    assert arguments["max_num_seqs"] == 1


def test_the_step_budget_holds_every_row_verifying_its_whole_draft() -> None:
    # The exported script's --max-num-batched-tokens: at least 8192, and every row's depth + 1 tokens
    # (autotune/profiles/analysis.py ServingSchedule.max_num_tokens).
    assert engine_arguments(EngineConfig("ngram", 7), "/t", 2048, None)["max_num_batched_tokens"] == 2048 * 8


@pytest.mark.parametrize("max_num_seqs", [0, -1, 2.0, "4", None])
def test_a_bad_max_num_seqs_is_refused(max_num_seqs) -> None:
    with pytest.raises(ConfigurationError, match="max_num_seqs must be an integer >= 1"):
        engine_arguments(EngineConfig("ngram", 2), "/t", max_num_seqs, None)


def test_a_draft_without_a_folder_is_refused_by_engine_arguments_too() -> None:
    with pytest.raises(ConfigurationError, match="--draft DRAFT_FOLDER"):
        engine_arguments(EngineConfig("draft", 2), "/t", 2, None)


@pytest.mark.parametrize("config", [
    {"architectures": ["MiMoForCausalLM"], "model_type": "mimo", "num_nextn_predict_layers": 1},
    {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"},
    {"model_type": "deepseek_v3"},
    {"architectures": ["LlamaForCausalLM", "Glm4MoeForCausalLM"], "model_type": "something_else"},
])
def test_targets_vllm_has_an_mtp_drafter_for(config) -> None:
    assert runs_mtp(config) is True


@pytest.mark.parametrize("config", [
    hf.llama_config(),
    hf.llama_config(num_nextn_predict_layers=1),  # MTP weights, but no drafter in vLLM for Llama
    {},
    {"architectures": None, "model_type": None},
])
def test_targets_vllm_has_no_mtp_drafter_for(config) -> None:
    assert runs_mtp(config) is False
