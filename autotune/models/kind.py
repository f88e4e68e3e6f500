"""What a model folder is, from its config.json alone: the kind of a draft, the MTP modules of a target.

These are facts of the checkpoint, not of an engine: each engine adapter translates a kind into its
own speculative configuration (``Draft_Target`` / ``Eagle3`` in TensorRT-LLM, ``draft_model`` /
``eagle3`` in vLLM), and decides which kinds and MTP architectures it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.models.folder import config_param

DRAFT_TARGET = "draft_target"  # a whole smaller model that shares the target's tokenizer
EAGLE3 = "eagle3"  # an EAGLE-3 head: reads the target's hidden states
EAGLE_LEGACY = "eagle"  # an EAGLE-1/2 head: run by neither adapter
# Where checkpoints record their MTP modules: DeepSeek-V3, GLM-4.5 and MiMo use the first key,
# Qwen3-Next the second.
MTP_CONFIG_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")


def draft_kind(draft_config: Mapping[str, Any]) -> str:
    """``eagle3`` for an EAGLE-3 head, ``eagle`` for an older EAGLE head, else ``draft_target``
    (a whole model), judged from config.json's ``architectures`` (e.g. ``LlamaForCausalLMEagle3``)."""
    names = " ".join(str(a) for a in draft_config.get("architectures") or []).lower()
    if "eagle3" in names or "eagle_3" in names:
        return EAGLE3
    if "eagle" in names:
        return EAGLE_LEGACY
    return DRAFT_TARGET


def speculative_kind_of(method: str, draft_config: Mapping[str, Any] | None) -> str | None:
    """What a serving engine must run for ``method``: None for none, ``mtp`` / ``ngram`` as they are,
    and for a draft what its config.json says (:func:`draft_kind`); a draft without a config (the
    built-in one) is a whole model."""
    if method == "none":
        return None
    if method != "draft":
        return method
    return draft_kind(draft_config) if draft_config else DRAFT_TARGET


def mtp_layers(config: Mapping[str, Any]) -> int:
    """MTP modules a checkpoint ships, from its config.json (0 without)."""
    return max(int(config_param(config, key) or 0) for key in MTP_CONFIG_KEYS)
