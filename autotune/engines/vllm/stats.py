"""Turn what vLLM reports into a :class:`~autotune.engines.base.Measurement`. Pure: no import of vllm.

Two counted sources, nothing inferred from the configured depth:

* per engine step, the scheduler's ``SpecDecodingStats`` (``vllm/v1/spec_decode/metrics.py``,
  vLLM 0.32.0: ``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``,
  ``num_accepted_tokens_per_pos``, ``num_draft_tokens_per_pos``), handed to every stat logger of
  the engine (``StatLoggerBase.record(scheduler_stats, iteration_stats, ...)`` in
  ``vllm/v1/metrics/loggers.py``). They are what vLLM's Prometheus counters
  ``vllm:spec_decode_num_drafts`` / ``_num_draft_tokens`` / ``_num_accepted_tokens`` /
  ``_num_accepted_tokens_per_pos`` add up; :class:`SpecDecodingRecorder` adds them up per run
  instead of reading the process-wide registry, which only knows the newest engine of a process;
* per request, the streamed outputs (``RequestOutputKind.DELTA``): its token ids, and the steps
  that gave it tokens after its first (its decode steps).

Definitions (the embedded engine's, see ``Measurement``): ``drafted_tokens`` / ``accepted_tokens``
are the sums of ``num_draft_tokens`` / ``num_accepted_tokens``; ``acceptance_by_position[i]`` =
accepted at position i / drafts that reached position i (``drafted_by_position[i]``);
``acceptance_length`` = tokens after the first / decode steps, summed over requests;
``sequence_steps`` = decode steps; ``target_passes`` = engine steps that gave some request a token
after its first; ``acceptance_alpha`` = accepted / (accepted + rejections), counted only when every
draft had the full depth (then a draft without a rejection is one accepted at its last position).
Time: vLLM does not time drafting apart from verification, so ``propose_time_s`` is 0 and
``verify_time_s`` is the whole of the decode steps (drafting included); ``prefill_time_s`` is the
steps that decoded nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.engines.base import RequestResult, RunCounters

MEMORY_KIND_CPU = "vllm_cpu_weights_and_kv_space"
NO_MEMORY_KIND = "unavailable"


@dataclass
class SpecDecodingCounts:
    """Sums of vLLM's per-step speculative-decoding statistics over one run."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_by_position: list[int] = field(default_factory=list)
    drafted_by_position: list[int] = field(default_factory=list)

    def add(self, stats: Any) -> None:
        """Add one step's ``SpecDecodingStats``."""
        self.drafts += int(stats.num_drafts)
        self.draft_tokens += int(stats.num_draft_tokens)
        self.accepted_tokens += int(stats.num_accepted_tokens)
        _add_into(self.accepted_by_position, stats.num_accepted_tokens_per_pos)
        _add_into(self.drafted_by_position, getattr(stats, "num_draft_tokens_per_pos", None) or [])

    def alpha(self) -> float | None:
        """Per-position acceptance probability (module doc), None when it cannot be counted."""
        if not self.drafts or not self.drafted_by_position or self.drafted_by_position[-1] != self.drafts:
            return None
        rejections = self.drafts - self.accepted_by_position[-1]
        total = self.accepted_tokens + rejections
        return self.accepted_tokens / total if total else None


def _add_into(sums: list[int], values: Any) -> None:
    values = [int(v) for v in values]
    sums.extend([0] * (len(values) - len(sums)))
    for i, value in enumerate(values):
        sums[i] += value


class SpecDecodingRecorder:
    """A vLLM stat logger (the ``StatLoggerBase`` interface, by duck typing so this module needs no
    vLLM) that sums the speculative-decoding statistics of every step until :meth:`take`."""

    def __init__(self) -> None:
        self.counts = SpecDecodingCounts()

    def factory(self, vllm_config: Any = None, engine_index: int = 0) -> SpecDecodingRecorder:
        """What ``LLMEngine.from_engine_args(stat_loggers=[...])`` calls per engine core: this recorder."""
        return self

    def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None, engine_idx: int = 0) -> None:
        stats = getattr(scheduler_stats, "spec_decoding_stats", None)
        if stats is not None:
            self.counts.add(stats)

    def take(self) -> SpecDecodingCounts:
        """The sums so far; counting starts again from zero."""
        counts, self.counts = self.counts, SpecDecodingCounts()
        return counts

    def log_engine_initialized(self) -> None:
        pass

    def log(self) -> None:
        pass

    def record_sleep_state(self, is_awake: int = 1, level: int = 0) -> None:
        pass


@dataclass(frozen=True)
class StreamedRequest(RequestResult):
    """One request of a run (times in seconds since the run started) and its decode steps."""

    decode_steps: int


@dataclass(frozen=True)
class StepTimes:
    """What the run loop timed: engine steps that decoded (``target_passes``), their wall time, and
    the wall time of the steps that only prefilled."""

    target_passes: int
    decode_s: float
    prefill_s: float


def run_counters(
    counts: SpecDecodingCounts, requests: list[StreamedRequest], steps: StepTimes, memory_bytes: int | None,
) -> RunCounters:
    """The counters of one run (module doc); ``memory_bytes`` None: not known (GPU)."""
    sequence_steps = sum(r.decode_steps for r in requests)
    after_first = sum(max(0, len(r.tokens) - 1) for r in requests)
    positions = len(counts.drafted_by_position)
    return RunCounters(
        drafted_tokens=counts.draft_tokens,
        accepted_tokens=counts.accepted_tokens,
        acceptance_alpha=counts.alpha(),
        acceptance_length=max(1.0, after_first / sequence_steps) if sequence_steps else 1.0,
        acceptance_by_position=[
            counts.accepted_by_position[i] / counts.drafted_by_position[i] if counts.drafted_by_position[i] else 0.0
            for i in range(positions)
        ],
        drafted_by_position=list(counts.drafted_by_position),
        target_passes=steps.target_passes,
        sequence_steps=sequence_steps,
        propose_time_s=0.0,
        verify_time_s=steps.decode_s,
        prefill_time_s=steps.prefill_s,
        peak_memory_bytes=memory_bytes or 0,
        memory_kind=MEMORY_KIND_CPU if memory_bytes is not None else NO_MEMORY_KIND,
    )
