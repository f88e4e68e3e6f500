"""The steady-state harness: the one definition of what a run at concurrency C measures, for every
engine (embedded, vLLM, TensorRT-LLM) and for the performance model's replay.

A server under load keeps C requests in flight. A study that decodes a workload's few prompts at
"batch size" C measures something else: its requests end at different lengths, the batch drains,
and the figure mixes C rows with C - 1, C - 2, ... 1 (8 prompts at C = 8 averaged 69 % occupancy,
and studies read 27-155 % below what the same engine served: docs/benchmarks.md). So a run is built
to reach a steady state, and only the steady state is measured:

1. **The stream** (:func:`request_stream`): the workload's requests cycled, in order and in whole
   cycles (every prompt equally often), until the stream holds at least ``STREAM_FACTOR`` x C
   requests. Each copy is a request of its own: engines seed sampling per stream position, so a
   copy at temperature > 0 samples afresh.
2. **The engines only run requests**: they keep exactly C requests in flight, sending the next
   request of the stream the moment one finishes (``vllm bench serve --max-concurrency C`` with an
   infinite request rate), and report per request when it was sent and when each token arrived
   (:class:`RequestResult`).
3. **The window** (:func:`steady_window`): from the end of the ramp-up (the first finish, when the
   first request of the stream beyond the first C is sent) to the first moment fewer than C requests
   remain unfinished (the (N - C + 1)-th finish of N). Inside it the engine always has C requests to
   run; what it does not run of them shows as ``occupancy`` below 1. Both ends are finishes, and
   each finish inside is followed by a send, so the window holds the prefill and the tokens of
   about the same requests. Starting at the first C requests' first tokens instead counts their
   decode without their prefill: the figure then read 12-14 % higher for a stream of 4 x C short
   requests than for 16 x C (CI, 32-token requests, 2026-12), because that free prefill is a larger
   share of a short stream.
4. **The figures** (:func:`window_figures`), with the definitions of ``vllm bench serve`` (vLLM 0.32.0,
   ``vllm/benchmarks/serve.py`` ``calculate_metrics`` and ``vllm/benchmarks/lib/endpoint_request_func.py``):
   TTFT = first token - send; TPOT = (last token - first token) / (output tokens - 1), for requests
   of more than one token; percentiles by linear interpolation (``np.percentile``'s default). Where
   ``vllm bench serve`` divides every token by the whole run, ours are the window's: output
   throughput = tokens that arrived inside the window / its length; requests/s = requests that
   finished inside it / its length; TTFT and TPOT over the requests sent and finished inside it.
   ``occupancy`` = the window's mean of (requests sent and not finished) / C.

A run too short for a window (fewer requests than C + 1, or a window of no length: a direct engine
call on a few requests) is measured over the whole run, from the first send to the last finish, and
says so (``steady`` False).

Pure, on the ground floor (it imports only the workload), so that the engines and the performance
model's replay share it without importing each other; an engine turns a run's results into its
:class:`~autotune.engines.base.Measurement` with :func:`autotune.engines.base.measurement_of_run`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from bisect import bisect_right
from dataclasses import dataclass
from typing import Protocol

from autotune.workload import Workload

# Requests per slot in a stream: with 4, the ramp-up (up to the first finish) and the drain (the last
# C requests) leave at least about half of a run inside the window, and a figure at C no longer
# depends on the workload's length (tests/engines/test_steady.py, bench/bench_steady_window.py).
STREAM_FACTOR = 4


def stream_length(n_requests: int, concurrency: int, factor: int = STREAM_FACTOR) -> int:
    """Requests in the stream of a workload of ``n_requests`` at ``concurrency``: whole cycles of the
    workload, at least ``factor`` x ``concurrency`` requests (the workload once when it is longer)."""
    if n_requests < 1 or concurrency < 1:
        raise ValueError(f"a stream needs requests and a concurrency >= 1, got {n_requests} and {concurrency}")
    cycles = max(1, math.ceil(factor * concurrency / n_requests))
    return cycles * n_requests


def stream_indices(n_requests: int, concurrency: int, factor: int = STREAM_FACTOR) -> list[int]:
    """The workload request behind each position of the stream (position i is request i mod n)."""
    return [i % n_requests for i in range(stream_length(n_requests, concurrency, factor))]


def request_stream(workload: Workload, concurrency: int, factor: int = STREAM_FACTOR) -> Workload:
    """The stream a run at ``concurrency`` decodes (module doc, 1): same name and version, the
    requests cycled."""
    requests = workload.requests
    return Workload(workload.name, tuple(requests[i] for i in stream_indices(len(requests), concurrency, factor)),
                    workload.version)


class TimedRequest(Protocol):
    """What the window and the figures read of a request: when it was sent, got its first token
    (None: none) and finished, how many tokens it produced, and how many of them arrived in a span."""

    send_s: float
    finish_s: float

    @property
    def first_token_s(self) -> float | None: ...

    @property
    def n_tokens(self) -> int: ...

    def tokens_between(self, start_s: float, end_s: float) -> int | float:
        """Tokens that arrived after ``start_s`` and up to ``end_s``."""


@dataclass(frozen=True)
class RequestResult:
    """One request of a run: its generated token ids, when it was sent and when each token arrived
    (``token_times_s``, one entry per token, non-decreasing; tokens that arrived together share a
    time), in seconds since the run started; ``finish_s``: when it finished (its last token, or the
    moment it ended without one)."""

    tokens: list[int]
    send_s: float
    token_times_s: list[float]
    finish_s: float

    @property
    def first_token_s(self) -> float | None:
        return self.token_times_s[0] if self.token_times_s else None

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def tokens_between(self, start_s: float, end_s: float) -> int:
        return bisect_right(self.token_times_s, end_s) - bisect_right(self.token_times_s, start_s)


@dataclass(frozen=True)
class Window:
    """The steady window of a run (module doc, 3): ``start_s`` to ``end_s`` (seconds since the run
    started), ``occupancy`` (mean in flight / C over it), ``requests``: requests finished inside it,
    ``steady``: False when the run was too short and the window is the whole run."""

    start_s: float
    end_s: float
    occupancy: float
    requests: int
    steady: bool = True

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    def contains(self, result: TimedRequest) -> bool:
        """Sent and finished inside the window: a request whose latencies are the window's."""
        return result.send_s >= self.start_s and result.finish_s <= self.end_s


