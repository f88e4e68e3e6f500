"""vLLM's per-step statistics and streamed requests -> our counters (autotune.engines.vllm.stats): the
step log a server's stat logger writes and reads back, with stand-ins for vLLM's ``SpecDecodingStats``
/ ``SchedulerStats`` / ``IterationStats``: pure, no vLLM (the live tests check the same counters on
vLLM's own: test_vllm_live, test_vllm_mtp_live)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune.analysis.steady import RequestResult
from autotune.engines.base import EngineConfig, RunContext, RunCounters, RunShape, measurement_of_run
from autotune.engines.vllm.stats import (
    MEMORY_KIND_CPU,
    NO_MEMORY_KIND,
    SpecDecodingCounts,
    StepLogReader,
    StepTimes,
    TimedStep,
    run_counters,
    step_entry,
)
from autotune.workload import Request, Workload


def step(drafts, draft_tokens, accepted, accepted_per_pos, drafted_per_pos) -> dict:
    """One engine step's SpecDecodingStats fields (vllm/v1/spec_decode/metrics.py), as its log entry keeps them."""
    return {"num_drafts": drafts, "num_draft_tokens": draft_tokens, "num_accepted_tokens": accepted,
            "num_accepted_tokens_per_pos": accepted_per_pos, "num_draft_tokens_per_pos": drafted_per_pos}


def scheduler(spec: dict | None) -> SimpleNamespace:
    """SchedulerStats carrying ``spec`` as its SpecDecodingStats (None: no speculation)."""
    return SimpleNamespace(spec_decoding_stats=None if spec is None else SimpleNamespace(**spec))


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
    counts.add({"num_drafts": 2, "num_draft_tokens": 4, "num_accepted_tokens": 3, "num_accepted_tokens_per_pos": [2, 1]})
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


def iteration(decoded: int, first_tokens: int = 0) -> SimpleNamespace:
    """One step's IterationStats (vllm/v1/metrics/stats.py): an inter-token latency per decode row."""
    return SimpleNamespace(inter_token_latencies_iter=[0.01] * decoded, time_to_first_tokens_iter=[0.1] * first_tokens)


def write_log(path: Path, calls: list[tuple]) -> None:
    """Append what the server's stat logger writes for each (scheduler stats, iteration stats, time) call."""
    with path.open("a") as log:
        for scheduler_stats, iteration_stats, at_s in calls:
            entry = step_entry(scheduler_stats, iteration_stats, at_s)
            if entry is not None:
                log.write(json.dumps(entry) + "\n")


def test_the_step_log_sums_the_steps_that_carry_spec_decoding_stats(tmp_path: Path) -> None:
    log = tmp_path / "steps"
    write_log(log, [
        (scheduler(step(2, 6, 4, [2, 1, 1], [2, 2, 2])), iteration(2), 1.0),
        (scheduler(None), iteration(0, 1), 2.0),  # a step that drafted nothing
        (SimpleNamespace(), None, 3.0),  # scheduler stats without the field, no output: nothing written
        (None, None, 4.0),  # no scheduler stats this iteration
        (scheduler(step(2, 6, 2, [1, 1, 0], [2, 2, 2])), iteration(2), 5.0),
    ])
    assert len(log.read_text().splitlines()) == 3
    counts, _ = StepLogReader(log).take(0.0)
    assert counts == full_depth_counts()


def test_steps_are_timed_from_the_one_before_and_only_where_a_request_got_a_token(tmp_path: Path) -> None:
    log = tmp_path / "steps"
    write_log(log, [
        (None, iteration(0, 2), 10.5),  # both requests' first tokens: a prefill step
        (scheduler(step(2, 4, 3, [2, 1], [2, 2])), iteration(2), 10.75),
        (scheduler(step(1, 2, 2, [1, 1], [1, 1])), None, 10.8),  # counts without an output: not a step
        (scheduler(step(1, 2, 2, [1, 1], [1, 1])), iteration(1, 1), 11.0),
    ])
    counts, steps = StepLogReader(log).take(10.0)
    assert steps == [TimedStep(0.5, 0), TimedStep(0.25, 2, 4, 3), TimedStep(0.25, 1, 2, 2)]
    assert counts.accepted_tokens == 7 and counts.drafts == 4
    assert StepTimes.of(steps) == StepTimes(target_passes=2, sequence_steps=3, decode_s=0.5, prefill_s=0.5)


def test_take_reads_only_what_was_written_since_and_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "steps"
    log.touch()
    reader = StepLogReader(log)
    write_log(log, [(scheduler(step(1, 2, 1, [1, 0], [1, 1])), iteration(1), 1.0)])
    first, first_steps = reader.take(0.0)
    assert first == SpecDecodingCounts(1, 2, 1, [1, 0], [1, 1]) and len(first_steps) == 1
    assert reader.take(0.0) == (SpecDecodingCounts(), [])
    with log.open("a") as handle:  # a line the server is still writing waits for the next take
        handle.write('{"at": 2.0, "decoded": 1, "spec"')
    assert reader.take(0.0) == (SpecDecodingCounts(), [])
    with log.open("a") as handle:
        handle.write(': null}\n')
    assert reader.take(1.5) == (SpecDecodingCounts(), [TimedStep(0.5, 1)])


def test_an_entry_keeps_only_the_spec_decoding_fields() -> None:
    stats = SimpleNamespace(spec_decoding_stats=SimpleNamespace(**step(1, 2, 1, (1, 0), [1, 1]), other=3))
    assert step_entry(stats, iteration(1), 4.5) == {"at": 4.5, "decoded": 1, "spec": step(1, 2, 1, [1, 0], [1, 1])}
    assert step_entry(None, None, 1.0) is None


