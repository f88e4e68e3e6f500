"""Will the models and their KV caches fit on the GPU, and up to which concurrency?

Every sequence holds ``seq_len`` tokens, plus ``depth + 1`` positions speculation writes ahead, and
its prefill keeps the last prompt position's logits (as TensorRT-LLM and vLLM do); the bytes that
takes and the margin kept back are :mod:`autotune.models.fit`'s, the estimate the tuner uses too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.models import fit
from autotune.models.folder import HfModel
from autotune.models.footprint import ModelFootprint, folder_footprint
from autotune.preflight.report import TARGET, Check

GIB = 1 << 30
LAST_PROMPT_POSITION = 1  # prompt positions whose logits a prefill keeps (TensorRT-LLM, vLLM)


def check_memory(
    target: HfModel,
    drafts: Sequence[tuple[str, HfModel]],
    memory_total_bytes: int,
    concurrencies: Sequence[int],
    seq_len: int,
    depth: int,
) -> list[Check]:
    """One ``memory`` check for the target (method none, and mtp when it has MTP modules) and one
    per draft (method draft), all at the deepest ``depth`` of the study."""
    usable = fit.usable_bytes(memory_total_bytes)
    own = folder_footprint(target)
    unknown = _unknown(own, "target")
    if unknown:
        return [Check("memory", "warn", unknown, TARGET)]
    configurations = [_fit("none", 0, own, None, usable, concurrencies, seq_len)]
    if own.n_mtp:
        configurations.append(_fit("mtp", depth, own, None, usable, concurrencies, seq_len))
    checks = [_summarise(configurations, "the target", TARGET, usable, memory_total_bytes)]
    for subject, draft in drafts:
        theirs = folder_footprint(draft)
        unknown = _unknown(theirs, f"draft {draft.path.name}")
        if unknown:
            checks.append(Check("memory", "warn", unknown, subject))
            continue
        pair = _fit("draft", depth, own, theirs, usable, concurrencies, seq_len)
        checks.append(_summarise([pair], f"draft {draft.path.name} with the target", subject, usable, memory_total_bytes))
    return checks


def _unknown(model: ModelFootprint, name: str) -> str | None:
    if not model.weights_known:
        return (f"{name}: weight size unknown (no *.safetensors, and config.json does not describe a dense model); "
                "memory fit not checked")
    if not model.kv_known:
        return (f"{name}: KV cache size unknown (config.json lacks num_hidden_layers / num_attention_heads); "
                "memory fit not checked")
    return None


def _fit(method: str, depth: int, target: ModelFootprint, draft: ModelFootprint | None, usable: int,
         concurrencies: Sequence[int], seq_len: int) -> dict[str, Any]:
    weights = fit.weight_bytes(method, target, draft)
    # seq_len tokens and the position after them: the depth-0 cache positions of models.fit
    per_sequence = fit.bytes_per_sequence(method, depth, seq_len + 1, LAST_PROMPT_POSITION, target, draft)
    return {
        "configuration": method if method == "none" else f"{method}@{depth}",
        "weight_bytes": weights,
        "weights_estimated": target.weights_estimated or (draft is not None and draft.weights_estimated),
        "kv_bytes_per_token": fit.bytes_per_position(method, target, draft),
        "bytes_by_concurrency": {str(b): weights + b * per_sequence for b in concurrencies},
        "largest_concurrency": fit.largest_concurrency(usable, weights, per_sequence),
    }


def _summarise(configurations: list[dict[str, Any]], name: str, subject: str, usable: int, total: int) -> Check:
    details = {"usable_bytes": usable, "memory_total_bytes": total, "headroom": fit.MEMORY_MARGIN,
               "configurations": configurations}
    parts = [f"{c['configuration']} up to concurrency {c['largest_concurrency']}" for c in configurations]
    worst = min(configurations, key=lambda c: c["largest_concurrency"])
    asked = max(int(b) for b in worst["bytes_by_concurrency"])
    if worst["largest_concurrency"] == 0:
        need = worst["bytes_by_concurrency"][min(worst["bytes_by_concurrency"], key=int)]
        return Check("memory", "error", f"{name} does not fit even at concurrency 1 ({worst['configuration']}: needs "
                     f"~{need / GIB:.1f} GiB, {usable / GIB:.1f} GiB usable)", subject, details)
    if worst["largest_concurrency"] < asked:
        return Check("memory", "warn", f"{name} fits {'; '.join(parts)} (not every concurrency up to {asked})", subject, details)
    return Check("memory", "ok", f"{name} fits {'; '.join(parts)}", subject, details)
