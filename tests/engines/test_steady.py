"""The steady-state harness: streams, the window, its figures, and the embedded engine run through it."""

from __future__ import annotations

import math
import statistics

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.protocol import measure_pass
from autotune.analysis.steady import (
    STREAM_FACTOR,
    RequestResult,
    request_stream,
    steady_window,
    stream_indices,
    stream_length,
    tpot_ms,
    ttft_ms,
    window_figures,
)
from autotune.workload import Workload, builtin_workload, first_cycle


def test_streams_cycle_the_workload_in_whole_cycles_to_a_few_requests_per_slot():
    assert stream_length(16, 1) == 16  # the workload once when it is long enough
    assert stream_length(16, 8) == 32  # 4 x 8 in whole cycles of 16
    assert stream_length(16, 6) == 32  # 24 rounded up to whole cycles: every prompt equally often
    assert stream_length(3, 2) == 9
    assert stream_indices(3, 2) == [0, 1, 2] * 3
    workload = builtin_workload()
    stream = request_stream(workload, 8)
    assert stream.label == workload.label
    assert stream.requests == workload.requests * 2
    assert first_cycle(list(range(32)), 16) == list(range(16))
    assert first_cycle(list(range(30)), 16) is None  # not whole cycles: not a stream of this workload


def test_stream_length_refuses_nonsense():
    with pytest.raises(ValueError):
        stream_length(0, 1)
    with pytest.raises(ValueError):
        stream_length(4, 0)


def request(send, times, finish=None):
    return RequestResult(list(range(len(times))), send, list(times), times[-1] if finish is None else finish)


def test_the_window_runs_from_the_first_finish_to_the_first_moment_fewer_than_c_remain():
    # C = 2, five requests: a and b start at 0; c is sent when a finishes, d when b finishes, e when c does.
    results = [
        request(0.0, [1.0, 2.0, 3.0]),          # a
        request(0.0, [1.5, 2.5, 4.0]),          # b
        request(3.0, [3.5, 5.0, 6.0]),          # c
        request(4.0, [4.5, 7.0, 8.0]),          # d
        request(6.0, [6.5, 8.5, 9.0]),          # e
    ]
    window = steady_window(results, 2)
    assert window.steady
    assert window.start_s == 3.0  # a finishes and c is sent: the ramp-up is over
    assert window.end_s == 8.0  # the 4th finish (N - C + 1): only e is left after it
    assert window.occupancy == pytest.approx(1.0)
    assert window.requests == 3  # b, c, d finished inside (3, 8]
    figures = window_figures(results, 2)
    inside_tokens = sum(1 for r in results for t in r.token_times_s if 3.0 < t <= 8.0)
    assert figures.output_tokens == inside_tokens
    assert figures.tokens_per_s == pytest.approx(inside_tokens / 5.0)
    # Latencies over the requests sent and finished inside the window: c and d.
    assert figures.ttft_ms[0] == pytest.approx(statistics.median([ttft_ms(results[2]), ttft_ms(results[3])]))
    assert figures.tpot_ms[0] == pytest.approx(statistics.median([tpot_ms(results[2]), tpot_ms(results[3])]))


def _waves(n_waves: int) -> list[RequestResult]:
    """C = 2 requests decoding in lockstep waves of 4 s: a prefill of 2 s yields each request's first
    token, then two speculative steps of 1 s yield two tokens each; the next wave is sent at the
    finish. 10 tokens per 4 s: 2.5 tokens/s however many waves."""
    return [request(4.0 * w, [4.0 * w + t for t in (2, 3, 3, 4, 4)]) for w in range(n_waves) for _ in range(2)]


def test_a_stream_of_waves_reads_the_same_rate_whatever_its_length():
    # A window opened at the first C requests' first tokens would count their decode without their
    # prefill: 3.0 tokens/s for 2 waves, 2.6 for 8. Opened at the first finish, it holds whole waves.
    for n_waves in (2, 3, 8):
        assert window_figures(_waves(n_waves), 2).tokens_per_s == pytest.approx(2.5)


