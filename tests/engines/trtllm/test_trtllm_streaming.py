"""Issue 38, item 3: TensorRT-LLM measured the way it is served, checked against the strict stand-in
(test_trtllm_standin_streaming.py shows it streams and schedules as TensorRT-LLM does) and its own
account of every request (``LLM.engine.traces``). The runner must keep C requests in flight over the
steady-state stream and time each token by the chunk that brought it: its window figures must be the
stand-in's own."""

from __future__ import annotations

import asyncio
import time
from functools import partial
from itertools import accumulate

import pytest

from autotune.analysis.steady import RequestResult, request_stream, window_figures
from autotune.engines.base import EngineConfig
from autotune.engines.trtllm.streaming import keep_in_flight
from autotune.errors import EngineError, UnsupportedConfigError
from autotune.workload import Request, Workload

# Five prompts of different lengths: requests end at different times, as a server's do.
WORKLOAD = Workload("w", [Request("def parse(argv):", 6), Request("class Cache:", 9), Request("import os", 12),
                          Request("for item in items:", 7), Request("return None", 10)])


def test_a_request_the_llm_refuses_fails_the_run_as_unsupported(make_runner, target_dir) -> None:
    runner = make_runner(target_dir)
    runner.load(EngineConfig("none"))
    too_long = Workload("w", [Request("import os", 4), Request("x" * 9000, 4), Request("import sys", 4)])
    with pytest.raises(UnsupportedConfigError, match="TensorRT-LLM refused a request: The sum of prompt length"):
        runner.measure(too_long, 2)
    # The refused run's other requests were left running in that LLM: the next run builds a fresh one.
    assert runner.measure(WORKLOAD, 2).n_requests == len(WORKLOAD.requests) and runner.loads == 2


def engine_side(traces) -> list[RequestResult]:
    """The stand-in's own account of a run as the harness reads requests (tokens are only counted)."""
    return [RequestResult([0] * len(t.token_times_s), t.submitted_s, t.token_times_s, t.finished_s) for t in traces]


def peak_in_flight(traces) -> int:
    """The most requests submitted and not yet finished at once, as the engine saw them."""
    events = sorted([(t.submitted_s, 1) for t in traces] + [(t.finished_s, -1) for t in traces])
    return max(accumulate(delta for _, delta in events))


@pytest.mark.parametrize(("config", "concurrency"), [(EngineConfig("none"), 1), (EngineConfig("none"), 4),
                                                     (EngineConfig("ngram", 3), 3)])
def test_the_runner_keeps_c_in_flight_and_its_window_is_the_stand_ins(config, concurrency, make_runner, target_dir,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("FAKE_TRTLLM_ITERATION_MS", "4")  # iterations long against the event loop's own delays
    runner = make_runner(target_dir)
    runner.load(config)
    stream = request_stream(WORKLOAD, concurrency)
    m = runner.measure(stream, concurrency)
    traces = runner._llm.engine.traces[-len(stream.requests):]  # noqa: SLF001 - after the warm-up request
    own = window_figures(engine_side(traces), concurrency)

    assert peak_in_flight(traces) == concurrency  # never more sent than C, as the engine saw it
    assert m.steady and own.window.steady
    assert 0.95 <= m.occupancy <= 1.0 + 1e-9 and own.window.occupancy >= 0.95
    assert m.n_requests == len(stream.requests) and m.output_tokens == sum(len(t.token_times_s) for t in traces)
    length = own.window.length_s
    assert m.window_s == pytest.approx(length, abs=2e-3)
    # One iteration's tokens / one request at either edge of the window may fall on the other side of it.
    assert abs(m.tokens_per_s - own.tokens_per_s) <= 0.02 * own.tokens_per_s + concurrency * (config.depth + 1) / length
    assert abs(m.requests_per_s - own.requests_per_s) <= 0.02 * own.requests_per_s + 1 / length
    assert m.ttft_ms_p50 == pytest.approx(own.ttft_ms[0], rel=0.1, abs=1.0)
    assert m.tpot_ms_p50 == pytest.approx(own.tpot_ms[0], rel=0.1, abs=1.0)


def test_a_stream_that_does_not_add_up_is_refused_not_timed(make_runner, target_dir, monkeypatch) -> None:
    runner = make_runner(target_dir, max_batch_size=2)
    runner.load(EngineConfig("none"))  # builds the LLM: the stand-in is imported now
    import tensorrt_llm.executor.result as result

    # A release whose token_ids_diff were the whole output so far: reading it as new would count tokens twice.
    monkeypatch.setattr(result.CompletionOutput, "token_ids_diff", property(lambda output: list(output.token_ids)))
    with pytest.raises(EngineError, match="streams otherwise than autotune reads it"):
        runner.measure(WORKLOAD, 2)


def test_keep_in_flight_runs_at_most_c_in_order_and_the_next_as_one_ends() -> None:
    started: list[int] = []
    running = peak = 0

    async def send(index: int, seconds: float) -> int:
        nonlocal running, peak
        started.append(index)
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(seconds)
        running -= 1
        return index

    durations = [0.03, 0.01, 0.02, 0.01, 0.0, 0.02]
    results = asyncio.run(keep_in_flight([partial(send, i, s) for i, s in enumerate(durations)], 2))
    assert results == list(range(len(durations))) and started == list(range(len(durations))) and peak == 2
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        asyncio.run(keep_in_flight([partial(send, 0, 0.0)], 0))


def test_keep_in_flight_cancels_the_rest_when_one_fails() -> None:
    async def slow() -> None:
        await asyncio.sleep(30)

    async def fails() -> None:
        raise RuntimeError("refused")

    began = time.monotonic()
    with pytest.raises(RuntimeError, match="refused"):
        asyncio.run(keep_in_flight([slow, fails, slow], 3))
    assert time.monotonic() - began < 5  # asyncio.run would have waited for the slow ones otherwise
