"""Plausibility: figures that their own counters make impossible are measurement faults.

* Speedup bound. A speculative pass produces ``acceptance_length`` tokens per sequence per target
  pass where the baseline produces one, and a verification pass over depth + 1 tokens never costs
  less than one baseline step (memory-bound it costs about the same, compute-bound more; drafting
  only adds). So speedup <= acceptance_length (<= depth + 1). A measured ratio above
  ``acceptance_length * (1 + SPEEDUP_SLACK)`` did not come from the configuration but from the
  machine (a baseline pass slowed by other work, as in the 39.79x-at-depth-3 study of issue 10).
* Baseline neighbours. Without speculation, more concurrent sequences never lower throughput by
  much: a baseline at concurrency B slower than ``1 - BASELINE_SLACK`` times the fastest baseline
  at a smaller concurrency is suspect.

The slacks leave room for ordinary noise: a single pair of passes varies by ~10 % on our machines.
"""

from __future__ import annotations

from collections.abc import Mapping

SPEEDUP_SLACK = 0.2
BASELINE_SLACK = 0.2


def speedup_bound(acceptance_length: float | None, depth: int) -> float:
    """The largest speedup a configuration's counters allow (depth + 1 when nothing was counted)."""
    tokens_per_pass = acceptance_length if acceptance_length is not None else depth + 1
    return max(1.0, tokens_per_pass) * (1 + SPEEDUP_SLACK)


def implausible_speedup(speedup: float, acceptance_length: float | None, depth: int) -> str | None:
    """Why ``speedup`` cannot be a measurement of this configuration, or None when it can."""
    bound = speedup_bound(acceptance_length, depth)
    if speedup <= bound:
        return None
    counted = f"{acceptance_length:.2f} tokens per target pass" if acceptance_length is not None else f"depth {depth}"
    return (f"speedup {speedup:.2f}x is above the {bound:.2f}x that {counted} allows: "
            "a pass was disturbed, so the round is measured again")


def implausible_baselines(tokens_per_s: Mapping[int, float]) -> dict[int, str]:
    """Concurrency levels whose baseline throughput is implausibly below a smaller concurrency's, with why."""
    suspects: dict[int, str] = {}
    fastest_below: tuple[int, float] | None = None
    for concurrency in sorted(tokens_per_s):
        value = tokens_per_s[concurrency]
        if fastest_below is not None and value < (1 - BASELINE_SLACK) * fastest_below[1]:
            suspects[concurrency] = (
                f"the baseline at concurrency {concurrency} ({value:.1f} tokens/s) is slower than at concurrency "
                f"{fastest_below[0]} ({fastest_below[1]:.1f} tokens/s): a disturbed measurement"
            )
        if fastest_below is None or value > fastest_below[1]:
            fastest_below = (concurrency, value)
    return suspects
