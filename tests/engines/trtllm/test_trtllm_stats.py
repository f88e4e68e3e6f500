"""TensorRT-LLM's counted statistics -> Measurement: sums, latencies and acceptance, never from depth."""

from __future__ import annotations

import json

import pytest

from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.trtllm.stats import (
    MEMORY_KIND,
    NO_MEMORY_KIND,
    RequestRecord,
    build_measurement,
    summarize_iterations,
)
from autotune.workload import Request, Workload

WORKLOAD = Workload("w", [Request("a", 5), Request("b", 3)])


def iteration(context: int, generation: int, latency_ms: float, drafted: int = 0, accepted: int = 0,
              with_drafts: int = 0, draft_ms: float = 0.0, memory: int | None = 10) -> dict:
    stat = {"iterLatencyMS": latency_ms, "inflightBatchingStats": {"numContextRequests": context, "numGenRequests": generation}}
    if memory is not None:
        stat["gpuMemUsage"] = memory
    if drafted or with_drafts:
        stat["specDecodingStats"] = {"numDraftTokens": drafted, "numAcceptedTokens": accepted,
                                     "numRequestsWithDraftTokens": with_drafts, "iterLatencyMS": draft_ms}
    return stat


def test_iteration_sums_split_prefill_drafting_and_verification() -> None:
    stats = [
        iteration(2, 0, 4.0, memory=100),  # prefill only
        iteration(0, 2, 3.0, drafted=6, accepted=4, with_drafts=2, draft_ms=1.0, memory=300),
        json.dumps(iteration(0, 1, 2.0, drafted=3, accepted=0, with_drafts=1, draft_ms=0.5, memory=200)),  # older: JSON text
    ]
    summary = summarize_iterations(stats)
    assert (summary.iterations, summary.target_passes) == (3, 2)
    assert (summary.drafted_tokens, summary.accepted_tokens, summary.requests_with_drafts) == (9, 4, 3)
    assert summary.prefill_time_s == pytest.approx(0.004)
    assert summary.propose_time_s == pytest.approx(0.0015)
    assert summary.verify_time_s == pytest.approx(0.0035)  # (3 - 1) + (2 - 0.5) ms
    assert summary.peak_gpu_memory_bytes == 300


def test_measurement_counts_acceptance_from_decoding_iterations_and_stats() -> None:
    records = [
        RequestRecord([1, 2, 3, 4, 5], first_token_s=0.010, finish_s=0.030, decoding_iter=2),  # 4 tokens in 2 steps
        RequestRecord([6, 7, 8], first_token_s=0.020, finish_s=0.024, decoding_iter=2),  # 2 tokens in 2 steps
    ]
    summary = summarize_iterations([iteration(2, 0, 1.0), iteration(0, 2, 1.0, drafted=8, accepted=2, with_drafts=2),
                                    iteration(0, 2, 1.0, drafted=8, accepted=2, with_drafts=2)])
    m = build_measurement(records, summary, EngineConfig("mtp", 4), WORKLOAD, 2, None, 7, wall_time_s=0.05)
    assert (m.method, m.depth, m.batch_size, m.engine, m.seed) == ("mtp", 4, 2, "trtllm", 7)
    assert (m.output_tokens, m.n_requests) == (8, 2)
    assert m.tokens_per_s == pytest.approx(8 / 0.05)
    assert (m.drafted_tokens, m.accepted_tokens) == (16, 4)
    assert m.acceptance_rate == pytest.approx(0.25)
    assert m.acceptance_length == pytest.approx(6 / 4)  # tokens after the first / generation iterations
    assert (m.sequence_steps, m.target_passes) == (4, 2)
    assert m.acceptance_alpha is None and m.acceptance_by_position == []  # not reported by TensorRT-LLM
    assert m.request_ttft_ms == pytest.approx([10.0, 20.0])
    assert m.request_tpot_ms == pytest.approx([5.0, 2.0])  # (finish - first) / (tokens - 1)
    assert m.outputs == [[1, 2, 3, 4, 5], [6, 7, 8]]
    assert (m.peak_memory_bytes, m.memory_kind) == (10, MEMORY_KIND)
    assert Measurement.from_dict(m.to_dict(include_outputs=True)) == m


def test_without_speculation_or_memory_figures() -> None:
    records = [RequestRecord([1], first_token_s=0.01, finish_s=0.01, decoding_iter=0),
               RequestRecord([], first_token_s=None, finish_s=0.02, decoding_iter=0)]
    m = build_measurement(records, summarize_iterations([iteration(2, 0, 1.0, memory=None)]), EngineConfig("none"),
                          WORKLOAD, 2, 0.0, 0, wall_time_s=0.02)
    assert m.acceptance_rate is None and m.acceptance_length == 1.0
    assert m.request_tpot_ms == [None, None]  # one token or none: no time per output token
    assert m.request_ttft_ms == pytest.approx([10.0, 20.0])  # no token: the request's end
    assert (m.peak_memory_bytes, m.memory_kind) == (0, NO_MEMORY_KIND)
