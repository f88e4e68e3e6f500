"""Configuration -> TensorRT-LLM arguments, field by field, against the names TensorRT-LLM declares.

The accepted names per class live in the fake package (fake_trtllm/tensorrt_llm/llmapi), taken from
``tensorrt_llm/llmapi/llm_args.py`` of the 1.0 line, 1.2 and main; every field the mapping writes
must be accepted by all of them (``allow_advanced_sampling`` only where the class declares it)."""

from __future__ import annotations

import pytest
import yaml

from autotune.engines.base import EngineConfig
from autotune.engines.trtllm.mapping import (
    ConfigObject,
    llm_arguments,
    max_num_tokens,
    speculative_kind,
    yaml_config,
)
from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION, TRTLLM_RULES, TRTLLM_VERSIONS
from autotune.errors import ConfigurationError, UnsupportedConfigError
from autotune.models.kind import DRAFT_TARGET, EAGLE3, EAGLE_LEGACY

DRAFT = "/models/llama-1b"


def test_baseline_arguments_field_by_field() -> None:
    arguments = llm_arguments(EngineConfig("none"), "/models/llama-8b", max_batch_size=16)
    kv, graphs = arguments.pop("kv_cache_config"), arguments.pop("cuda_graph_config")
    assert arguments == {
        "model": "/models/llama-8b", "tensor_parallel_size": 1, "max_batch_size": 16, "max_num_tokens": 8192,
        "enable_iter_perf_stats": True,
    }
    assert kv == ConfigObject(("KvCacheConfig",), {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": False})
    assert graphs == ConfigObject(("CudaGraphConfig",), {"enable_padding": True, "max_batch_size": 16})


@pytest.mark.parametrize(
    ("config", "kind_of_draft", "classes", "fields"),
    [
        (EngineConfig("mtp", 3), None, ("MTPDecodingConfig",), {"num_nextn_predict_layers": 3, "max_draft_len": 3}),
        (EngineConfig("draft", 4, DRAFT), DRAFT_TARGET, ("DraftTargetDecodingConfig",),
         {"max_draft_len": 4, "speculative_model_dir": DRAFT}),
        (EngineConfig("draft", 2, DRAFT), EAGLE3, ("Eagle3DecodingConfig", "EagleDecodingConfig"),
         {"max_draft_len": 2, "speculative_model_dir": DRAFT, "eagle3_one_model": True}),
        (EngineConfig("ngram", 5), None, ("NGramDecodingConfig",),
         {"max_draft_len": 5, "max_matching_ngram_size": 3, "is_keep_all": True, "is_use_oldest": False,
          "is_public_pool": False}),
    ],
)
def test_speculative_config_field_by_field(config, kind_of_draft, classes, fields, fake_llmapi) -> None:
    speculative = llm_arguments(config, "/models/t", 8, kind_of_draft)["speculative_config"]
    assert speculative == ConfigObject(classes, fields)
    for name in classes:  # every fallback class exists in some version and takes every field
        assert set(fields) <= fake_llmapi.accepted_fields(name), name
        getattr(fake_llmapi, name)(**fields)  # the version-specific validators accept the values too


def test_eagle3_fields_fit_both_the_new_class_and_the_1_0_fallback(fake_llmapi) -> None:
    fields = llm_arguments(EngineConfig("draft", 3, DRAFT), "/t", 4, EAGLE3)["speculative_config"].fields
    assert set(fields) <= fake_llmapi.FIELDS_MAIN["Eagle3DecodingConfig"]
    assert set(fields) <= fake_llmapi.FIELDS_V1_0["EagleDecodingConfig"]
    assert "Eagle3DecodingConfig" not in fake_llmapi.FIELDS_V1_0  # hence the fallback


def test_every_nested_and_top_level_name_is_declared(fake_llmapi) -> None:
    for config, kind in [(EngineConfig("none"), None), (EngineConfig("ngram", 2), None),
                         (EngineConfig("draft", 2, DRAFT), DRAFT_TARGET)]:
        arguments = llm_arguments(config, "/t", 4, kind)
        assert set(arguments) - {"model", "tensor_parallel_size"} <= fake_llmapi.LLM_ARGUMENTS
        for value in arguments.values():
            if isinstance(value, ConfigObject):
                assert set(value.fields) <= fake_llmapi.accepted_fields(value.class_names[0])


@pytest.mark.parametrize(("concurrency", "depth"), [(1, 0), (64, 4), (4096, 3), (8192, 1)])
def test_max_num_tokens_covers_every_sequence_verifying_its_drafts(concurrency, depth) -> None:
    tokens = llm_arguments(EngineConfig("ngram", depth) if depth else EngineConfig("none"), "/t", concurrency)["max_num_tokens"]
    assert tokens == max_num_tokens(concurrency, depth)
    assert tokens >= concurrency * (1 + depth)
    assert tokens >= 8192  # never below TensorRT-LLM's default, which is also the prefill budget


def test_draft_model_gets_less_kv_cache_memory_than_the_others() -> None:
    def fraction(config, kind=None):
        return llm_arguments(config, "/t", 4, kind)["kv_cache_config"].fields["free_gpu_memory_fraction"]

    assert fraction(EngineConfig("draft", 2, DRAFT), DRAFT_TARGET) < fraction(EngineConfig("none"))


def test_yaml_carries_decoding_type_and_survives_a_round_trip() -> None:
    document = yaml_config(EngineConfig("draft", 4, DRAFT), 32, DRAFT_TARGET, version="1.0")
    assert "model" not in document
    assert document["speculative_config"] == {"decoding_type": "DraftTarget", "max_draft_len": 4, "speculative_model_dir": DRAFT}
    assert document["kv_cache_config"] == {"free_gpu_memory_fraction": 0.8, "enable_block_reuse": False}
    assert document["cuda_graph_config"] == {"enable_padding": True, "max_batch_size": 32}
    assert yaml.safe_load(yaml.safe_dump(document)) == document
    assert "speculative_config" not in yaml_config(EngineConfig("none"), 8)


@pytest.mark.parametrize("version", TRTLLM_VERSIONS)
def test_yaml_decoding_types_follow_the_version_rules(version) -> None:
    # Before, every version got 1.0's DraftTarget, which 1.2 and main do not list as a decoding_type.
    rules = TRTLLM_RULES[version]
    for config, kind in [(EngineConfig("mtp", 2), "mtp"), (EngineConfig("ngram", 2), "ngram"),
                         (EngineConfig("draft", 2, DRAFT), DRAFT_TARGET), (EngineConfig("draft", 2, DRAFT), EAGLE3)]:
        spec = yaml_config(config, 4, kind if config.method == "draft" else None, version=version)["speculative_config"]
        assert spec["decoding_type"] == rules.decoding_types[kind]
        # one-model kinds ask to sample where the version needs the flag for it (1.2), nowhere else
        assert spec.get("allow_advanced_sampling", False) is (rules.advanced_sampling_flag and kind in ("mtp", EAGLE3))
    assert yaml_config(EngineConfig("mtp", 2), 4) == yaml_config(EngineConfig("mtp", 2), 4, version=DEFAULT_TRTLLM_VERSION)


def test_advanced_sampling_only_for_one_model_kinds() -> None:
    def spec(config, kind=None):
        return llm_arguments(config, "/t", 4, kind, advanced_sampling=True)["speculative_config"].fields

    assert spec(EngineConfig("mtp", 2))["allow_advanced_sampling"] is True
    assert spec(EngineConfig("draft", 2, DRAFT), EAGLE3)["allow_advanced_sampling"] is True
    assert "allow_advanced_sampling" not in spec(EngineConfig("draft", 2, DRAFT), DRAFT_TARGET)  # the sampler samples
    assert "allow_advanced_sampling" not in spec(EngineConfig("ngram", 2))
    assert "allow_advanced_sampling" not in llm_arguments(EngineConfig("mtp", 2), "/t", 4)["speculative_config"].fields


def test_refused_configurations() -> None:
    with pytest.raises(UnsupportedConfigError, match="needs a draft model folder"):
        llm_arguments(EngineConfig("draft", 3), "/t", 4)  # the embedded engine's built-in draft
    with pytest.raises(UnsupportedConfigError, match="EAGLE-3 heads only"):
        speculative_kind(EngineConfig("draft", 3, DRAFT), EAGLE_LEGACY)
    with pytest.raises(ConfigurationError, match="depth >= 1"):
        llm_arguments(EngineConfig("mtp", 0), "/t", 4)
    with pytest.raises(ConfigurationError, match="max_batch_size"):
        llm_arguments(EngineConfig("none"), "/t", 0)
    with pytest.raises(ConfigurationError, match="tensor_parallel_size"):
        llm_arguments(EngineConfig("none"), "/t", 4, tensor_parallel_size=0)
