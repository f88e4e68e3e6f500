"""How much memory a Hugging Face model folder takes: its weights and its KV cache per token.

    KV bytes per token = layers * per-layer bytes, per-layer = 2 * kv_heads * head_dim * dtype bytes
                         (keys and values; kv_heads = num_key_value_heads, else num_attention_heads;
                         head_dim = head_dim, else hidden_size / num_attention_heads)
    MLA (DeepSeek-V2/V3: kv_lora_rank in config.json) caches one compressed latent and one RoPE
    key per layer: per-layer = (kv_lora_rank + qk_rope_head_dim) * dtype bytes

Weights come from the safetensors headers (exact, quantised checkpoints included) or, without
safetensors, from the config of a dense transformer (embeddings + per layer: attention q/k/v/o and a
gated MLP of 3 matrices). The KV cache is counted in the checkpoint's dtype, TensorRT-LLM's default.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.models.folder import HfModel


@dataclass(frozen=True)
class Footprint:
    """Memory facts of one model (None where the folder does not tell)."""

    weight_bytes: int | None
    weights_estimated: bool
    kv_bytes_per_token: int | None
    kv_bytes_per_layer: int | None


def footprint(model: HfModel) -> Footprint:
    """Weights and KV cache sizes of ``model`` (module doc); None where config.json lacks the sizes."""
    per_layer = kv_bytes_per_layer(model)
    layers = model.param("num_hidden_layers")
    kv = per_layer * int(layers) if per_layer is not None and layers is not None else None
    if model.weights is not None:
        return Footprint(model.weights.n_bytes, False, kv, per_layer)
    return Footprint(estimated_weight_bytes(model), True, kv, per_layer)


def kv_bytes_per_layer(model: HfModel) -> int | None:
    """KV cache bytes per token and layer (module doc), None when config.json lacks the sizes."""
    b = model.dtype_bytes
    if model.param("kv_lora_rank"):
        return (int(model.param("kv_lora_rank")) + int(model.param("qk_rope_head_dim") or 0)) * b
    heads, hidden = model.param("num_attention_heads"), model.param("hidden_size")
    if not heads:
        return None
    kv_heads = int(model.param("num_key_value_heads") or heads)
    head_dim = model.param("head_dim") or (int(hidden) // int(heads) if hidden else None)
    return 2 * kv_heads * int(head_dim) * b if head_dim else None


def estimated_weight_bytes(model: HfModel) -> int | None:
    """Dense-transformer weight bytes from config.json (None for MoE or missing sizes)."""
    if model.param("num_local_experts") or model.param("n_routed_experts") or model.param("num_experts"):
        return None
    names = ("hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size", "num_attention_heads")
    if any(not model.param(name) for name in names):
        return None
    h, layers, vocab, inner, heads = (int(model.param(name)) for name in names)
    kv_heads = int(model.param("num_key_value_heads") or heads)
    head_dim = int(model.param("head_dim") or h // heads)
    attention = 2 * h * heads * head_dim + 2 * h * kv_heads * head_dim  # q and o, k and v
    mlp = 3 * h * inner  # gate, up, down
    embeddings = vocab * h * (1 if model.param("tie_word_embeddings", False) else 2)
    return (layers * (attention + mlp) + embeddings) * model.dtype_bytes
