"""Replaying a workload's steady-state stream through continuous batching with expected step costs.

The textbook speedup Omega / (depth * c + 1) assumes every step is full and verifying depth + 1
tokens costs one step; on our CPU that misses by up to a third (docs/benchmarks.md). So the model
replays the run the way the engines run it: the workload's stream at concurrency C
(:mod:`autotune.analysis.steady`: the requests cycled to at least 4 x C), C slots, each free slot
filled the moment a request finishes by a batched prefill (which yields each request's first
token), then steps in which every active row gains Omega tokens on average, until its output length
is reached. A step with ``b`` active rows costs ``step_s(b)``, and a row cannot gain more than it
still needs (the last step is cut). The figures are the steady window's, computed by the same
functions as a measurement's (:func:`autotune.analysis.steady.window_figures`); inside a request,
tokens after the first arrive at an even rate.

Output lengths are the requests' generated token counts, the same for every lossless configuration
(taken from a measured run; the requests' ``max_tokens`` before any run).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autotune.analysis.steady import WindowFigures, stream_indices, window_figures


@dataclass(frozen=True)
class SimulatedRequest:
    """One replayed request of the stream (seconds from the start of the run)."""

    send_s: float
    first_token_s: float
    finish_s: float
    n_tokens: int

    def tokens_between(self, start_s: float, end_s: float) -> float:
        """The first token at ``first_token_s``, the others at an even rate up to ``finish_s``."""
        count = 1.0 if start_s < self.first_token_s <= end_s else 0.0
        rest = self.n_tokens - 1
        if rest > 0:
            span = self.finish_s - self.first_token_s
            if span > 0:
                overlap = min(end_s, self.finish_s) - max(start_s, self.first_token_s)
                count += rest * max(0.0, overlap) / span
            elif start_s < self.finish_s <= end_s:
                count += rest
        return count


@dataclass(frozen=True)
class SimulatedRun:
    """One replayed stream and its window figures."""

    requests: list[SimulatedRequest]
    figures: WindowFigures

    @property
    def tokens_per_s(self) -> float:
        return self.figures.tokens_per_s


def simulate(
    prompts: Sequence[int],
    lengths: Sequence[int],
    concurrency: int,
    omega: float,
    step_s: Callable[[int], float],
    prefill_s: Callable[[int], float],
) -> SimulatedRun:
    """Replay the stream of the workload's requests (``prompts``: prompt tokens, ``lengths``: output
    tokens, one per workload request) at ``concurrency`` with ``omega`` tokens per sequence-step;
    ``step_s(active_rows)`` and ``prefill_s(padded_tokens)`` give the costs (see the module doc)."""
    if omega < 1:
        raise ValueError(f"omega is at least 1 (the bonus token), got {omega}")
    order = stream_indices(len(prompts), concurrency)
    pending = deque(range(len(order)))
    finishing: list[tuple[int, int]] = []  # heap of (the step count at which it finishes, stream position)
    send = [0.0] * len(order)
    first = [0.0] * len(order)
    finish = [0.0] * len(order)
    now, steps = 0.0, 0
    while pending or finishing:
        free = concurrency - len(finishing)
        if pending and free > 0:
            admitted = [pending.popleft() for _ in range(min(free, len(pending)))]
            for i in admitted:
                send[i] = now
            now += prefill_s(len(admitted) * max(prompts[order[i]] for i in admitted))
            for i in admitted:
                first[i] = now
                rest = lengths[order[i]] - 1
                if rest > 0:
                    heapq.heappush(finishing, (steps + math.ceil(rest / omega - 1e-9), i))
                else:
                    finish[i] = now
        if finishing:
            # Every active row gains omega per step, so nothing changes until the next row finishes:
            # that many steps at the current number of rows, then the rows that finish there leave.
            until = finishing[0][0]
            now += (until - steps) * step_s(len(finishing))
            steps = until
            while finishing and finishing[0][0] == steps:
                finish[heapq.heappop(finishing)[1]] = now
    requests = [SimulatedRequest(send[i], first[i], finish[i], lengths[order[i]]) for i in range(len(order))]
    return SimulatedRun(requests, window_figures(requests, concurrency))