REQUESTS = [
    RequestResult([1, 2, 3, 4, 5], 0.0, [0.1, 0.3, 0.3, 0.5, 0.5], 0.5),  # 4 tokens after the first in 2 steps
    RequestResult([7, 8, 9], 0.0, [0.2, 0.4, 0.4], 0.4),  # 2 in 1
    RequestResult([6], 0.0, [0.3], 0.3),  # finished at its first token
]


def test_run_counters_of_a_speculative_run() -> None:
    counters = run_counters(full_depth_counts(), REQUESTS, StepTimes(target_passes=2, sequence_steps=3, decode_s=0.25, prefill_s=0.125),
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
    requests = [RequestResult(list(range(8)), 0.0, [1.0] * 8, 1.0), RequestResult(list(range(3)), 0.0, [1.0] * 3, 1.0)]
    counters = run_counters(SpecDecodingCounts(), requests, StepTimes(3, 5, 0.5, 0.1), 0)
    assert counters.acceptance_length == 9 / 5  # (7 + 2) / (3 + 2)
    assert counters.sequence_steps == 5


def test_a_position_no_draft_reached_has_acceptance_zero() -> None:
    counts = SpecDecodingCounts()
    counts.add(step(2, 2, 1, [1, 0], [2, 0]))
    counters = run_counters(counts, REQUESTS, StepTimes(1, 3, 0.1, 0.1), 1)
    assert counters.acceptance_by_position == [0.5, 0.0]
    assert counters.drafted_by_position == [2, 0]
    assert counters.acceptance_alpha is None  # the drafts were shorter than the depth


def test_drafted_by_position_is_a_copy() -> None:
    counts = full_depth_counts()
    counters = run_counters(counts, REQUESTS, StepTimes(2, 3, 0.1, 0.1), 1)
    counters.drafted_by_position.append(99)
    assert counts.drafted_by_position == [4, 4, 4]


def test_unknown_memory_is_reported_as_unavailable() -> None:
    counters = run_counters(full_depth_counts(), REQUESTS, StepTimes(2, 3, 0.1, 0.1), None)
    assert counters.peak_memory_bytes == 0
    assert counters.memory_kind == NO_MEMORY_KIND == "unavailable"


def test_zero_known_bytes_are_still_known() -> None:
    counters = run_counters(full_depth_counts(), REQUESTS, StepTimes(2, 3, 0.1, 0.1), 0)
    assert (counters.peak_memory_bytes, counters.memory_kind) == (0, MEMORY_KIND_CPU)


WORKLOAD = Workload("w", [Request("a", 5), Request("b", 4)])


def measure_none(requests: list[RequestResult], steps: StepTimes):
    counters = run_counters(SpecDecodingCounts(), requests, steps, 2048)
    run = RunContext(EngineConfig("none"), RunShape(WORKLOAD, 2, 0.0, 0), "vllm", "cpu")
    return counters, measurement_of_run(run, requests, counters, wall_time_s=2.0)


def test_method_none_without_decode_steps() -> None:
    counters, measurement = measure_none([RequestResult([1], 0.0, [0.5], 0.5), RequestResult([2], 0.0, [0.5], 0.5)],
                                         StepTimes(0, 0, 0.0, 0.5))
    assert counters.acceptance_length == 1.0
    assert counters.sequence_steps == 0
    assert (counters.drafted_tokens, counters.accepted_tokens) == (0, 0)
    assert counters.acceptance_alpha is None
    assert counters.acceptance_by_position == [] and counters.drafted_by_position == []
    assert measurement.acceptance_rate is None
    # Two requests at concurrency 2: too short for a steady window, so the whole run (2 tokens in 0.5 s).
    assert (measurement.engine, measurement.output_tokens, measurement.tokens_per_s) == ("vllm", 2, 4.0)
    assert measurement.steady is False


def test_method_none_decodes_one_token_per_step() -> None:
    counters, measurement = measure_none(
        [RequestResult([1, 2, 3, 4, 5], 0.0, [0.5, 0.75, 1.0, 1.25, 1.5], 1.5),
         RequestResult([1, 2, 3, 4], 0.0, [0.5, 0.75, 1.0, 1.25], 1.25)],
        StepTimes(4, 7, 1.0, 0.5),
    )
    assert counters.acceptance_length == 1.0
    assert counters.sequence_steps == 7
    assert measurement.acceptance_rate is None
    assert measurement.tpot_ms_p50 == pytest.approx(250.0)
    assert (measurement.verify_time_s, measurement.prefill_time_s, measurement.propose_time_s) == (1.0, 0.5, 0.0)


def test_a_speculative_measurement_has_the_counted_acceptance_rate() -> None:
    counters = run_counters(full_depth_counts(), REQUESTS, StepTimes(2, 3, 0.25, 0.125), 1)
    workload = Workload("w", [Request("a", 5), Request("b", 3), Request("c", 1)])
    run = RunContext(EngineConfig("ngram", 3), RunShape(workload, 3, 0.0, 0), "vllm", "cpu")
    measurement = measurement_of_run(run, REQUESTS, counters, wall_time_s=1.0)
    assert measurement.acceptance_rate == 0.5  # 6 accepted of 12 drafted
    assert measurement.acceptance_length == 2.0
    assert measurement.acceptance_by_position == [0.75, 0.5, 0.25]
    assert measurement.request_tokens == [5, 3, 1]
