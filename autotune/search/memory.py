"""Which configurations fit on the device, estimated from the model files before anything runs.

The bytes a configuration needs and the margin kept back are :mod:`autotune.models.fit`'s (the
estimate the preflight uses too); this module applies them to a study: its workload's longest
request gives the cache positions per sequence, the engine decides how many prompt logits a
prefill keeps.

Default concurrency levels are the powers of two up to the largest concurrency at which the baseline (method
none: the target alone) fits, capped at ``GPU_MAX_DEFAULT_CONCURRENCY`` on a GPU (a run decodes at least
4 requests per slot, so each level above costs twice the one below; pass larger ones explicitly)
and at ``CPU_MAX_DEFAULT_CONCURRENCY`` on CPU (a run cycles the workload's requests, so a concurrency
above their count keeps every slot busy too): our CPU machines have two cores, where
batches above 8 only queue work and make every trial slow. Speculative configurations that do not
fit at a concurrency of that list are recorded as infeasible rather than shrinking the list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from autotune.engines.embedded.footprint import cache_positions, longest_prompt_tokens
from autotune.errors import ConfigurationError
from autotune.models import fit
from autotune.models.footprint import ModelFootprint
from autotune.workload import Workload

CPU_MAX_DEFAULT_CONCURRENCY = 8
GPU_MAX_DEFAULT_CONCURRENCY = 64
GIB = 1 << 30


@dataclass(frozen=True)
class MemoryBudget:
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
        return fit.usable_bytes(self.device_bytes)

    def _draft(self, method: str, draft: str | None) -> ModelFootprint | None:
        return self.drafts[draft] if method == "draft" else None

    def weight_bytes(self, method: str, draft: str | None = None) -> int:
        """Bytes of the weights ``method`` loads: the target's, plus the draft's for method draft."""
        return fit.weight_bytes(method, self.target, self._draft(method, draft))

    def bytes_per_sequence(self, method: str, depth: int, draft: str | None = None) -> int:
        """Bytes each sequence of a batch adds: its cache positions and its prefill's logits."""
        return fit.bytes_per_sequence(method, depth, self.sequence_positions, self.prompt_tokens, self.target,
                                      self._draft(method, draft))

    def required_bytes(self, method: str, depth: int, concurrency: int, draft: str | None = None) -> int:
        """Estimated peak bytes of running ``method`` at ``depth`` and ``concurrency`` (:mod:`autotune.models.fit`)."""
        return self.weight_bytes(method, draft) + concurrency * self.bytes_per_sequence(method, depth, draft)

    def largest_concurrency(self, method: str, depth: int, draft: str | None = None) -> int | None:
        """The largest concurrency at which ``method`` at ``depth`` fits in memory (0: not even 1); None
        when sequences cost nothing we know of (a model folder whose config.json lacks the sizes)."""
        weights, per_sequence = self.weight_bytes(method, draft), self.bytes_per_sequence(method, depth, draft)
        if per_sequence <= 0:
            return None if weights <= self.usable_bytes else 0
        return fit.largest_concurrency(self.usable_bytes, weights, per_sequence)

    def infeasibility(self, method: str, depth: int, concurrency: int, draft: str | None = None) -> str | None:
        """Why this configuration cannot run here, or None when it fits."""
        too_long = self._too_long(method, depth, draft)
        if too_long:
            return too_long
        need = self.required_bytes(method, depth, concurrency, draft)
        if need > self.usable_bytes:
            return (f"needs ~{need / GIB:.2f} GiB for weights and caches at concurrency {concurrency}, but only "
                    f"{self.usable_bytes / GIB:.2f} GiB of {self.device_bytes / GIB:.2f} GiB are usable "
                    f"({fit.MEMORY_MARGIN:.0%} kept as safety margin)")
        return None

    def require_baseline_fits(self, concurrencies: Iterable[int], option: str) -> None:
        """ConfigurationError naming the concurrency levels ``option`` asked for at which not even the
        baseline (the target alone) fits: nothing could be measured there."""
        too_large = sorted(b for b in set(concurrencies) if self.infeasibility("none", 0, b) is not None)
        if not too_large:
            return
        largest = self.largest_concurrency("none", 0)
        fix = f"pass sizes up to {largest}" if largest else "use a smaller --target or a shorter --workload"
        raise ConfigurationError(f"{option} {', '.join(map(str, too_large))}: the target alone "
                                 f"{self.infeasibility('none', 0, too_large[0])}; {fix}")

    def require_fit(self, method: str, depth: int, concurrency: int, draft: str | None = None) -> None:
        """ConfigurationError, saying what to change, when this one configuration cannot run here:
        the check ``tune`` applies to each candidate (:meth:`infeasibility`), for ``measure``."""
        why = self.infeasibility(method, depth, concurrency, draft)
        if why is None:
            return
        label = method if method == "none" else f"{method}@{depth}"
        if self._too_long(method, depth, draft):
            fix = "use a workload with shorter prompts or max_tokens (--workload)" + (
                "" if method == "none" else " or a smaller --depth")
        else:
            largest = self.largest_concurrency(method, depth, draft)
            smaller = "a smaller --target" + (" or --draft" if method == "draft" else "")
            fix = (f"pass --concurrency {largest} or less" if largest else
                   f"it does not fit even at concurrency 1: use {smaller} or a shorter --workload")
        raise ConfigurationError(f"{label} at concurrency {concurrency} cannot run on this device: {why}; {fix}")

    def _too_long(self, method: str, depth: int, draft: str | None) -> str | None:
        """Why a sequence of the workload does not fit a model's context window, or None."""
        positions = self.sequence_positions + depth
        models = [("target", self.target)] + ([(f"draft {draft}", self.drafts[draft])] if method == "draft" else [])
        for what, model in models:
            if positions > model.max_seq_len:
                return (f"needs {positions} cache positions per sequence (longest request + depth + 1) "
                        f"but the {what} handles {model.max_seq_len}")
        return None


def memory_budget(device_bytes: int, target: ModelFootprint, drafts: Mapping[str, ModelFootprint], workload: Workload,
                *, whole_prompt_logits: bool) -> MemoryBudget:
    """The memory budget of running ``workload`` on a device of ``device_bytes``: cache positions per
    sequence counted in bytes (our tokenizer's tokens: for a subword tokenizer, whose tokens hold one
    byte or more, an upper bound); ``whole_prompt_logits``: the engine's prefill keeps the logits of
    every prompt position (the embedded engine), not only the last (TensorRT-LLM, vLLM)."""
    return MemoryBudget(
        device_bytes=device_bytes,
        target=target,
        drafts=drafts,
        sequence_positions=cache_positions(workload, 0),
        prompt_tokens=longest_prompt_tokens(workload) if whole_prompt_logits else 1,
    )


def default_concurrencies(budget: MemoryBudget, device_type: str) -> tuple[int, ...]:
    """Powers of two up to the largest concurrency at which the baseline fits (see the module doc)."""
    cap = CPU_MAX_DEFAULT_CONCURRENCY if device_type == "cpu" else GPU_MAX_DEFAULT_CONCURRENCY
    sizes = []
    concurrency = 1
    while concurrency <= cap and budget.infeasibility("none", 0, concurrency) is None:
        sizes.append(concurrency)
        concurrency *= 2
    if not sizes:
        raise ConfigurationError(
            f"the target does not fit on this device even at concurrency 1: {budget.infeasibility('none', 0, 1)}; "
            "use a smaller model or a shorter workload"
        )
    return tuple(sizes)
