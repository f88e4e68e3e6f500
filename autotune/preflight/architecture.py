"""Can the engine run these models, and does the target carry MTP modules?

The table of architectures TensorRT-LLM's PyTorch backend runs is read from NVIDIA/TensorRT-LLM
``tensorrt_llm/llmapi/model_support_matrix.py`` (``SUPPORTED_MODELS_PYTORCH``, commit 11d6485, 2026),
plus ``Qwen2MoeForCausalLM`` (``tensorrt_llm/_torch/models/__init__.py``) and ``Glm4MoeForCausalLM``
(registered with ``@register_auto_model("Glm4MoeForCausalLM")`` in ``tensorrt_llm/_torch/models/``). Classifier and
reward models of that list are left out: they do not generate. MTP support ("MTP: Yes") and the
targets without EAGLE-3 support ("EAGLE-3 ...: No") come from the same file's ``KEY_MODEL_MATRIX``.
The table is a rough guide for the release current in 2026; a newer TensorRT-LLM may run more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from autotune.engines.base import MAX_DEPTH
from autotune.engines.trtllm.mapping import EAGLE3, EAGLE_LEGACY, draft_kind
from autotune.preflight.models import HfModel, config_param
from autotune.preflight.report import TARGET, Check

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
# Where checkpoints record their MTP modules: DeepSeek-V3, GLM-4.5 and MiMo use the first key,
# Qwen3-Next the second.
MTP_CONFIG_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")
SUPPORTED_ENGINES = ("trtllm", "vllm")


def mtp_layers(config: Mapping[str, Any]) -> int:
    """MTP modules a checkpoint ships, from its config.json (0 without)."""
    return max(int(config_param(config, key) or 0) for key in MTP_CONFIG_KEYS)


def check_engine_support(engine: str) -> Check | None:
    """An error when ``engine`` cannot run Hugging Face folders at all (None when it can)."""
    if engine in SUPPORTED_ENGINES:
        return None
    return Check("engine", "error", f"engine {engine!r} does not run Hugging Face model folders; "
                 f"use --engine {' or '.join(SUPPORTED_ENGINES)}",
                 TARGET, {"engine": engine})


def check_target_architecture(target: HfModel, engine: str = "trtllm") -> Check:
    return _architecture_check(target.architectures, "target", TARGET, engine)


def check_draft_architecture(target: HfModel, draft: HfModel, subject: str, engine: str = "trtllm") -> Check:
    """A draft is either a whole model the engine runs (draft-target) or an EAGLE-3 head."""
    kind = draft_kind(draft.config)
    name = f"draft {draft.path.name}"
    details: dict[str, Any] = {"architectures": draft.architectures, "kind": kind}
    if kind == EAGLE_LEGACY:
        return Check("architecture", "error",
                     f"{name} is an EAGLE-1/2 head; the adapters run EAGLE-3 heads only", subject, details)
    if kind == EAGLE3 and engine == "vllm":
        return Check("architecture", "ok", f"{name} is an EAGLE-3 head (vLLM method eagle3)", subject, details)
    if kind == EAGLE3:
        unsupported = sorted(set(target.architectures) & TRTLLM_NO_EAGLE3_TARGETS)
        if unsupported:
            return Check("architecture", "error", f"{name} is an EAGLE-3 head, but TensorRT-LLM does not run EAGLE-3 "
                         f"with a {unsupported[0]} target (use MTP)", subject, details)
        return Check("architecture", "ok", f"{name} is an EAGLE-3 head (Eagle3DecodingConfig)", subject, details)
    return _architecture_check(draft.architectures, name, subject, engine)


def check_mtp(target: HfModel, depths: Iterable[int], requested: bool, engine: str = "trtllm") -> Check:
    """Whether method mtp can run, and at which depths. ``requested``: the user asked for mtp, so
    its absence is an error rather than information."""
    layers = mtp_layers(target.config)
    arch = target.architectures[0] if target.architectures else "?"
    details: dict[str, Any] = {"mtp_layers": layers, "architecture": arch, "depths": sorted(set(depths))}
    if layers == 0:
        status = "error" if requested else "ok"
        return Check("mtp", status, f"the target has no MTP modules ({' / '.join(MTP_CONFIG_KEYS)} absent or 0): "
                     "method mtp is not available", TARGET, details)
    details["depth_range"] = [1, MAX_DEPTH]
    if engine == "vllm":
        from autotune.engines.vllm.mapping import runs_mtp

        if not runs_mtp(target.config):
            return Check("mtp", "error" if requested else "warn", f"the target ships {layers} MTP module(s), but vLLM "
                         f"0.32 has no MTP drafter for {arch}: method mtp is not available", TARGET, details)
        return Check("mtp", "ok", f"the target ships {layers} MTP module(s); vLLM drafts every depth with them",
                     TARGET, details)
    message = (f"the target ships {layers} MTP module(s): depths 1..{layers} use them directly, deeper drafts reuse "
               f"the last one (TensorRT-LLM's EAGLE-style MTP), usually with lower acceptance")
    if arch not in TRTLLM_MTP_ARCHITECTURES:
        return Check("mtp", "warn", f"{message}; TensorRT-LLM lists MTP support only for "
                     f"{', '.join(sorted(TRTLLM_MTP_ARCHITECTURES))}, not {arch}", TARGET, details)
    return Check("mtp", "ok", message, TARGET, details)


def _architecture_check(architectures: list[str], name: str, subject: str, engine: str) -> Check:
    details = {"architectures": architectures}
    if engine == "vllm":
        # vLLM's model registry (vllm/model_executor/models/registry.py) holds hundreds of
        # architectures and grows every release; vLLM itself refuses an unknown one at load time.
        generative = [a for a in architectures if a.endswith(("ForCausalLM", "ForConditionalGeneration"))]
        if generative:
            return Check("architecture", "ok", f"{name}: {generative[0]} is a generative architecture "
                         "(vLLM's own registry decides at load time)", subject, details)
        found = ", ".join(architectures) or "no 'architectures' in config.json"
        return Check("architecture", "error", f"{name}: {found} is not a generative model vLLM serves", subject, details)
    supported = [a for a in architectures if a in TRTLLM_PYTORCH_ARCHITECTURES]
    if supported:
        return Check("architecture", "ok", f"{name}: {supported[0]} runs on TensorRT-LLM's PyTorch backend", subject, details)
    found = ", ".join(architectures) or "no 'architectures' in config.json"
    return Check("architecture", "error", f"{name}: {found} is not in TensorRT-LLM's PyTorch model table "
                 "(see autotune/preflight/architecture.py)", subject, details)

