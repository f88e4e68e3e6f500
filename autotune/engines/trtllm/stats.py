"""Turn what TensorRT-LLM reports into a :class:`~autotune.engines.base.Measurement`. Pure.

Two counted sources, nothing inferred from the configured depth:

* per iteration, ``llm.get_stats_async()`` dicts (``enable_iter_perf_stats=True``):
  ``iterLatencyMS``, ``gpuMemUsage`` (bytes), ``inflightBatchingStats.numContextRequests`` /
  ``numGenRequests`` and ``specDecodingStats`` {``numDraftTokens``, ``numAcceptedTokens``,
  ``numRequestsWithDraftTokens``, ``iterLatencyMS`` (drafting only)} (field names of
  ``cpp/include/tensorrt_llm/executor/types.h`` ``IterationStats`` / ``SpecDecodingStats``);
* per request, the streamed ``RequestOutput``: its token ids and ``decoding_iter``, the number of
  generation iterations after the context iteration (trtllm-bench's ``reporting.py`` counts
  ``decoding_iter + 1`` iterations per request).

Definitions (the embedded engine's, see ``Measurement``): ``drafted_tokens`` / ``accepted_tokens``
are the sums of ``numDraftTokens`` / ``numAcceptedTokens``; ``acceptance_length`` = tokens generated
after the first / generation iterations, summed over requests (prefill excluded, 1.0 without
speculation); ``sequence_steps`` = sum of ``decoding_iter``; ``target_passes`` = iterations with at
least one request in generation. Time: ``propose_time_s`` = drafting time
(``specDecodingStats.iterLatencyMS``), ``prefill_time_s`` = iterations with no request in
generation, ``verify_time_s`` = the other iterations minus drafting. Not reported by TensorRT-LLM,
so left empty: ``acceptance_alpha`` (needs each step's first rejection) and
``acceptance_by_position``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from autotune.engines.base import EngineConfig, Measurement, RequestResult, RunCounters, measurement_of_run
from autotune.workload import Workload

STATS_TIMEOUT_S = 1.0  # get_stats_async stops after this long without a new iteration
MEMORY_KIND = "trtllm_gpu_mem_usage"
NO_MEMORY_KIND = "unavailable"


@dataclass(frozen=True)
class RequestRecord(RequestResult):
    """One streamed request (times in seconds since the run started) and its ``decoding_iter``."""

    decoding_iter: int


@dataclass(frozen=True)
class IterationSummary:
    """Sums over the iteration statistics of one run (see the module doc)."""

    iterations: int
    target_passes: int
    drafted_tokens: int
    accepted_tokens: int
    requests_with_drafts: int
    propose_time_s: float
    verify_time_s: float
    prefill_time_s: float
    peak_gpu_memory_bytes: int | None


def parse_stat(entry: dict[str, Any] | str) -> dict[str, Any]:
    """One iteration's statistics as a dict (older releases hand out JSON strings)."""
    return json.loads(entry) if isinstance(entry, str) else entry


def summarize_iterations(stats: Iterable[dict[str, Any] | str]) -> IterationSummary:
    iterations = passes = drafted = accepted = with_drafts = 0
    propose_ms = verify_ms = prefill_ms = 0.0
    peak: int | None = None
    for stat in map(parse_stat, stats):
        iterations += 1
        latency_ms = float(stat.get("iterLatencyMS") or 0.0)
        spec = stat.get("specDecodingStats") or {}
        draft_ms = float(spec.get("iterLatencyMS") or 0.0)
        drafted += int(spec.get("numDraftTokens") or 0)
        accepted += int(spec.get("numAcceptedTokens") or 0)
        with_drafts += int(spec.get("numRequestsWithDraftTokens") or 0)
        if int((stat.get("inflightBatchingStats") or {}).get("numGenRequests") or 0) > 0:
            passes += 1
            propose_ms += draft_ms
            verify_ms += max(0.0, latency_ms - draft_ms)
        else:
            prefill_ms += latency_ms
        if stat.get("gpuMemUsage") is not None:
            peak = max(peak or 0, int(stat["gpuMemUsage"]))
    return IterationSummary(iterations, passes, drafted, accepted, with_drafts, propose_ms / 1e3, verify_ms / 1e3,
                            prefill_ms / 1e3, peak)


def build_measurement(
    records: list[RequestRecord],
    summary: IterationSummary,
    config: EngineConfig,
    workload: Workload,
    batch_size: int,
    temperature: float | None,
    seed: int,
    wall_time_s: float,
    device: str = "cuda",
) -> Measurement:
    """The measurement of one run of ``workload`` (``records`` in request order)."""
    sequence_steps = sum(r.decoding_iter for r in records)
    after_first = sum(max(0, len(r.tokens) - 1) for r in records)
    counters = RunCounters(
        drafted_tokens=summary.drafted_tokens,
        accepted_tokens=summary.accepted_tokens,
        acceptance_alpha=None,
        acceptance_length=max(1.0, after_first / sequence_steps) if sequence_steps else 1.0,
        acceptance_by_position=[],
        target_passes=summary.target_passes,
        sequence_steps=sequence_steps,
        propose_time_s=summary.propose_time_s,
        verify_time_s=summary.verify_time_s,
        prefill_time_s=summary.prefill_time_s,
        peak_memory_bytes=summary.peak_gpu_memory_bytes or 0,
        memory_kind=MEMORY_KIND if summary.peak_gpu_memory_bytes is not None else NO_MEMORY_KIND,
    )
    return measurement_of_run(
        config, workload, records, counters, batch_size=batch_size, temperature=temperature, seed=seed,
        wall_time_s=wall_time_s, device=device, engine="trtllm",
    )
