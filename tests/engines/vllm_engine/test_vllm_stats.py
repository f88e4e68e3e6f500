"""vLLM's per-step statistics and streamed requests -> our counters (autotune.engines.vllm.stats),
with stand-ins for vLLM's ``SpecDecodingStats`` / ``SchedulerStats``: pure, no vLLM."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autotune.engines.base import EngineConfig, RunCounters, measurement_of_run
from autotune.engines.vllm.stats import (
    MEMORY_KIND_CPU,
    NO_MEMORY_KIND,
    SpecDecodingCounts,
    SpecDecodingRecorder,
    StepTimes,
    StreamedRequest,
    run_counters,
)
from autotune.workload import Request, Workload


def step(drafts, draft_tokens, accepted, accepted_per_pos, drafted_per_pos):
    """One engine step's SpecDecodingStats (vllm/v1/spec_decode/metrics.py)."""
    return SimpleNamespace(num_drafts=drafts, num_draft_tokens=draft_tokens, num_accepted_tokens=accepted,
                           num_accepted_tokens_per_pos=accepted_per_pos, num_draft_tokens_per_pos=drafted_per_pos)


def full_depth_counts() -> SpecDecodingCounts:
    """Four drafts of depth 3 over two steps, accepting 3, 1 | 0, 2 tokens: 6 accepted of 12 drafted;
    position 0 accepted by 3 drafts, position 1 by 2, position 2 by 1."""
    counts = SpecDecodingCounts()
    counts.add(step(2, 6, 4, [2, 1, 1], [2, 2, 2]))  # accepted 3 and 1
    counts.add(step(2, 6, 2, [1, 1, 0], [2, 2, 2]))  # accepted 0 and 2
    return counts


def test_add_sums_every_field() -> None:
    counts = full_depth_counts()
    assert counts == SpecDecodingCounts(drafts=4, draft_tokens=12, accepted_tokens=6,
                                        accepted_by_position=[3, 2, 1], drafted_by_position=[4, 4, 4])


def test_position_lists_grow_to_the_longest_step() -> None:
    counts = SpecDecodingCounts()
    counts.add(step(1, 1, 1, [1], [1]))
    counts.add(step(2, 5, 3, [2, 1, 0], [2, 2, 1]))
    counts.add(step(1, 2, 0, [0, 0], [1, 1]))
    assert counts == SpecDecodingCounts(drafts=4, draft_tokens=8, accepted_tokens=4,
                                        accepted_by_position=[3, 1, 0], drafted_by_position=[4, 3, 1])


def test_a_step_without_per_position_draft_counts_adds_none() -> None:
    counts = SpecDecodingCounts()
    counts.add(SimpleNamespace(num_drafts=2, num_draft_tokens=4, num_accepted_tokens=3, num_accepted_tokens_per_pos=[2, 1]))
    assert counts == SpecDecodingCounts(drafts=2, draft_tokens=4, accepted_tokens=3, accepted_by_position=[2, 1],
                                        drafted_by_position=[])
    assert counts.alpha() is None


def test_alpha_of_full_depth_drafts() -> None:
    # accepted / (accepted + drafts - accepted at the last position) = 6 / (6 + 4 - 1): the drafts that
    # accepted 1, 0 and 2 tokens had one rejection each, the one that accepted all 3 had none.
    assert full_depth_counts().alpha() == 6 / 9


def test_alpha_is_zero_when_every_draft_is_rejected_at_once() -> None:
    counts = SpecDecodingCounts()
    counts.add(step(3, 6, 0, [0, 0], [3, 3]))
    assert counts.alpha() == 0.0


def test_alpha_is_one_when_every_draft_is_accepted_whole() -> None:
    counts = SpecDecodingCounts()
    counts.add(step(2, 4, 4, [2, 2], [2, 2]))
    assert counts.alpha() == 1.0


def test_alpha_is_not_counted_when_a_draft_was_shorter() -> None:
    counts = SpecDecodingCounts()
    counts.add(step(2, 3, 1, [1, 0], [2, 1]))  # the second draft had one token of two
    assert counts.alpha() is None