def test_a_slot_left_empty_inside_the_window_shows_as_occupancy_below_one():
    # C = 2; c is sent 1 s after a finished: one of two slots idle for 1 s of the window.
    results = [
        request(0.0, [1.0, 3.0]),
        request(0.0, [1.0, 5.0]),
        request(4.0, [4.5, 7.0]),
        request(5.0, [5.5, 9.0]),
        request(7.0, [7.5, 10.0]),
    ]
    window = steady_window(results, 2)
    assert (window.start_s, window.end_s) == (3.0, 9.0)
    assert window.occupancy == pytest.approx((12 - 1) / 12)


def test_a_run_too_short_for_a_window_is_measured_whole_and_says_so():
    results = [request(0.0, [1.0, 2.0]), request(0.0, [1.0, 3.0])]
    window = steady_window(results, 2)
    assert not window.steady
    assert (window.start_s, window.end_s) == (0.0, 3.0)
    assert window_figures(results, 2).tokens_per_s == pytest.approx(4 / 3)


def test_latency_definitions_follow_vllm_bench_serve():
    one = request(1.0, [1.25, 1.5, 2.25])
    assert ttft_ms(one) == pytest.approx(250.0)
    assert tpot_ms(one) == pytest.approx(500.0)  # (2.25 - 1.25) / (3 - 1)
    assert tpot_ms(request(0.0, [0.5])) is None
    assert ttft_ms(RequestResult([], 0.0, [], 0.75)) == pytest.approx(750.0)  # no token: first token at its finish


@pytest.fixture(scope="module")
def engine():
    engine = EmbeddedEngine()
    engine.load(EngineConfig("draft", 3))
    return engine


def test_the_embedded_engine_keeps_c_requests_in_flight_over_the_window(engine):
    concurrency = 4
    one = measure_pass(engine, builtin_workload(), concurrency).measurement
    assert one.n_requests == stream_length(16, concurrency)
    assert one.steady
    assert one.occupancy >= 0.95
    assert 0 < one.window_start_s < one.window_start_s + one.window_s <= one.wall_time_s
    assert one.window_requests >= one.n_requests - 2 * concurrency
    # Each request's latencies are stored for the whole run; the figures are the window's.
    assert len(one.request_ttft_ms) == one.n_requests


@pytest.mark.slow
def test_a_figure_at_c_does_not_depend_on_the_workload_length_once_it_is_a_few_times_c(engine):
    """Workloads of 4, 8 and 16 requests per slot, measured in alternating rounds: the steady window's
    tokens/s agree within the run-to-run noise, while the ramp-up and drain the old whole-run figure
    included are a larger share of the shortest stream's run than of the longest's."""
    concurrency = 4
    base = builtin_workload().with_max_tokens(32)  # short requests: the same shape of run, a sixth of the tokens
    workloads = [Workload(base.name, base.requests * times, base.version) for times in (1, 2, 4)]  # 16, 32, 64
    assert [stream_length(len(w.requests), concurrency) for w in workloads] == [16, 32, 64]
    assert STREAM_FACTOR * concurrency == 16
    rounds = {len(w.requests): [] for w in workloads}
    outside = {len(w.requests): [] for w in workloads}
    for round_index in range(3):
        for workload in workloads if round_index % 2 == 0 else workloads[::-1]:
            measured = measure_pass(engine, workload, concurrency).measurement
            rounds[len(workload.requests)].append(measured.tokens_per_s)
            outside[len(workload.requests)].append(1.0 - measured.window_s / measured.wall_time_s)
    short, long_ = statistics.median(rounds[16]), statistics.median(rounds[64])
    middle = statistics.median(rounds[32])
    spread = max(_relative_spread(values) for values in rounds.values())
    tolerance = max(0.08, 2 * spread)  # run-to-run noise of this machine, at least 8 %
    assert abs(math.log(short / long_)) <= tolerance, (rounds, spread)
    assert abs(math.log(middle / long_)) <= tolerance, (rounds, spread)
    # Ramp-up and drain last about one request each whatever the stream's length, so they are a larger
    # share of a short stream's run. The share is compared rather than whole-run tokens/s, whose
    # run-to-run noise on a shared machine is larger than the drain's effect.
    assert statistics.median(outside[16]) > 1.5 * statistics.median(outside[64]), outside


def _relative_spread(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0
