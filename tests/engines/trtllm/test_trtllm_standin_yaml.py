"""Issue 13, item 8: the stand-in reads exported YAML as each TensorRT-LLM line does
(``tensorrt_llm.llmapi.llm_args.update_llm_args_with_extra_options``, what trtllm-serve and
trtllm-bench call), with the field rules of autotune.engines.trtllm.versions: the files
``autotune export --format trtllm --trtllm-version V`` writes (``export_profile``, the text
``write_export`` stores) and the engine adapter's own ``yaml_config`` load in their version, and what
another version forbids is refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

import profile_factory as factory
from autotune import serving
from autotune.engines.base import EngineConfig
from autotune.engines.trtllm.mapping import yaml_config
from autotune.engines.trtllm.versions import TRTLLM_RULES, TRTLLM_VERSIONS
from autotune.models.kind import DRAFT_TARGET, EAGLE3

RELEASES = {"1.0": "1.0.0", "1.2": "1.2.0", "main": "1.3.0rc12"}
EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64}


def _eagle3(per_batch: dict) -> object:
    profile = factory.profile_data("draft", 3, 1, per_batch, draft_source="/models/eagle3-head")
    return replace(profile, draft=replace(profile.draft, name="eagle3-head", config=EAGLE3_CONFIG))


PROFILES = {
    "mtp-scheduled": factory.profile_data("mtp", 4, 1, {1: ("mtp", 4), 2: ("mtp", 4), 4: ("mtp", 2), 8: ("none", 0)}),
    "mtp-gap": factory.profile_data("mtp", 4, 1, {1: ("mtp", 4), 4: ("mtp", 2), 8: ("ngram", 2), 16: ("ngram", 2)}),
    "draft": factory.profile_data("draft", 2, 2, {1: ("draft", 2), 2: ("draft", 2), 8: ("none", 0)}),
    "eagle3": _eagle3({1: ("draft", 3), 4: ("draft", 3), 8: ("none", 0)}),
    "ngram": factory.profile_data("ngram", 3, 1, {1: ("ngram", 3), 4: ("ngram", 3)}, details={"max_ngram": 4}),
    "none": factory.profile_data("none", 0, 8, {1: ("mtp", 2), 8: ("none", 0)}),
}


@pytest.fixture
def read_as(fake_release, tmp_path: Path):
    """``read(text, version)``: the YAML ``text`` as the stand-in of ``version`` reads it."""

    def read(text: str, version: str) -> dict:
        fake_release(RELEASES[version])
        from tensorrt_llm.llmapi import llm_args

        path = tmp_path / f"{version}.yaml"
        path.write_text(text)
        return llm_args.update_llm_args_with_extra_options({"model": "MODEL"}, str(path))

    return read


@pytest.mark.parametrize("version", TRTLLM_VERSIONS)
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_export_loads_in_the_version_it_is_written_for(name, version, read_as) -> None:
    text = serving.export_profile(PROFILES[name], "trtllm", trtllm_version=version)
    args = read_as(text, version)
    written = yaml.safe_load(text)
    assert set(args) == {"model", *written}
    if "speculative_config" in written:
        from tensorrt_llm.llmapi import llm_args

        spec, section = args["speculative_config"], written["speculative_config"]
        assert type(spec).__name__ == llm_args.DECODING_TYPES[version][section["decoding_type"]]
        assert spec.fields["max_draft_len"] == section["max_draft_len"]


@pytest.mark.parametrize("version", TRTLLM_VERSIONS)
def test_the_adapters_own_yaml_loads_in_its_version(version, read_as) -> None:
    for config, kind in [(EngineConfig("mtp", 2), "mtp"), (EngineConfig("ngram", 3), "ngram"),
                         (EngineConfig("draft", 2, "/d"), DRAFT_TARGET), (EngineConfig("draft", 2, "/d"), EAGLE3)]:
        document = yaml_config(config, 8, kind if config.method == "draft" else None, version=version)
        args = read_as(yaml.safe_dump(document), version)
        from tensorrt_llm.llmapi import llm_args

        decoding_type = TRTLLM_RULES[version].decoding_types[kind]
        assert type(args["speculative_config"]).__name__ == llm_args.DECODING_TYPES[version][decoding_type]
    assert "speculative_config" not in read_as(yaml.safe_dump(yaml_config(EngineConfig("none"), 8, version=version)), version)


def test_a_newer_export_is_refused_by_1_0(read_as) -> None:
    for name in ("draft", "eagle3", "mtp-scheduled"):
        with pytest.raises(ValueError, match="Invalid decoding type|extra inputs|Please don't set both"):
            read_as(serving.export_profile(PROFILES[name], "trtllm", trtllm_version="1.2"), "1.0")


def test_schedule_rules_differ_between_1_2_and_main(read_as) -> None:
    def document(**spec) -> str:
        return yaml.safe_dump({"speculative_config": {"decoding_type": "MTP", "max_draft_len": 3, **spec}})

    no_key_1 = document(draft_len_schedule={2: 3, 8: 1})
    with pytest.raises(ValueError, match="must include batch_size=1"):
        read_as(no_key_1, "1.2")
    assert read_as(no_key_1, "main")["speculative_config"].fields["draft_len_schedule"] == {2: 3, 8: 1}
    with pytest.raises(ValueError, match="smallest batch size"):
        read_as(document(draft_len_schedule={1: 2, 8: 1}), "main")
    both = document(decoding_type="Draft_Target", speculative_model="/d", draft_len_schedule={1: 3, 8: 1},
                    max_concurrency=8)
    with pytest.raises(ValueError, match="mutually exclusive"):
        read_as(both, "main")
    assert read_as(both, "1.2")  # no exclusivity check in 1.2's validators
    with pytest.raises(ValueError, match="extra inputs"):
        read_as(document(draft_len_schedule={1: 3}), "1.0")  # no such field


@pytest.mark.parametrize("version", ["1.2", "main"])
def test_cuda_graph_max_batch_size_must_be_the_largest_graph(version, read_as) -> None:
    with pytest.raises(ValueError, match=r"max_batch_size must equal max\(batch_sizes\)"):
        read_as(yaml.safe_dump({"cuda_graph_config": {"batch_sizes": [1, 2, 4], "max_batch_size": 8}}), version)
    assert read_as(yaml.safe_dump({"cuda_graph_config": {"batch_sizes": [1, 2, 4], "max_batch_size": 4}}), version)
    with pytest.raises(ValueError, match="Please don't set both"):
        read_as(yaml.safe_dump({"cuda_graph_config": {"batch_sizes": [1, 2, 4], "max_batch_size": 4}}), "1.0")


def test_the_stand_ins_decoding_types_are_the_rules_of_autotune(fake_release) -> None:
    for version in TRTLLM_VERSIONS:
        fake_release(RELEASES[version])
        from tensorrt_llm.llmapi import llm_args

        assert set(TRTLLM_RULES[version].decoding_types.values()) <= set(llm_args.DECODING_TYPES[version])
    assert "Eagle3" not in llm_args.DECODING_TYPES["1.0"] and "Draft_Target" not in llm_args.DECODING_TYPES["1.0"]


@pytest.mark.parametrize("version", TRTLLM_VERSIONS)
def test_one_model_kinds_are_refused_a_zero_or_max_concurrency_citing_the_pr(version, read_as) -> None:
    """Stricter than TensorRT-LLM itself (the fake's module doc): what PR #16888 floors at run time is
    refused, so that no export of autotune's can carry it."""
    eagle = "Eagle" if version == "1.0" else "Eagle3"
    one_model = [{"decoding_type": "MTP", "num_nextn_predict_layers": 3},
                 {"decoding_type": eagle, "speculative_model_dir": "/e", "eagle3_one_model": True}]
    offs = [{"max_concurrency": 4}] + ([{"draft_len_schedule": {1: 3, 8: 0}}] if version != "1.0" else [])
    for section in one_model:
        for off in offs:
            text = yaml.safe_dump({"speculative_config": {"max_draft_len": 3, **section, **off}})
            with pytest.raises(ValueError, match=r"one-model: .*TensorRT-LLM PR #16888"):
                read_as(text, version)
    two_model = {"decoding_type": "DraftTarget" if version == "1.0" else "Draft_Target", "speculative_model_dir": "/d"}
    for off in offs:  # a two-model drafter keeps no such state: it may be switched off
        assert read_as(yaml.safe_dump({"speculative_config": {"max_draft_len": 3, **two_model, **off}}), version)
