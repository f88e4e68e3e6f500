"""Whether a model's footprint fits on a device: the one memory margin every estimate uses.

A configuration fits when its estimated bytes stay within ``usable_bytes(device)`` =
``(1 - MEMORY_MARGIN) * device memory``. ``MEMORY_MARGIN`` is 10 %, the share the engines themselves
keep back by default: vLLM's ``gpu_memory_utilization=0.9`` and TensorRT-LLM's
``KvCacheConfig.free_gpu_memory_fraction=0.9``. It covers what lives outside the weights and the KV
cache: the CUDA context, activations, CUDA graphs (~100-200 MB each), the sampler's buffers, the
allocator's slack and, on a CPU, everything else living in RAM. The preflight, the tuner's search
space and the what-if planner all use it, so they agree on what fits.
"""

from __future__ import annotations

MEMORY_MARGIN = 0.1


def usable_bytes(device_bytes: int) -> int:
    """Bytes of a device of ``device_bytes`` that weights and caches may take (module doc)."""
    return int(device_bytes * (1 - MEMORY_MARGIN))


def largest_batch(usable: int, weight_bytes: int, bytes_per_sequence: int) -> int:
    """The largest B with weights + B * bytes_per_sequence <= usable (0 when not even B = 1 fits)."""
    if bytes_per_sequence <= 0:
        raise ValueError("bytes_per_sequence must be positive")
    return max(0, (usable - weight_bytes) // bytes_per_sequence)