def test_alpha_is_not_counted_when_nothing_was_drafted() -> None:
    assert SpecDecodingCounts().alpha() is None
    counts = SpecDecodingCounts()
    counts.add(step(0, 0, 0, [0, 0], [0, 0]))
    assert counts.alpha() is None


def test_the_recorder_sums_the_steps_that_carry_spec_decoding_stats() -> None:
    recorder = SpecDecodingRecorder()
    recorder.record(SimpleNamespace(spec_decoding_stats=step(2, 6, 4, [2, 1, 1], [2, 2, 2])), None)
    recorder.record(SimpleNamespace(spec_decoding_stats=None), SimpleNamespace())  # a step that drafted nothing
    recorder.record(SimpleNamespace(), None)  # scheduler stats without the field
    recorder.record(None, None)  # no scheduler stats this iteration
    recorder.record(SimpleNamespace(spec_decoding_stats=step(2, 6, 2, [1, 1, 0], [2, 2, 2])), None,
                    mm_cache_stats=None, engine_idx=0)
    assert recorder.take() == full_depth_counts()


def test_take_starts_counting_again() -> None:
    recorder = SpecDecodingRecorder()
    recorder.record(SimpleNamespace(spec_decoding_stats=step(1, 2, 1, [1, 0], [1, 1])), None)
    first = recorder.take()
    assert first == SpecDecodingCounts(1, 2, 1, [1, 0], [1, 1])
    assert recorder.take() == SpecDecodingCounts()
    recorder.record(SimpleNamespace(spec_decoding_stats=step(1, 2, 2, [1, 1], [1, 1])), None)
    assert recorder.take() == SpecDecodingCounts(1, 2, 2, [1, 1], [1, 1])
    assert first == SpecDecodingCounts(1, 2, 1, [1, 0], [1, 1])  # what was taken is not counted into


def test_the_factory_hands_vllm_this_recorder() -> None:
    recorder = SpecDecodingRecorder()
    assert recorder.factory() is recorder
    assert recorder.factory(SimpleNamespace(), 1) is recorder
    assert recorder.factory(vllm_config=object(), engine_index=0) is recorder
    # the rest of vLLM's StatLoggerBase interface does nothing
    assert recorder.log_engine_initialized() is None
    assert recorder.log() is None
    assert recorder.record_sleep_state(0, 1) is None
    assert recorder.take() == SpecDecodingCounts()


REQUESTS = [
    StreamedRequest([1, 2, 3, 4, 5], 0.1, 0.5, 2),  # 4 tokens after the first in 2 decode steps
    StreamedRequest([7, 8, 9], 0.2, 0.4, 1),  # 2 in 1
    StreamedRequest([6], 0.3, 0.3, 0),  # finished at its first token
]


def test_run_counters_of_a_speculative_run() -> None:
    counters = run_counters(full_depth_counts(), REQUESTS, StepTimes(target_passes=2, decode_s=0.25, prefill_s=0.125),
                            123_456)
    assert counters == RunCounters(
        drafted_tokens=12, accepted_tokens=6, acceptance_alpha=6 / 9,
        acceptance_length=2.0,  # (4 + 2 + 0) tokens after the first / (2 + 1 + 0) decode steps
        acceptance_by_position=[0.75, 0.5, 0.25], drafted_by_position=[4, 4, 4],
        target_passes=2, sequence_steps=3, propose_time_s=0.0, verify_time_s=0.25, prefill_time_s=0.125,
        peak_memory_bytes=123_456, memory_kind=MEMORY_KIND_CPU,
    )
    assert counters.peak_rss_delta_bytes is None


def test_acceptance_length_of_an_uneven_run() -> None:
    requests = [StreamedRequest(list(range(8)), 0.0, 1.0, 3), StreamedRequest(list(range(3)), 0.0, 1.0, 2)]
    counters = run_counters(SpecDecodingCounts(), requests, StepTimes(3, 0.5, 0.1), 0)
    assert counters.acceptance_length == 9 / 5  # (7 + 2) / (3 + 2)
    assert counters.sequence_steps == 5


