"""Our configuration -> TensorRT-LLM's LLM arguments. Pure: no import of tensorrt_llm, no file access.

This is the only place our vocabulary (method, depth, draft) is translated to TensorRT-LLM's names.
Nested configuration objects are returned as :class:`ConfigObject` (class name + keyword arguments);
the worker process turns them into the real classes (:mod:`autotune.engines.trtllm.runner`).

Names read from NVIDIA/TensorRT-LLM (search of the public sources, 2026) in two versions of
``tensorrt_llm/llmapi/llm_args.py``: main at commit 0004396 (2026) and the 1.0/1.1 line (where
``DecodingBaseConfig`` still declares ``speculative_model_dir`` as a field and the decoding type is
a ClassVar); the accepted names per class are listed in the tests' stand-in package
(``tests/engines/trtllm/fake_trtllm/tensorrt_llm/llmapi/__init__.py``):

* ``LLM(model, tensor_parallel_size, **kwargs)`` (``tensorrt_llm/llmapi/llm.py``); the kwargs are
  ``TorchLlmArgs`` fields: ``max_batch_size``, ``max_num_tokens`` (default 8192), ``kv_cache_config``,
  ``cuda_graph_config``, ``speculative_config``, ``enable_iter_perf_stats``.
* ``KvCacheConfig(free_gpu_memory_fraction, enable_block_reuse)``;
  ``CudaGraphConfig(batch_sizes, max_batch_size, enable_padding)`` (both versions).
* ``DecodingBaseConfig``: ``max_draft_len``; the draft model: ``speculative_model_dir`` (1.0/1.1 field;
  later a validation alias of ``speculative_model``, so it works in both); ``max_concurrency``,
  ``draft_len_schedule`` (not used for measuring).
* ``MTPDecodingConfig``: 1.0/1.1 read ``num_nextn_predict_layers`` (its ``__init__`` copies it into
  ``max_draft_len``); main reads ``max_draft_len`` and drops ``num_nextn_predict_layers`` with a
  deprecation warning when both are given. Both are written, equal to the depth.
* ``DraftTargetDecodingConfig``: ``max_draft_len`` + the draft model (class literal
  ``Draft_Target``; the YAML dispatch table of 1.0/1.1 and NVIDIA's serving examples spell it
  ``DraftTarget``).
* ``NGramDecodingConfig``: ``max_draft_len``, ``max_matching_ngram_size``, ``is_keep_all``,
  ``is_use_oldest``, ``is_public_pool``.
* EAGLE-3: ``Eagle3DecodingConfig`` (later versions, decoding type ``Eagle3``); 1.0/1.1 have only
  ``EagleDecodingConfig`` with ``eagle3_one_model`` (decoding type ``Eagle``), hence the fallback class.
* ``allow_advanced_sampling`` (``DecodingBaseConfig``, 1.1/1.2 era, default False): without it the
  one-model workers pick the target's tokens with ``torch.argmax`` whatever the request's temperature
  (``SpecWorkerBase._sample_tokens_for_batch`` in ``tensorrt_llm/_torch/speculative/interface.py``,
  the 1.2-era copy whose ``SpecMetadata`` has ``allow_advanced_sampling: bool = False``). The 1.0 line
  has no such field; on main it is a deprecated no-op (sampling is detected per request). The runner
  asks for it where the installed class declares the field (:func:`llm_arguments` ``advanced_sampling``).

What differs between versions in the YAML is in :mod:`autotune.engines.trtllm.versions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.analysis.offstate import OffRule
from autotune.engines.base import BUILTIN_DRAFT, EngineConfig
from autotune.engines.limits import DEFAULT_MAX_NGRAM, DEFAULT_MAX_NUM_TOKENS
from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION, trtllm_rules
from autotune.errors import ConfigurationError, UnsupportedConfigError
from autotune.models.kind import DRAFT_TARGET, EAGLE3, EAGLE_LEGACY


# Speculative kind -> TensorRT-LLM classes (first one the installed version has) and YAML decoding_type.
SPECULATIVE_CLASSES = {
    "mtp": ("MTPDecodingConfig",),
    DRAFT_TARGET: ("DraftTargetDecodingConfig",),
    EAGLE3: ("Eagle3DecodingConfig", "EagleDecodingConfig"),
    "ngram": ("NGramDecodingConfig",),
}
# Kinds run with a separate draft model whose drafting TensorRT-LLM times: only ModelDrafter keeps
# last_draft_latency_ms, the one value PyExecutor writes to specDecodingStats.iterLatencyMS
# (tensorrt_llm/_torch/speculative/model_drafter.py, _torch/pyexecutor/py_executor.py). EAGLE-3 is
# built one-model here (eagle3_one_model=True), MTP is one-model and n-gram has no draft model.
TWO_MODEL_KINDS = frozenset({DRAFT_TARGET})
# Kinds whose target tokens come from a one-model worker (SpecWorkerBase): greedy at any temperature
# unless allow_advanced_sampling is set, on the versions that have the flag (module doc).
ONE_MODEL_KINDS = frozenset({"mtp", EAGLE3})
ADVANCED_SAMPLING_FIELD = "allow_advanced_sampling"
# "Off" in a TensorRT-LLM speculative server: a one-model kind carries drafter state (hidden states,
# KV of the MTP / EAGLE-3 layers) that only the draft forward refreshes. A resolved draft length of 0,
# and max_concurrency (which TensorRT-LLM turns into such a schedule), skip that forward, and once the
# batch shrinks again the stale state collapses acceptance for the rest of every affected request:
# TensorRT-LLM PR #16888 (open when read, 2026-12) floors resolved draft lengths at
# min_runtime_draft_len, 1 for one-model algorithms. Two-model and n-gram kinds may be switched off.
TRTLLM_OFF_RULE = OffRule(
    "trtllm", "TensorRT-LLM", ONE_MODEL_KINDS, zero_needs_measurement=False,
    source="one-model MTP / EAGLE-3 never run at draft length 0 nor under max_concurrency: the drafter "
           "state goes stale (TensorRT-LLM PR #16888, min_runtime_draft_len = 1)",
)
# Share of free GPU memory for the KV cache. A draft model brings weights and a KV cache of its own,
# so draft-target leaves more room (over-allocating the draft's cache is the classic OOM there).
KV_CACHE_FRACTION = {"none": 0.9, "mtp": 0.9, "ngram": 0.9, "draft": 0.8}


@dataclass(frozen=True)
class ConfigObject:
    """A TensorRT-LLM configuration object by class name: the worker builds
    ``getattr(tensorrt_llm.llmapi, name)(**fields)`` with the first name that exists."""

    class_names: tuple[str, ...]
    fields: dict[str, Any]


def speculative_kind(config: EngineConfig, kind_of_draft: str | None = None) -> str | None:
    """Which TensorRT-LLM speculative configuration ``config`` needs (None for method none)."""
    if config.method == "none":
        return None
    if config.method != "draft":
        return config.method
    if config.draft_model in (None, BUILTIN_DRAFT):
        raise UnsupportedConfigError(
            "method draft with TensorRT-LLM needs a draft model folder (Hugging Face format); pass --draft PATH"
        )
    kind = kind_of_draft or DRAFT_TARGET
    if kind == EAGLE_LEGACY:
        raise UnsupportedConfigError(
            f"draft {config.draft_model} is an EAGLE-1/2 head; TensorRT-LLM's PyTorch backend runs EAGLE-3 heads only"
        )
    if kind not in SPECULATIVE_CLASSES:
        raise ValueError(f"unknown draft kind {kind!r}")
    return kind


def max_num_tokens(max_batch_size: int, depth: int) -> int:
    """Tokens per engine step: every sequence verifies 1 + depth tokens, and prompts need room."""
    return max(DEFAULT_MAX_NUM_TOKENS, max_batch_size * (1 + depth))


def llm_arguments(
    config: EngineConfig,
    target: str,
    max_batch_size: int,
    kind_of_draft: str | None = None,
    tensor_parallel_size: int = 1,
    max_ngram: int = DEFAULT_MAX_NGRAM,
    advanced_sampling: bool = False,
) -> dict[str, Any]:
    """Keyword arguments of ``tensorrt_llm.LLM`` for measuring ``config`` at concurrency levels up to
    ``max_batch_size``. ``kind_of_draft``: :func:`autotune.models.kind.draft_kind` of the draft's config.json.
    ``advanced_sampling``: write ``allow_advanced_sampling=True`` for the one-model kinds
    (:data:`ONE_MODEL_KINDS`), so that they sample at temperature > 0 (module doc).

    KV block reuse is off: a measurement repeats the same prompts (warm-up, then every concurrency),
    and reused blocks would turn their prefill into cache hits.
    """
    config.validate()
    if not isinstance(max_batch_size, int) or max_batch_size < 1:
        raise ConfigurationError(f"max_batch_size must be an integer >= 1, got {max_batch_size!r}")
    if not isinstance(tensor_parallel_size, int) or tensor_parallel_size < 1:
        raise ConfigurationError(f"tensor_parallel_size must be an integer >= 1, got {tensor_parallel_size!r}")
    arguments: dict[str, Any] = {
        "model": str(target),
        "tensor_parallel_size": tensor_parallel_size,
        "max_batch_size": max_batch_size,
        "max_num_tokens": max_num_tokens(max_batch_size, config.depth),
        "kv_cache_config": ConfigObject(
            ("KvCacheConfig",),
            {"free_gpu_memory_fraction": KV_CACHE_FRACTION[config.method], "enable_block_reuse": False},
        ),
        "cuda_graph_config": ConfigObject(("CudaGraphConfig",), {"enable_padding": True, "max_batch_size": max_batch_size}),
        "enable_iter_perf_stats": True,
    }
    kind = speculative_kind(config, kind_of_draft)
    if kind is not None:
        fields = speculative_fields(config, kind, max_ngram, advanced_sampling)
        arguments["speculative_config"] = ConfigObject(SPECULATIVE_CLASSES[kind], fields)
    return arguments


def yaml_config(
    config: EngineConfig,
    max_batch_size: int,
    kind_of_draft: str | None = None,
    tensor_parallel_size: int = 1,
    max_ngram: int = DEFAULT_MAX_NGRAM,
    version: str = DEFAULT_TRTLLM_VERSION,
) -> dict[str, Any]:
    """The same configuration as ``--extra_llm_api_options`` YAML for trtllm-serve / trtllm-bench of
    TensorRT-LLM ``version`` (:mod:`autotune.engines.trtllm.versions`: the ``decoding_type`` spelling
    of that version, and ``allow_advanced_sampling`` where it needs it to sample); the model is given
    on their command line. One depth for every concurrency, so neither ``draft_len_schedule`` nor
    ``max_concurrency`` is written, and ``cuda_graph_config`` carries ``max_batch_size`` alone, which
    every version accepts (1.0 refuses it only next to ``batch_sizes``)."""
    trtllm_rules(version)  # an unknown version is refused for method none too
    arguments = llm_arguments(config, "MODEL", max_batch_size, kind_of_draft, tensor_parallel_size, max_ngram)
    del arguments["model"]
    document: dict[str, Any] = {}
    for key, value in arguments.items():
        if key == "speculative_config":
            document[key] = yaml_speculative_config(config, speculative_kind(config, kind_of_draft), max_ngram, version)
        else:
            document[key] = dict(value.fields) if isinstance(value, ConfigObject) else value
    return document


def yaml_speculative_config(config: EngineConfig, kind: str, max_ngram: int = DEFAULT_MAX_NGRAM,
                            version: str = DEFAULT_TRTLLM_VERSION) -> dict[str, Any]:
    """``speculative_config`` as the YAML of TensorRT-LLM ``version`` writes it: that version's
    ``decoding_type`` for ``kind``, then :func:`speculative_fields` (with ``allow_advanced_sampling``
    where the version needs it to sample). Shared by :func:`yaml_config` and the profile exporter
    (:mod:`autotune.serving.trtllm`), so that a served configuration is the measured one."""
    rules = trtllm_rules(version)
    fields = speculative_fields(config, kind, max_ngram, advanced_sampling=rules.advanced_sampling_flag)
    return {"decoding_type": rules.decoding_types[kind], **fields}


def speculative_fields(config: EngineConfig, kind: str, max_ngram: int = DEFAULT_MAX_NGRAM,
                       advanced_sampling: bool = False) -> dict[str, Any]:
    """Keyword arguments of the speculative configuration class of ``kind`` (a value of
    :func:`speculative_kind`) for ``config``'s depth and draft model; ``advanced_sampling`` adds
    ``allow_advanced_sampling=True`` for the one-model kinds. No checks: :func:`speculative_kind`
    refuses what cannot be measured (so a measured draft is a folder, never the built-in default),
    and an export may name a draft the engine never loaded, written as given."""
    depth = config.depth
    if kind == "mtp":
        fields = {"max_draft_len": depth, "num_nextn_predict_layers": depth}
    elif kind == DRAFT_TARGET:
        fields = {"max_draft_len": depth, "speculative_model_dir": str(config.draft)}
    elif kind == EAGLE3:
        fields = {"max_draft_len": depth, "speculative_model_dir": str(config.draft), "eagle3_one_model": True}
    else:
        fields = {
            "max_draft_len": depth,
            "max_matching_ngram_size": max_ngram,
            "is_keep_all": True,
            "is_use_oldest": False,  # propose what followed the newest match, as the embedded engine does
            "is_public_pool": False,  # each sequence searches its own history only
        }
    if advanced_sampling and kind in ONE_MODEL_KINDS:
        fields[ADVANCED_SAMPLING_FIELD] = True
    return fields
