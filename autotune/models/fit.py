"""Whether a configuration fits on a device: the one memory estimate and the one margin.

For method m at depth g and concurrency B (every term in the engine's compute dtype)::

    need = target weights + draft weights                              (draft only for method draft)
         + B * (positions + g) * (target KV + draft KV or MTP state)    per cached position
         + B * prompt tokens * vocab * dtype bytes                      (the prefill's logits)

``positions``: cache positions per sequence at depth 0 (prompt + generated tokens + 1); each draft
token adds one. ``prompt tokens``: the prefill positions whose logits are kept (the whole prompt in
the embedded engine, the last one in TensorRT-LLM and vLLM). Footprints: :mod:`autotune.models.footprint`.

A configuration fits when ``need <= usable_bytes(device)`` = ``(1 - MEMORY_MARGIN) * device memory``.
``MEMORY_MARGIN`` is 10 %, the share the engines themselves keep back by default: vLLM's
``gpu_memory_utilization=0.9`` and TensorRT-LLM's ``KvCacheConfig.free_gpu_memory_fraction=0.9``. It
covers what lives outside the weights and the caches: the CUDA context, activations, CUDA graphs
(~100-200 MB each), the sampler's buffers, the allocator's slack and, on a CPU, everything else
living in RAM. The preflight, the tuner's search space and the what-if planner (``autotune plan``,
through :meth:`autotune.perfmodel.roofline.ModelShape.footprint`) use this estimate and this
margin, so they agree on what fits.
"""

from __future__ import annotations

from autotune.models.footprint import ModelFootprint

MEMORY_MARGIN = 0.1


def usable_bytes(device_bytes: int) -> int:
    """Bytes of a device of ``device_bytes`` that weights and caches may take (module doc)."""
    return int(device_bytes * (1 - MEMORY_MARGIN))


def weight_bytes(method: str, target: ModelFootprint, draft: ModelFootprint | None = None) -> int:
    """Bytes of the weights ``method`` loads: the target's, plus the draft's for method draft."""
    return target.weight_bytes + (draft.weight_bytes if method == "draft" and draft is not None else 0)


def bytes_per_position(method: str, target: ModelFootprint, draft: ModelFootprint | None = None) -> int:
    """Cache bytes per sequence and position: the target's KV, plus the draft's KV (method draft) or
    the MTP modules' state (method mtp)."""
    if method == "draft" and draft is not None:
        return target.kv_bytes_per_token + draft.kv_bytes_per_token
    if method == "mtp":
        return target.kv_bytes_per_token + target.mtp_bytes_per_token
    return target.kv_bytes_per_token


def bytes_per_sequence(method: str, depth: int, positions: int, prompt_tokens: int, target: ModelFootprint,
                       draft: ModelFootprint | None = None) -> int:
    """Bytes each sequence of a batch adds: its cache positions and its prefill's logits (module doc)."""
    logits = prompt_tokens * target.vocab_size * target.dtype_bytes
    return (positions + depth) * bytes_per_position(method, target, draft) + logits


def largest_concurrency(usable: int, weights: int, per_sequence: int) -> int:
    """The largest B with weights + B * per_sequence <= usable (0 when not even B = 1 fits)."""
    if per_sequence <= 0:
        raise ValueError("bytes_per_sequence must be positive")
    return max(0, (usable - weights) // per_sequence)
