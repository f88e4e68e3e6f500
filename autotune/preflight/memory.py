"""Will the models and their KV caches fit on the GPU, and up to which batch size?

Per configuration, with every sequence holding ``seq_len`` tokens plus ``depth + 1`` draft slots::

    need(B) = target weights [+ draft weights] + B * (seq_len + depth + 1) * KV bytes per token
    KV bytes per token = layers * per-layer bytes, per-layer = 2 * kv_heads * head_dim * dtype bytes
                         (keys and values; kv_heads = num_key_value_heads, else num_attention_heads;
                         head_dim = head_dim, else hidden_size / num_attention_heads)
    MLA (DeepSeek-V2/V3: kv_lora_rank in config.json) caches one compressed latent and one RoPE
    key per layer: per-layer = (kv_lora_rank + qk_rope_head_dim) * dtype bytes
    method mtp adds one layer's KV per MTP module; method draft adds the draft's own KV cache.

A configuration fits when ``need(B) <= (1 - MEMORY_HEADROOM) * GPU memory``. Weights come from the
safetensors headers (exact, quantised checkpoints included) or, without safetensors, from the config
of a dense transformer (embeddings + per layer: attention q/k/v/o and a gated MLP of 3 matrices).
The KV cache is counted in the checkpoint's dtype, TensorRT-LLM's default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autotune.preflight.models import HfModel
from autotune.preflight.report import TARGET, Check

# CUDA context, activations, CUDA graphs (~100-200 MB each) and the sampler's buffers live outside
# the weights and KV cache.
MEMORY_HEADROOM = 0.1
GIB = 1 << 30


@dataclass(frozen=True)
class Footprint:
    """Memory facts of one model (None where the folder does not tell)."""

    weight_bytes: int | None
    weights_estimated: bool
    kv_bytes_per_token: int | None
    kv_bytes_per_layer: int | None


def footprint(model: HfModel) -> Footprint:
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


def largest_batch(usable_bytes: int, weight_bytes: int, bytes_per_sequence: int) -> int:
    """The largest B with weights + B * bytes_per_sequence <= usable (0 when not even B = 1 fits)."""
    if bytes_per_sequence <= 0:
        raise ValueError("bytes_per_sequence must be positive")
    return max(0, (usable_bytes - weight_bytes) // bytes_per_sequence)


def check_memory(
    target: HfModel,
    drafts: Sequence[tuple[str, HfModel]],
    memory_total_bytes: int,
    batch_sizes: Sequence[int],
    seq_len: int,
    depth: int,
    mtp_layers: int,
) -> list[Check]:
    """One ``memory`` check for the target (method none, and mtp when it has MTP modules) and one
    per draft (method draft), all at the deepest ``depth`` of the study."""
    usable = int(memory_total_bytes * (1 - MEMORY_HEADROOM))
    own = footprint(target)
    unknown = _unknown(own, "target")
    if unknown:
        return [Check("memory", "warn", unknown, TARGET)]
    configurations = [_fit("none", [own], 0, 0, usable, batch_sizes, seq_len)]
    if mtp_layers:
        configurations.append(_fit(f"mtp@{depth}", [own], depth, mtp_layers * own.kv_bytes_per_layer, usable, batch_sizes,
                                   seq_len))
    checks = [_summarise(configurations, "the target", TARGET, usable, memory_total_bytes)]
    for subject, draft in drafts:
        theirs = footprint(draft)
        unknown = _unknown(theirs, f"draft {draft.path.name}")
        if unknown:
            checks.append(Check("memory", "warn", unknown, subject))
            continue
        fit = _fit(f"draft@{depth}", [own, theirs], depth, 0, usable, batch_sizes, seq_len)
        checks.append(_summarise([fit], f"draft {draft.path.name} with the target", subject, usable, memory_total_bytes))
    return checks


def _unknown(model: Footprint, name: str) -> str | None:
    if model.weight_bytes is None:
        return (f"{name}: weight size unknown (no *.safetensors, and config.json does not describe a dense model); "
                "memory fit not checked")
    if model.kv_bytes_per_token is None:
        return (f"{name}: KV cache size unknown (config.json lacks num_hidden_layers / num_attention_heads); "
                "memory fit not checked")
    return None


def _fit(label: str, models: list[Footprint], depth: int, extra_kv_per_token: int, usable: int,
         batch_sizes: Sequence[int], seq_len: int) -> dict[str, Any]:
    weights = sum(m.weight_bytes for m in models)
    per_token = sum(m.kv_bytes_per_token for m in models) + extra_kv_per_token
    per_sequence = (seq_len + depth + 1) * per_token
    return {
        "configuration": label,
        "weight_bytes": weights,
        "weights_estimated": any(m.weights_estimated for m in models),
        "kv_bytes_per_token": per_token,
        "bytes_by_batch_size": {str(b): weights + b * per_sequence for b in batch_sizes},
        "largest_batch": largest_batch(usable, weights, per_sequence),
    }


def _summarise(configurations: list[dict[str, Any]], name: str, subject: str, usable: int, total: int) -> Check:
    details = {"usable_bytes": usable, "memory_total_bytes": total, "headroom": MEMORY_HEADROOM,
               "configurations": configurations}
    parts = [f"{c['configuration']} up to batch {c['largest_batch']}" for c in configurations]
    worst = min(configurations, key=lambda c: c["largest_batch"])
    asked = max(int(b) for b in worst["bytes_by_batch_size"])
    if worst["largest_batch"] == 0:
        need = worst["bytes_by_batch_size"][min(worst["bytes_by_batch_size"], key=int)]
        return Check("memory", "error", f"{name} does not fit even at batch 1 ({worst['configuration']}: needs "
                     f"~{need / GIB:.1f} GiB, {usable / GIB:.1f} GiB usable)", subject, details)
    if worst["largest_batch"] < asked:
        return Check("memory", "warn", f"{name} fits {'; '.join(parts)} (not every batch size up to {asked})", subject, details)
    return Check("memory", "ok", f"{name} fits {'; '.join(parts)}", subject, details)
