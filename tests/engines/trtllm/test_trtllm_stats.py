"""TensorRT-LLM's counted statistics -> Measurement: sums, latencies and acceptance, never from depth."""

from __future__ import annotations

import json

import pytest

from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.base import RunContext, RunShape
from autotune.engines.trtllm.stats import (
    MEMORY_KIND,
    NO_MEMORY_KIND,
    ModelMemory,
    RequestRecord,
    build_measurement,
    counts_context_step,
    summarize_iterations,
)
from autotune.workload import Request, Workload

WORKLOAD = Workload("w", [Request("a", 5), Request("b", 3)])


def run(config: EngineConfig, workload: Workload = WORKLOAD, concurrency: int = 2, temperature: float | None = 0.0,
        seed: int = 0) -> RunContext:
    """A TensorRT-LLM run of ``config`` on one GPU."""
    return RunContext(config, RunShape(workload, concurrency, temperature, seed), "trtllm", "cuda")


def record(tokens: list[int], first_s: float | None, finish_s: float, decoding_iter: int, send_s: float = 0.0) -> RequestRecord:
    """A request sent at ``send_s`` whose tokens arrived evenly from ``first_s`` to ``finish_s``."""
    n = len(tokens)
    times = [first_s + (finish_s - first_s) * k / max(1, n - 1) for k in range(n)] if n else []
    return RequestRecord(tokens, send_s, times, finish_s, decoding_iter)


def iteration(context: int, generation: int, latency_ms: float, drafted: int = 0, accepted: int = 0,
              with_drafts: int = 0, draft_ms: float = 0.0, memory: int | None = 10, kv_blocks: int | None = None) -> dict:
    stat = {"iterLatencyMS": latency_ms, "inflightBatchingStats": {"numContextRequests": context, "numGenRequests": generation}}
    if memory is not None:
        stat["gpuMemUsage"] = memory
    if kv_blocks is not None:
        stat["kvCacheStats"] = {"maxNumBlocks": kv_blocks, "tokensPerBlock": 32, "usedNumBlocks": 1}
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
    summary = summarize_iterations(stats, drafter_timed=True)  # a two-model drafter
    assert (summary.iterations, summary.target_passes) == (3, 2)
    assert (summary.drafted_tokens, summary.accepted_tokens, summary.requests_with_drafts) == (9, 4, 3)
    assert summary.prefill_time_s == pytest.approx(0.004)
    assert summary.propose_time_s == pytest.approx(0.0015)
    assert summary.verify_time_s == pytest.approx(0.0035)  # (3 - 1) + (2 - 0.5) ms
    assert summary.peak_gpu_memory_bytes == 300


def test_drafting_time_is_not_measured_where_the_engine_reports_zero() -> None:
    # specDecodingStats.iterLatencyMS is only a two-model drafter's last_draft_latency_ms: a one-model
    # mode (MTP, EAGLE-3) or n-gram reports 0, and so does an older release on the draft-target path.
    stats = [iteration(2, 0, 4.0), iteration(0, 2, 3.0, drafted=6, accepted=4, with_drafts=2, draft_ms=0.0)]
    for timed in (False, True):
        summary = summarize_iterations(stats, drafter_timed=timed)
        assert summary.propose_time_s is None  # "not measured", never 0
        assert summary.verify_time_s == pytest.approx(0.003)  # the whole generation iteration, drafting included
    # a one-model mode never counts as timed, whatever the field holds
    one_model = summarize_iterations([iteration(0, 2, 3.0, drafted=6, with_drafts=2, draft_ms=1.0)], drafter_timed=False)
    assert one_model.propose_time_s is None and one_model.verify_time_s == pytest.approx(0.003)
    m = build_measurement([record([1, 2], 0.01, 0.02, decoding_iter=2)], one_model,
                          run(EngineConfig("mtp", 3), Workload("w", [Request("a", 2)]), 1, None), wall_time_s=0.02)
    assert m.propose_time_s is None and Measurement.from_dict(m.to_dict()).propose_time_s is None


