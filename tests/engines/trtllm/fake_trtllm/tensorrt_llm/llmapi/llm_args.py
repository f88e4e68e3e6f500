"""The stand-in's reading of ``--extra_llm_api_options`` YAML, as trtllm-serve and trtllm-bench do it:
``update_llm_args_with_extra_options(llm_args, path)`` (``tensorrt_llm/llmapi/llm_args.py``, all lines
read) loads the file and turns the nested sections into configuration objects, which validate
themselves (see the package doc: names per line, schedule and CUDA-graph rules).

``decoding_type`` per line: 1.0 dispatches through ``DecodingBaseConfig.from_dict``'s table (no
Eagle3, no Draft_Target: EAGLE-3 is ``Eagle`` with ``eagle3_one_model``); 1.2 and main discriminate
on the class literals (``Draft_Target``; ``Eagle`` is turned into ``Eagle3`` with a warning).
"""

from __future__ import annotations

from typing import Any

import yaml

from tensorrt_llm import llmapi

DECODING_TYPES = {
    "1.0": {"MTP": "MTPDecodingConfig", "NGram": "NGramDecodingConfig", "DraftTarget": "DraftTargetDecodingConfig",
            "Eagle": "EagleDecodingConfig"},
    "1.2": {"MTP": "MTPDecodingConfig", "NGram": "NGramDecodingConfig", "Draft_Target": "DraftTargetDecodingConfig",
            "Eagle": "Eagle3DecodingConfig", "Eagle3": "Eagle3DecodingConfig"},
}
# NVIDIA's 1.2/1.3 serving examples still write DraftTarget; 1.2 and main record it as an alias of the
# literal (_decoding_type_alias, table not read), so the stand-in takes it rather than refuse what may work.
DECODING_TYPES["1.2"]["DraftTarget"] = "DraftTargetDecodingConfig"
DECODING_TYPES["main"] = DECODING_TYPES["1.2"]
SECTIONS = {"kv_cache_config": "KvCacheConfig", "cuda_graph_config": "CudaGraphConfig"}


def update_llm_args_with_extra_dict(llm_args: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``llm_args`` updated with the YAML mapping ``extra`` (nested sections built and validated)."""
    unknown = set(extra) - llmapi.LLM_ARGUMENTS - {"tensor_parallel_size"}  # a BaseLlmArgs field, LLM()'s own argument
    if unknown:
        raise ValueError(f"TorchLlmArgs: extra inputs are not permitted: {sorted(unknown)}")
    built = dict(extra)
    for key, class_name in SECTIONS.items():
        if key in built:
            built[key] = getattr(llmapi, class_name)(**built[key])
    if "speculative_config" in built:
        built["speculative_config"] = _speculative(dict(built["speculative_config"]))
    return llm_args | built


def update_llm_args_with_extra_options(llm_args: dict[str, Any], extra_llm_api_options: str | None) -> dict[str, Any]:
    """``llm_args`` updated with the YAML file ``extra_llm_api_options`` (None: unchanged)."""
    if extra_llm_api_options is None:
        return llm_args
    with open(extra_llm_api_options, encoding="utf-8") as handle:
        return update_llm_args_with_extra_dict(llm_args, yaml.safe_load(handle))


def _speculative(section: dict[str, Any]) -> Any:
    line = llmapi.line()
    name = section.pop("decoding_type", None)
    class_name = DECODING_TYPES[line].get(name)
    if class_name is None:
        raise ValueError(f"Invalid decoding type: {name}")
    if line != "1.0":  # the discriminator keeps the literal as a field
        section["decoding_type"] = getattr(llmapi, class_name).decoding_type
    return getattr(llmapi, class_name)(**section)
