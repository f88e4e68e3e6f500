"""Which configurations fit on the device, estimated from the model files before anything runs.

For method m at depth g and batch size B (every term in the engine's compute dtype)::

    need = target weights + draft weights                              (draft only for method draft)
         + B * positions(g) * (target KV + draft KV or MTP state)     per cached position
         + B * longest prompt * vocab * dtype bytes                   (the prefill's logits)
    positions(g) = longest prompt + max_tokens + g + 1                 (the engine's cache slots)

A configuration fits when ``need <= (1 - SAFETY_MARGIN) * device memory``; the margin covers
activations, the allocator's slack and, on CPU, everything else living in RAM.

Default batch sizes are the powers of two up to the largest batch at which the baseline (method
none: the target alone) fits, capped at the workload's request count (a larger batch only leaves
slots empty) and at ``CPU_MAX_DEFAULT_BATCH`` on CPU: our CPU machines have two cores, where
batches above 8 only queue work and make every trial slow. Speculative configurations that do not
fit at a batch size of that list are recorded as infeasible rather than shrinking the list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from autotune.engines.embedded.footprint import ModelFootprint
from autotune.errors import ConfigurationError

SAFETY_MARGIN = 0.2
CPU_MAX_DEFAULT_BATCH = 8
GPU_MAX_DEFAULT_BATCH = 1024
GIB = 1 << 30


@dataclass(frozen=True)
class MemoryPlan:
    """The memory facts a search space is built from.

    ``sequence_positions``: cache positions per slot at depth 0 (longest prompt + max_tokens + 1);
    each draft token adds one. ``drafts`` maps draft labels to their footprints.
    """

    device_bytes: int
    target: ModelFootprint
    drafts: Mapping[str, ModelFootprint]
    sequence_positions: int
    prompt_tokens: int

    @property
    def usable_bytes(self) -> int:
        return int(self.device_bytes * (1 - SAFETY_MARGIN))

    def required_bytes(self, method: str, depth: int, batch_size: int, draft: str | None = None) -> int:
        """Estimated peak bytes of running ``method`` at ``depth`` and ``batch_size`` (module doc)."""
        weights = self.target.weight_bytes
        per_position = self.target.kv_bytes_per_token
        if method == "draft":
            weights += self.drafts[draft].weight_bytes
            per_position += self.drafts[draft].kv_bytes_per_token
        elif method == "mtp":
            per_position += self.target.mtp_bytes_per_token
        caches = batch_size * (self.sequence_positions + depth) * per_position
        logits = batch_size * self.prompt_tokens * self.target.vocab_size * self.target.dtype_bytes
        return weights + caches + logits

    def infeasibility(self, method: str, depth: int, batch_size: int, draft: str | None = None) -> str | None:
        """Why this configuration cannot run here, or None when it fits."""
        positions = self.sequence_positions + depth
        models = [("target", self.target)] + ([(f"draft {draft}", self.drafts[draft])] if method == "draft" else [])
        for what, model in models:
            if positions > model.max_seq_len:
                return (f"needs {positions} cache positions per sequence (longest request + depth + 1) "
                        f"but the {what} handles {model.max_seq_len}")
        need = self.required_bytes(method, depth, batch_size, draft)
        if need > self.usable_bytes:
            return (f"needs ~{need / GIB:.2f} GiB for weights and caches at batch {batch_size}, but only "
                    f"{self.usable_bytes / GIB:.2f} GiB of {self.device_bytes / GIB:.2f} GiB are usable "
                    f"({SAFETY_MARGIN:.0%} kept as safety margin)")
        return None


def default_batch_sizes(plan: MemoryPlan, device_type: str, n_requests: int) -> tuple[int, ...]:
    """Powers of two up to the largest batch at which the baseline fits (see the module doc)."""
    cap = min(CPU_MAX_DEFAULT_BATCH if device_type == "cpu" else GPU_MAX_DEFAULT_BATCH, n_requests)
    sizes = []
    batch_size = 1
    while batch_size <= cap and plan.infeasibility("none", 0, batch_size) is None:
        sizes.append(batch_size)
        batch_size *= 2
    if not sizes:
        raise ConfigurationError(
            f"the target does not fit on this device even at batch 1: {plan.infeasibility('none', 0, 1)}; "
            "use a smaller model or a shorter workload"
        )
    return tuple(sizes)