def test_measurement_counts_acceptance_from_decoding_iterations_and_stats() -> None:
    records = [
        # decoding_iter counts the context step too (PyTorch backend): 4 tokens after the first in 2 steps
        record([1, 2, 3, 4, 5], first_s=0.010, finish_s=0.030, decoding_iter=3),
        record([6, 7, 8], first_s=0.020, finish_s=0.024, decoding_iter=3),  # 2 tokens in 2 steps
    ]
    summary = summarize_iterations([iteration(2, 0, 1.0), iteration(0, 2, 1.0, drafted=8, accepted=2, with_drafts=2),
                                    iteration(0, 2, 1.0, drafted=8, accepted=2, with_drafts=2, kv_blocks=100)])
    memory = ModelMemory(weight_bytes=1000, kv_bytes_per_token=4)
    m = build_measurement(records, summary, run(EngineConfig("mtp", 4), temperature=None, seed=7), wall_time_s=0.05,
                          version="1.2.0", memory=memory)
    assert (m.method, m.depth, m.concurrency, m.engine, m.seed) == ("mtp", 4, 2, "trtllm", 7)
    assert (m.output_tokens, m.n_requests) == (8, 2)
    assert m.tokens_per_s == pytest.approx(8 / 0.03)  # two requests at 2: no steady window, first send to last finish
    assert m.steady is False and m.wall_time_s == 0.05
    assert (m.drafted_tokens, m.accepted_tokens) == (16, 4)
    assert m.acceptance_rate == pytest.approx(0.25)
    assert m.acceptance_length == pytest.approx(6 / 4)  # tokens after the first / generation iterations
    assert (m.sequence_steps, m.target_passes) == (4, 2)
    assert m.acceptance_alpha is None and m.acceptance_by_position == []  # not reported by TensorRT-LLM
    assert m.request_ttft_ms == pytest.approx([10.0, 20.0])
    assert m.request_tpot_ms == pytest.approx([5.0, 2.0])  # (finish - first) / (tokens - 1)
    assert m.outputs == [[1, 2, 3, 4, 5], [6, 7, 8]]
    assert (m.peak_memory_bytes, m.memory_kind) == (1000 + 100 * 32 * 4, MEMORY_KIND)  # weights + KV pool
    assert m.device_memory_bytes == 10  # gpuMemUsage: device-wide, kept apart
    assert m.propose_time_s is None  # MTP is one-model: drafting is not timed
    assert Measurement.from_dict(m.to_dict(include_outputs=True)) == m


@pytest.mark.parametrize(("version", "counted"), [("1.2.0rc3", True), ("1.0.0", True), ("2.0.0", True), (None, True),
                                                  ("0.21.0", False)])
def test_the_context_step_is_taken_out_per_release(version, counted) -> None:
    # 1.0 on: tensorrt_llm.LLM is the PyTorch backend, whose sampler also counts the context step;
    # before: the TensorRT-engine backend advances decoding_iter in generation steps only.
    assert counts_context_step(version) is counted
    records = [record([1, 2, 3, 4, 5], 0.01, 0.03, decoding_iter=4 + counted),  # 4 generation steps
               record([6, 7, 8], 0.02, 0.03, decoding_iter=2 + counted)]  # 2 generation steps
    m = build_measurement(records, summarize_iterations([iteration(2, 0, 1.0)]), run(EngineConfig("none")),
                          wall_time_s=0.03, version=version)
    assert m.sequence_steps == 6 and m.acceptance_length == 1.0


def test_without_speculation_the_acceptance_length_is_exactly_one_from_the_counts() -> None:
    # Σ(tokens - 1) steps: the old arithmetic (Σ decoding_iter) counted one step too many per request.
    records = [record(list(range(n)), 0.01, 0.03, decoding_iter=n) for n in (5, 3, 1)]
    m = build_measurement(records, summarize_iterations([iteration(3, 0, 1.0)]),
                          run(EngineConfig("none"), Workload("w", [Request("a", 5), Request("b", 3), Request("c", 1)]), 3),
                          wall_time_s=0.03)
    assert m.sequence_steps == 4 + 2 + 0
    assert m.acceptance_length == 1.0


def test_without_speculation_or_memory_figures() -> None:
    records = [record([1], first_s=0.01, finish_s=0.01, decoding_iter=0),
               record([], first_s=None, finish_s=0.02, decoding_iter=0)]
    m = build_measurement(records, summarize_iterations([iteration(2, 0, 1.0, memory=None)]), run(EngineConfig("none")),
                          wall_time_s=0.02)
    assert m.acceptance_rate is None and m.acceptance_length == 1.0
    assert m.request_tpot_ms == [None, None]  # one token or none: no time per output token
    assert m.request_ttft_ms == pytest.approx([10.0, 20.0])  # no token: the request's end
    assert (m.peak_memory_bytes, m.memory_kind, m.device_memory_bytes) == (0, NO_MEMORY_KIND, None)


def test_memory_needs_the_kv_pool_size_and_the_model_sizes() -> None:
    records = [record([1], 0.01, 0.01, decoding_iter=1), record([2], 0.01, 0.01, decoding_iter=1)]
    device_wide = summarize_iterations([iteration(2, 0, 1.0, memory=72 << 30)])  # no kvCacheStats
    m = build_measurement(records, device_wide, run(EngineConfig("none")), wall_time_s=0.02,
                          memory=ModelMemory(1000, 4))
    assert (m.peak_memory_bytes, m.memory_kind, m.device_memory_bytes) == (0, NO_MEMORY_KIND, 72 << 30)
    with_pool = summarize_iterations([iteration(2, 0, 1.0, memory=72 << 30, kv_blocks=10)])
    m = build_measurement(records, with_pool, run(EngineConfig("none")), wall_time_s=0.02)
    assert (m.peak_memory_bytes, m.memory_kind) == (0, NO_MEMORY_KIND)  # model sizes unknown
