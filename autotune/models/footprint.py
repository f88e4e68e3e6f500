"""How much memory a model takes: the one footprint type, and a Hugging Face folder's footprint.

:class:`ModelFootprint` describes any model the tuner, the preflight and the engines size: a Hugging
Face folder (:func:`folder_footprint`) or one of the embedded engine's files
(:func:`autotune.engines.embedded.footprint.read_footprint`). For a folder::

    KV bytes per token = layers * per-layer bytes, per-layer = 2 * kv_heads * head_dim * dtype bytes
                         (keys and values; kv_heads = num_key_value_heads, else num_attention_heads;
                         head_dim = head_dim, else hidden_size / num_attention_heads)
    MLA (DeepSeek-V2/V3: kv_lora_rank in config.json) caches one compressed latent and one RoPE
    key per layer: per-layer = (kv_lora_rank + qk_rope_head_dim) * dtype bytes
    MTP state per token: one decoder layer's KV cache per MTP module (each module is one layer)

Weights come from the safetensors headers (exact, quantised checkpoints included) or, without
safetensors, from the config of a dense transformer (embeddings + per layer: attention q/k/v/o and a
gated MLP of 3 matrices). The KV cache is counted in the checkpoint's dtype, TensorRT-LLM's default.
Sizes config.json does not give count as 0 (:attr:`ModelFootprint.weights_known`,
:attr:`ModelFootprint.kv_known` tell them apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.models.folder import HfModel
from autotune.models.kind import mtp_layers


UNBOUNDED_CONTEXT = 1 << 31  # a config without max_position_embeddings sets no length limit we know of


@dataclass(frozen=True)
class ModelFootprint:
    """Memory facts of one model at a compute dtype of ``dtype_bytes`` bytes per element."""

    path: str
    dtype_bytes: int
    n_params: int
    weight_bytes: int  # 0: unknown
    kv_bytes_per_token: int  # keys + values of the main layers, per sequence and position (0: unknown)
    mtp_bytes_per_token: int  # MTP module caches (+ kept target hidden state, embedded) per position; 0 without MTP
    n_mtp: int
    vocab_size: int
    max_seq_len: int
    config: dict[str, Any]
    weights_estimated: bool = False  # weight_bytes from config.json, not from safetensors headers

    @property
    def weights_known(self) -> bool:
        return self.weight_bytes > 0

    @property
    def kv_known(self) -> bool:
        return self.kv_bytes_per_token > 0


def folder_footprint(model: HfModel) -> ModelFootprint:
    """The footprint of a Hugging Face folder (module doc)."""
    per_layer = kv_bytes_per_layer(model) or 0
    n_mtp = mtp_layers(model.config)
    estimated = model.weights is None
    weight_bytes = (estimated_weight_bytes(model) if estimated else model.weights.n_bytes) or 0
    return ModelFootprint(
        path=str(model.path),
        dtype_bytes=model.dtype_bytes,
        n_params=weight_bytes // model.dtype_bytes if estimated else model.weights.n_params,
        weight_bytes=weight_bytes,
        kv_bytes_per_token=per_layer * int(model.param("num_hidden_layers") or 0),
        mtp_bytes_per_token=n_mtp * per_layer,
        n_mtp=n_mtp,
        vocab_size=int(model.param("vocab_size") or 0),
        max_seq_len=int(model.param("max_position_embeddings") or UNBOUNDED_CONTEXT),
        config=model.config,
        weights_estimated=estimated,
    )


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
