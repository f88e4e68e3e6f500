"""Will the models and their KV caches fit on the GPU, and up to which batch size?

Per configuration, with every sequence holding ``seq_len`` tokens plus ``depth + 1`` draft slots::

    need(B) = target weights [+ draft weights] + B * (seq_len + depth + 1) * KV bytes per token
    method mtp adds one layer's KV per MTP module; method draft adds the draft's own KV cache.

KV bytes per token and weights: :mod:`autotune.models.footprint`. A configuration fits when
``need(B) <= usable_bytes(GPU memory)`` (:mod:`autotune.models.fit`: 10 % kept back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.models.fit import MEMORY_MARGIN, largest_batch, usable_bytes
from autotune.models.folder import HfModel
from autotune.models.footprint import Footprint, footprint
from autotune.preflight.report import TARGET, Check

GIB = 1 << 30

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
    usable = usable_bytes(memory_total_bytes)
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
    details = {"usable_bytes": usable, "memory_total_bytes": total, "headroom": MEMORY_MARGIN,
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
