"""What differs between TensorRT-LLM versions in the YAML (``--extra_llm_api_options``) and the LLM
arguments autotune writes. Pure data: no import of tensorrt_llm.

Both writers of TensorRT-LLM YAML read these rules: the engine adapter
(:func:`autotune.engines.trtllm.mapping.yaml_config`) and the profile exporter
(:mod:`autotune.serving.trtllm`), whose speculative block is the adapter's own
(:func:`autotune.engines.trtllm.mapping.yaml_speculative_config`).

Read in NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py`` (stored public copies, searched 2026-12;
the index names a copy by its content, not by tag, so each is identified by what it contains):

* 1.0 line: the copy whose ``DecodingBaseConfig(StrictBaseModel)`` declares ``speculative_model_dir``
  and dispatches ``decoding_type`` through a table (MTP, Medusa, Eagle, Lookahead, NGram, DraftTarget,
  UserProvided, AUTO: no Eagle3; EAGLE-3 is "Eagle" with ``eagle3_one_model``), without
  ``draft_len_schedule`` and without ``allow_advanced_sampling``; ``TorchLlmArgs.validate_cuda_graph_config``
  refuses ``batch_sizes`` together with a non-zero ``max_batch_size`` unless ``batch_sizes`` equal the
  generated list ("Please don't set both cuda_graph_config.batch_sizes and cuda_graph_config.max_batch_size"),
  so only one of the two is written.
* 1.2: the copy with ``SpeculativeConfig = Annotated[Union[...], Field(discriminator="decoding_type")]``,
  ``DraftTargetDecodingConfig.decoding_type`` ``Literal["Draft_Target"]``, ``Eagle3DecodingConfig``
  ``Literal["Eagle3"]``, ``allow_advanced_sampling`` (status "prototype", default False), ``max_concurrency``
  NonNegativeInt, and ``validate_draft_len_schedule_and_sort``: "draft_len_schedule must include
  batch_size=1", ``schedule[1] == max_draft_len``, values <= max_draft_len; field description
  "batch_size >= 1 uses draft_len=4, batch_size >= 4 uses draft_len=2" (a key is a lower bound).
  ``CudaGraphConfig``'s own validator: "max_batch_size must equal max(batch_sizes)" when both are given.
* main (after PR #10860, "Dynamic draft length on spec decode one-model path", merged 2026-03-13):
  the copy with ``max_concurrency`` PositiveInt, ``allow_advanced_sampling`` "DEPRECATED: no-op kept for
  backward compatibility ... Non-greedy sampling is now auto-detected per request", and
  ``validate_max_concurrency_and_draft_len_schedule_mutually_exclusive`` ("max_concurrency and
  draft_len_schedule are mutually exclusive"); the schedule's smallest key must map to
  ``max_draft_len``, key 1 is no longer required; description "{4:4, 8:2, 32:1}: batch sizes 1-4 use 4,
  5-8 use 2, 9-32 use 1, 33+: 0 (implicit, speculation disabled)" (a key is an upper bound).

The canonical ``decoding_type`` of 1.2 and main is the class literal the discriminator matches; the
"DraftTarget" spelling of NVIDIA's serving examples goes through an alias (the private
``_decoding_type_alias``), whose table was not read, so the literal is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.errors import ConfigurationError
from autotune.models.kind import DRAFT_TARGET, EAGLE3


@dataclass(frozen=True)
class TrtllmRules:
    """What one TensorRT-LLM version reads from ``--extra_llm_api_options``, as far as autotune writes it.

    ``decoding_types``: speculative kind -> ``decoding_type``. ``schedule``: how ``draft_len_schedule``
    keys are read ("lower": a key holds from its batch size up, key 1 is required; "upper": a key
    holds up to its batch size, batch sizes above the largest key get draft length 0), None where
    the field does not exist. ``graph_max_batch_size``: whether ``cuda_graph_config.max_batch_size``
    may be written next to ``batch_sizes`` (then equal to their maximum). ``advanced_sampling_flag``:
    whether one-model MTP / EAGLE-3 need ``allow_advanced_sampling: true`` to sample at temperature > 0
    (1.2: they decode greedily without it; 1.0 has no such field and always decodes them greedily;
    main samples per request and deprecates the flag)."""

    version: str
    decoding_types: dict[str, str]
    schedule: str | None
    graph_max_batch_size: bool
    advanced_sampling_flag: bool
    source: str


TRTLLM_RULES = {
    "1.0": TrtllmRules("1.0", {"mtp": "MTP", "ngram": "NGram", DRAFT_TARGET: "DraftTarget", EAGLE3: "Eagle"},
                       None, False, False, "1.0-line llm_args.py (DecodingBaseConfig.from_dict dispatch table)"),
    "1.2": TrtllmRules("1.2", {"mtp": "MTP", "ngram": "NGram", DRAFT_TARGET: "Draft_Target", EAGLE3: "Eagle3"},
                       "lower", True, True, "1.2 llm_args.py (validate_draft_len_schedule_and_sort: key 1 required)"),
    "main": TrtllmRules("main", {"mtp": "MTP", "ngram": "NGram", DRAFT_TARGET: "Draft_Target", EAGLE3: "Eagle3"},
                        "upper", True, False, "main llm_args.py after PR #10860 (keys are upper bounds)"),
}
TRTLLM_VERSIONS = tuple(TRTLLM_RULES)
DEFAULT_TRTLLM_VERSION = "1.2"  # the newest release whose rules were read in its own sources


def trtllm_rules(version: str) -> TrtllmRules:
    """The rules of ``version``: one of :data:`TRTLLM_VERSIONS`, any casing, or a release number of
    that line (``1.2.0`` -> 1.2); ConfigurationError names the choices otherwise."""
    key = str(version).strip().lower()
    if key not in TRTLLM_RULES:
        key = ".".join(key.split(".")[:2])
    if key not in TRTLLM_RULES:
        raise ConfigurationError(f"unknown TensorRT-LLM version {version!r}; choose one of {', '.join(TRTLLM_VERSIONS)}")
    return TRTLLM_RULES[key]