def test_a_position_no_draft_reached_has_acceptance_zero() -> None:
    counts = SpecDecodingCounts()
    counts.add(step(2, 2, 1, [1, 0], [2, 0]))
    counters = run_counters(counts, REQUESTS, StepTimes(1, 0.1, 0.1), 1)
    assert counters.acceptance_by_position == [0.5, 0.0]
    assert counters.drafted_by_position == [2, 0]
    assert counters.acceptance_alpha is None  # the drafts were shorter than the depth


def test_drafted_by_position_is_a_copy() -> None:
    counts = full_depth_counts()
    counters = run_counters(counts, REQUESTS, StepTimes(2, 0.1, 0.1), 1)
    counters.drafted_by_position.append(99)
    assert counts.drafted_by_position == [4, 4, 4]


def test_unknown_memory_is_reported_as_unavailable() -> None:
    counters = run_counters(full_depth_counts(), REQUESTS, StepTimes(2, 0.1, 0.1), None)
    assert counters.peak_memory_bytes == 0
    assert counters.memory_kind == NO_MEMORY_KIND == "unavailable"


def test_zero_known_bytes_are_still_known() -> None:
    counters = run_counters(full_depth_counts(), REQUESTS, StepTimes(2, 0.1, 0.1), 0)
    assert (counters.peak_memory_bytes, counters.memory_kind) == (0, MEMORY_KIND_CPU)


WORKLOAD = Workload("w", [Request("a", 5), Request("b", 4)])


def measure_none(requests: list[StreamedRequest], steps: StepTimes):
    counters = run_counters(SpecDecodingCounts(), requests, steps, 2048)
    return counters, measurement_of_run(EngineConfig("none"), WORKLOAD, requests, counters, batch_size=2,
                                        temperature=0.0, seed=0, wall_time_s=2.0, device="cpu", engine="vllm")


def test_method_none_without_decode_steps() -> None:
    counters, measurement = measure_none([StreamedRequest([1], 0.5, 0.5, 0), StreamedRequest([2], 0.5, 0.5, 0)],
                                         StepTimes(0, 0.0, 0.5))
    assert counters.acceptance_length == 1.0
    assert counters.sequence_steps == 0
    assert (counters.drafted_tokens, counters.accepted_tokens) == (0, 0)
    assert counters.acceptance_alpha is None
    assert counters.acceptance_by_position == [] and counters.drafted_by_position == []
    assert measurement.acceptance_rate is None
    assert (measurement.engine, measurement.output_tokens, measurement.tokens_per_s) == ("vllm", 2, 1.0)


def test_method_none_decodes_one_token_per_step() -> None:
    counters, measurement = measure_none(
        [StreamedRequest([1, 2, 3, 4, 5], 0.5, 1.5, 4), StreamedRequest([1, 2, 3, 4], 0.5, 1.25, 3)],
        StepTimes(4, 1.0, 0.5),
    )
    assert counters.acceptance_length == 1.0
    assert counters.sequence_steps == 7
    assert measurement.acceptance_rate is None
    assert measurement.tpot_ms_p50 == pytest.approx(250.0)
    assert (measurement.verify_time_s, measurement.prefill_time_s, measurement.propose_time_s) == (1.0, 0.5, 0.0)


def test_a_speculative_measurement_has_the_counted_acceptance_rate() -> None:
    counters = run_counters(full_depth_counts(), REQUESTS, StepTimes(2, 0.25, 0.125), 1)
    workload = Workload("w", [Request("a", 5), Request("b", 3), Request("c", 1)])
    measurement = measurement_of_run(EngineConfig("ngram", 3), workload, REQUESTS, counters, batch_size=3,
                                     temperature=0.0, seed=0, wall_time_s=1.0, device="cpu", engine="vllm")
    assert measurement.acceptance_rate == 0.5  # 6 accepted of 12 drafted
    assert measurement.acceptance_length == 2.0
    assert measurement.acceptance_by_position == [0.75, 0.5, 0.25]
    assert measurement.request_tokens == [5, 3, 1]
