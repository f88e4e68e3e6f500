"""What the TensorRT-LLM engine checks in the model folders before building anything.

:func:`check_config`: the parent runs it to fail fast, the worker to learn which speculative
configuration a draft needs. :data:`TRTLLM_SUPPORT`: which folders TensorRT-LLM runs, asked by the
preflight (:class:`autotune.models.support.FolderSupport`).

The table of architectures TensorRT-LLM's PyTorch backend runs is read from NVIDIA/TensorRT-LLM
``tensorrt_llm/llmapi/model_support_matrix.py`` (``SUPPORTED_MODELS_PYTORCH``, commit 11d6485, 2026),
plus ``Qwen2MoeForCausalLM`` (``tensorrt_llm/_torch/models/__init__.py``) and ``Glm4MoeForCausalLM``
(registered with ``@register_auto_model("Glm4MoeForCausalLM")`` in ``tensorrt_llm/_torch/models/``). Classifier and
reward models of that list are left out: they do not generate. MTP support ("MTP: Yes") and the
targets without EAGLE-3 support ("EAGLE-3 ...: No") come from the same file's ``KEY_MODEL_MATRIX``.
The table is a rough guide for the release current in 2026; a newer TensorRT-LLM may run more.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autotune.engines.base import MAX_DEPTH, METHODS, EngineConfig
from autotune.engines.trtllm.mapping import max_num_tokens, speculative_kind
from autotune.errors import UnsupportedConfigError
from autotune.models.folder import HfModel, ModelFolders
from autotune.models.kind import MTP_CONFIG_KEYS, draft_kind, mtp_layers
from autotune.models.support import Finding

TRTLLM_PYTORCH_ARCHITECTURES = frozenset({
    "DeciLMForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "Exaone4ForCausalLM",
    "Gemma3ForCausalLM", "Glm4MoeForCausalLM", "GptOssForCausalLM", "LlamaForCausalLM",
    "Llama4ForConditionalGeneration", "MiniMaxM2ForCausalLM", "MistralForCausalLM", "MixtralForCausalLM",
    "MllamaForConditionalGeneration", "NemotronForCausalLM", "NemotronHForCausalLM", "NemotronNASForCausalLM",
    "Phi3ForCausalLM", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
    "Qwen3NextForCausalLM",
})
# KEY_MODEL_MATRIX rows with "MTP: Yes".
TRTLLM_MTP_ARCHITECTURES = frozenset({"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"})
# KEY_MODEL_MATRIX rows with "EAGLE-3 (One Model Engine): No".
TRTLLM_NO_EAGLE3_TARGETS = frozenset({"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "Qwen3NextForCausalLM"})


def check_config(config: EngineConfig, target: str | Path, folders: ModelFolders) -> str | None:
    """The speculative kind ``config`` needs with this target (see
    :func:`~autotune.engines.trtllm.mapping.speculative_kind`); UnsupportedConfigError when the
    models cannot run it, ConfigurationError when a folder is not a model folder. ``folders``: the
    model folders already read (a folder not among them is read once and kept)."""
    config.validate()
    if config.method == "mtp" and mtp_layers(folders.get(target, "target").config) == 0:
        raise UnsupportedConfigError(
            f"method mtp needs a target with MTP modules, and {Path(target).name} has none "
            f"({' / '.join(MTP_CONFIG_KEYS)} absent or 0 in config.json); use draft or ngram"
        )
    kind_of_draft = None
    if config.method == "draft" and config.draft is not None:
        kind_of_draft = draft_kind(folders.get(config.draft, "draft").config)
    return speculative_kind(config, kind_of_draft)


class TrtllmSupport:
    """The model folders TensorRT-LLM's PyTorch backend runs (module doc)."""

    engine = "trtllm"
    methods = METHODS
    max_depth = MAX_DEPTH

    def architecture(self, architectures: Sequence[str], name: str) -> Finding:
        supported = [a for a in architectures if a in TRTLLM_PYTORCH_ARCHITECTURES]
        if supported:
            return Finding("ok", f"{name}: {supported[0]} runs on TensorRT-LLM's PyTorch backend")
        found = ", ".join(architectures) or "no 'architectures' in config.json"
        return Finding("error", f"{name}: {found} is not in TensorRT-LLM's PyTorch model table "
                       "(see autotune/engines/trtllm/checks.py)")

    def eagle3_head(self, target: HfModel, name: str) -> Finding:
        unsupported = sorted(set(target.architectures) & TRTLLM_NO_EAGLE3_TARGETS)
        if unsupported:
            return Finding("error", f"{name} is an EAGLE-3 head, but TensorRT-LLM does not run EAGLE-3 "
                           f"with a {unsupported[0]} target (use MTP)")
        return Finding("ok", f"{name} is an EAGLE-3 head (Eagle3DecodingConfig)")

    def mtp(self, target: HfModel, layers: int, requested: bool) -> Finding:
        arch = target.architectures[0] if target.architectures else "?"
        message = (f"the target ships {layers} MTP module(s): depths 1..{layers} use them directly, deeper drafts "
                   f"reuse the last one (TensorRT-LLM's EAGLE-style MTP), usually with lower acceptance")
        if arch not in TRTLLM_MTP_ARCHITECTURES:
            return Finding("warn", f"{message}; TensorRT-LLM lists MTP support only for "
                           f"{', '.join(sorted(TRTLLM_MTP_ARCHITECTURES))}, not {arch}")
        return Finding("ok", message)

    def step_limit(self, concurrencies: Sequence[int], depth: int, seq_len: int) -> Finding:
        """``max_num_tokens`` (tokens per engine step, :func:`~autotune.engines.trtllm.mapping.max_num_tokens`)
        must cover ``max_batch_size x (1 + depth)``; prompts longer than it are rejected, because
        chunked prefill stays off (vLLM chunks long prompts, so it has no such limit)."""
        largest = max(concurrencies)
        tokens = max_num_tokens(largest, depth)
        details = {"max_num_tokens": tokens, "max_batch_size": largest, "depth": depth, "needed": largest * (1 + depth)}
        if seq_len > tokens:
            return Finding("warn", f"max_num_tokens {tokens}: sequences of {seq_len} tokens may have prompts longer "
                           "than one engine step; such prompts are rejected (chunked prefill is off)", details)
        return Finding("ok", f"max_num_tokens {tokens} >= max_batch_size {largest} x (1 + depth {depth})", details)


TRTLLM_SUPPORT = TrtllmSupport()
