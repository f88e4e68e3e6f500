"""Which decoder layers of a Hugging Face config are MoE, and how wide their MLPs are.

Checkpoints say it in several ways (DESIGN.md section 12), read here as transformers' modeling
files use them:

* DeepSeek-V2/V3, Kimi, GLM: ``first_k_dense_replace`` dense layers first, then a MoE layer every
  ``moe_layer_freq`` (layer i is MoE when i >= k and i % freq == 0; MiniMax-M3 and MiMo-V2 give a
  0/1 flag per layer instead); ``n_shared_experts`` shared experts of ``moe_intermediate_size``;
* Qwen2/3-MoE: layer i is MoE when it is not in ``mlp_only_layers`` and (i + 1) %
  ``decoder_sparse_step`` == 0; one shared expert of ``shared_expert_intermediate_size`` (Qwen2-MoE,
  Qwen3-Next);
* Llama-4: layer i is MoE when (i + 1) % ``interleave_moe_layer_step`` == 0 (or it is listed in
  ``moe_layers``); experts and the one shared expert are ``intermediate_size`` wide, dense layers
  ``intermediate_size_mlp``;
* Gemma-4 (``enable_moe_block``): every layer has its dense MLP and, beside it, the experts;
* otherwise, with routed experts (``n_routed_experts`` / ``num_local_experts`` / ``num_experts``),
  every layer is MoE.

Layers that are not attention + MLP (Mamba, linear attention, per-layer NAS blocks) are named by
:func:`unsupported_layers`: a plan refuses such a config rather than price it as a transformer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.models.folder import config_param

# Config fields of layers that are not attention + MLP, and the word for them.
_OTHER_LAYERS = {"hybrid_override_pattern": "Mamba layers", "layers_block_type": "Mamba layers",
                 "block_configs": "per-layer NAS blocks", "linear_attn_config": "linear-attention layers"}
_OTHER_LAYER_TYPES = ("linear_attention", "mamba", "gdn")


@dataclass(frozen=True)
class MoeLayout:
    """The MLPs of a config's decoder layers: ``moe_layers`` of them MoE (0: a dense model) with
    ``experts`` routed experts of ``expert_d_ff``, ``per_token`` per token, shared experts
    ``shared_d_ff`` wide in all, and a dense MLP of ``moe_dense_d_ff`` beside them (Gemma-4);
    the other layers have a dense MLP of ``dense_d_ff``."""

    moe_layers: int
    experts: int
    per_token: int
    expert_d_ff: int
    shared_d_ff: int
    dense_d_ff: int
    moe_dense_d_ff: int = 0


def moe_layout(config: Mapping[str, Any], layers: int, d_model: int) -> MoeLayout:
    """The layout of ``config``'s ``layers`` decoder layers (module doc)."""
    def get(name: str, default: Any = None) -> Any:
        return config_param(config, name, default)

    d_ff = int(get("intermediate_size") or 4 * d_model)
    experts = int(get("n_routed_experts") or get("num_local_experts") or get("num_experts") or 0)
    if not experts:
        return MoeLayout(0, 0, 0, 0, 0, d_ff)
    per_token = int(get("num_experts_per_tok") or get("top_k_experts") or get("moe_topk") or 0)
    expert_d_ff = int(get("moe_intermediate_size") or d_ff)
    llama4 = get("intermediate_size_mlp") is not None
    shared = (int(get("n_shared_experts") or get("num_shared_experts") or 0) * expert_d_ff
              or int(get("shared_expert_intermediate_size") or 0) or (d_ff if llama4 else 0))
    dense_d_ff = int(get("intermediate_size_mlp") or d_ff)
    beside = d_ff if get("enable_moe_block") else 0
    return MoeLayout(_moe_layer_count(get, layers), experts, per_token, expert_d_ff, shared, dense_d_ff, beside)


def _moe_layer_count(get: Any, layers: int) -> int:
    listed = get("moe_layers")
    if isinstance(listed, list):
        return len(listed)
    if get("interleave_moe_layer_step"):
        step = int(get("interleave_moe_layer_step"))
        return sum(1 for i in range(layers) if (i + 1) % step == 0)
    if get("decoder_sparse_step") is not None or get("mlp_only_layers") is not None:
        step, dense = int(get("decoder_sparse_step") or 1), set(get("mlp_only_layers") or [])
        return sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)
    every = get("moe_layer_freq")
    if isinstance(every, list):  # MiniMax-M3, MiMo-V2: a 0/1 flag per layer
        return sum(1 for flag in every[:layers] if flag)
    first = int(get("first_k_dense_replace") or 0)
    return sum(1 for i in range(layers) if i >= first and i % int(every or 1) == 0)


def unsupported_layers(config: Mapping[str, Any]) -> str | None:
    """The config field that declares layers other than attention + MLP, in words (None: none)."""
    for name, what in _OTHER_LAYERS.items():
        if config_param(config, name):
            return f"{name} ({what})"
    types = config_param(config, "layer_types")
    if isinstance(types, list) and any(any(word in str(t).lower() for word in _OTHER_LAYER_TYPES) for t in types):
        return "layer_types (linear-attention or Mamba layers)"
    return None
