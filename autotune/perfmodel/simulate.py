"""Replaying a workload through continuous batching with expected step costs.

The textbook speedup Omega / (depth * c + 1) assumes every step is full and verifying depth + 1
tokens costs one step; on our CPU that misses by up to a third (docs/benchmarks.md). So the model
replays the workload the way the engines run it (:mod:`autotune.engines.embedded.decoding`):
``batch_size`` slots, free slots filled by one batched prefill (which yields each request's first
token), then steps in which every active row gains Omega tokens on average, until its output
length is reached. A step with ``b`` active rows costs ``step_s(b)``: the tail of a workload, where
fewer than ``batch_size`` rows are left, runs at the smaller batch's cost, and a row cannot gain
more than it still needs (the last step is cut).

Output lengths are the requests' generated token counts, the same for every lossless configuration
(taken from a measured run; the requests' ``max_tokens`` before any run).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SimulatedRun:
    """Times (seconds from the start) of one replayed workload."""

    wall_s: float
    output_tokens: int
    first_token_s: list[float]
    finish_s: list[float]
    lengths: list[int]

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else math.inf

    def tpot_ms(self) -> list[float]:
        """Per request (finish - first token) / (tokens - 1), requests with one token left out."""
        return [(f - t) * 1e3 / (n - 1) for t, f, n in zip(self.first_token_s, self.finish_s, self.lengths) if n > 1]

    def ttft_ms(self) -> list[float]:
        return [t * 1e3 for t in self.first_token_s]


def simulate(
    prompts: Sequence[int],
    lengths: Sequence[int],
    batch_size: int,
    omega: float,
    step_s: Callable[[int], float],
    prefill_s: Callable[[int], float],
) -> SimulatedRun:
    """Replay requests (``prompts``: prompt tokens, ``lengths``: output tokens) at ``batch_size``
    with ``omega`` tokens per sequence-step; ``step_s(active_rows)`` and ``prefill_s(padded_tokens)``
    give the costs (see the module doc)."""
    if omega < 1:
        raise ValueError(f"omega is at least 1 (the bonus token), got {omega}")
    pending = deque(range(len(prompts)))
    remaining: dict[int, float] = {}  # request -> tokens still to generate
    first = [0.0] * len(prompts)
    finish = [0.0] * len(prompts)
    now = 0.0
    while pending or remaining:
        free = batch_size - len(remaining)
        if pending and free > 0:
            admitted = [pending.popleft() for _ in range(min(free, len(pending)))]
            now += prefill_s(len(admitted) * max(prompts[i] for i in admitted))
            for i in admitted:
                first[i] = now
                if lengths[i] > 1:
                    remaining[i] = lengths[i] - 1
                else:
                    finish[i] = now
        if remaining:
            now += step_s(len(remaining))
            for i in list(remaining):
                remaining[i] -= omega
                if remaining[i] <= 1e-9:
                    finish[i] = now
                    del remaining[i]
    return SimulatedRun(now, sum(lengths), first, finish, list(lengths))