def steady_window(results: Sequence[TimedRequest], concurrency: int) -> Window:
    """The window of a run of ``results`` (any order) at ``concurrency`` (module doc, 3)."""
    if not results:
        raise ValueError("a run without requests has no window")
    finishes = sorted(r.finish_s for r in results)
    start = end = None
    if len(results) > concurrency:
        start = finishes[0]  # the first finish: the first request beyond the first C is sent
        end = finishes[len(results) - concurrency]  # the (N - C + 1)-th finish: C - 1 requests remain after it
    steady = start is not None and end is not None and end > start
    if not steady:
        start, end = min(r.send_s for r in results), finishes[-1]
    finished = sum(1 for f in finishes if start < f <= end)
    return Window(start, end, _occupancy(results, concurrency, start, end), finished, steady)


def _occupancy(results: Sequence[TimedRequest], concurrency: int, start: float, end: float) -> float:
    """Mean over [start, end] of (requests sent and not finished) / concurrency."""
    if end <= start:
        return 1.0
    busy = sum(max(0.0, min(r.finish_s, end) - max(r.send_s, start)) for r in results)
    return busy / (concurrency * (end - start))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (``np.percentile``'s default), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_percentiles(values: Sequence[float | None]) -> tuple[float | None, float | None, float | None]:
    """p50, p90, p99 of the values that are not None."""
    present = [v for v in values if v is not None]
    return percentile(present, 50), percentile(present, 90), percentile(present, 99)


def ttft_ms(result: TimedRequest) -> float:
    """First token - send, in ms; a request that produced no token has its first token at its finish."""
    first = result.first_token_s if result.first_token_s is not None else result.finish_s
    return (first - result.send_s) * 1e3


def tpot_ms(result: TimedRequest) -> float | None:
    """(finish - first token) / (tokens - 1) in ms, a request finishing with its last token; None for a
    request of fewer than two tokens."""
    if result.n_tokens < 2 or result.first_token_s is None:
        return None
    return (result.finish_s - result.first_token_s) * 1e3 / (result.n_tokens - 1)


@dataclass(frozen=True)
class WindowFigures:
    """A run's figures over its steady window (module doc, 4)."""

    window: Window
    tokens_per_s: float
    requests_per_s: float
    ttft_ms: tuple[float | None, float | None, float | None]  # p50, p90, p99
    tpot_ms: tuple[float | None, float | None, float | None]
    output_tokens: float  # tokens that arrived inside the window


def window_figures(results: Sequence[TimedRequest], concurrency: int) -> WindowFigures:
    """Throughput and latency percentiles of ``results`` over their steady window."""
    window = steady_window(results, concurrency)
    length = window.length_s
    tokens = sum(r.tokens_between(window.start_s, window.end_s) for r in results)
    inside = [r for r in results if window.contains(r)] or list(results)
    return WindowFigures(
        window=window,
        tokens_per_s=tokens / length if length > 0 else math.inf,
        requests_per_s=window.requests / length if length > 0 else math.inf,
        ttft_ms=latency_percentiles([ttft_ms(r) for r in inside]),
        tpot_ms=latency_percentiles([tpot_ms(r) for r in inside]),
        output_tokens=tokens,
    )
