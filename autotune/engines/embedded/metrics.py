"""Turn a decode run (:class:`DecodeResult`) into a :class:`Measurement`, and measure memory."""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass

import torch

from autotune.analysis.match_runs import continuation, replayed_acceptance_lengths
from autotune.engines.base import EngineConfig, Measurement, RunContext, RunCounters, RunShape, measurement_of_run
from autotune.engines.embedded.decoding import DecodeResult
from autotune.workload import Workload


def peak_rss_bytes() -> int | None:
    """The process's peak resident set size so far (None where the OS does not report it)."""
    try:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (AttributeError, OSError):
        return None
    return peak if sys.platform == "darwin" else peak * 1024  # macOS: bytes; Linux: KiB


@dataclass
class MemoryProbe:
    """Measures a run's peak memory: CUDA's allocator peak, or on CPU the bytes of model weights
    plus the caches the run allocated, and how much the run raised the process's peak RSS."""

    device: torch.device
    weights_bytes: int

    def __enter__(self) -> MemoryProbe:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.rss_before = peak_rss_bytes()
        return self

    def __exit__(self, *exc_info) -> None:
        rss_after = peak_rss_bytes()
        self.rss_delta = None if rss_after is None or self.rss_before is None else rss_after - self.rss_before
        self.cuda_peak = torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else None

    def peak(self, state_bytes: int) -> tuple[int, str]:
        """(peak bytes, memory_kind) for a run that allocated ``state_bytes`` of caches and buffers."""
        if self.cuda_peak is not None:
            return self.cuda_peak, "cuda_max_allocated"
        return self.weights_bytes + state_bytes, "cpu_weights_and_caches"


def build_measurement(
    result: DecodeResult,
    config: EngineConfig,
    workload: Workload,
    concurrency: int,
    temperature: float | None,
    seed: int,
    memory: MemoryProbe,
) -> Measurement:
    """Summarise one run of ``workload`` (results in request order)."""
    stats = result.stats
    peak_bytes, memory_kind = memory.peak(result.state_bytes)
    # Every draft up to and including the first rejected one is evaluated: alpha = accepted / evaluated.
    evaluated = stats.accepted_tokens + stats.rejections
    counters = RunCounters(
        drafted_tokens=stats.drafted_tokens,
        accepted_tokens=stats.accepted_tokens,
        acceptance_alpha=stats.accepted_tokens / evaluated if evaluated else None,
        acceptance_length=(stats.accepted_tokens + stats.sequence_steps) / stats.sequence_steps if stats.sequence_steps else 1.0,
        acceptance_by_position=[
            accepted / drafted for accepted, drafted in zip(stats.accepted_by_position, stats.drafted_by_position)
        ],
        target_passes=stats.target_passes,
        sequence_steps=stats.sequence_steps,
        propose_time_s=stats.propose_time_s,
        verify_time_s=stats.verify_time_s,
        prefill_time_s=stats.prefill_time_s,
        peak_memory_bytes=peak_bytes,
        memory_kind=memory_kind,
        peak_rss_delta_bytes=memory.rss_delta,
        drafted_by_position=list(stats.drafted_by_position),
        replayed_acceptance_length=replayed_acceptance_lengths(
            stats.chains.closed(), stats.chains.depth, continuation(stats.accepted_by_position, stats.sequence_steps)
        ) if stats.chains.depth else [],
    )
    run = RunContext(config, RunShape(workload, concurrency, temperature, seed), "embedded", str(memory.device))
    return measurement_of_run(run, result.results, counters, result.wall_time_s)
