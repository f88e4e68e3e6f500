"""Does a configuration's screening pass measure what its confirmation measures?

Issue 38: in two default studies every confirmed configuration ran below its own screening pass (by
6-9 %, some by 19-25 %), and predictions fitted to the passes came out optimistic for 7-9 of 10
confirmed points. With the steady-state harness both phases measure through one definition
(:mod:`autotune.analysis.steady`); what is left to tell apart is *how* each phase runs a pass:

* a screening pass, as the tuner runs it: a worker process started for the configuration (the
  embedded engine gets a fresh one per configuration), the models loaded, one pass;
* a confirmation round, as the confirmation runs it: one worker for the concurrency, the
  configurations warmed up and then measured in alternating rounds.

For each configuration and concurrency this measures ``--repeats`` screening passes (each in its
own fresh worker, configurations interleaved so a drifting machine hits them alike) and one
confirmation run of ``--repeats`` rounds, and prints confirmation / screening - 1 per point with a
95 % interval (Welch's t on the log figures), and pooled over the points. No selection happens here,
so the winner's curse of a study (finalists are the ones whose pass was lucky) is absent: what this
prints is the difference between the two ways of running a pass alone.

    python bench/bench_screen_vs_confirm.py                      # draft@5, mtp@2, ngram@4, none at 1, 4
    python bench/bench_screen_vs_confirm.py --concurrency 2,8 --repeats 6
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

from autotune.analysis.intervals import mean_interval, t_quantile
from autotune.engines.base import EngineConfig
from autotune.engines.protocol import ProtocolOptions
from autotune.engines.registry import engine_spec
from autotune.engines.worker import EngineWorker
from autotune.workload import builtin_workload

CONFIGS = (EngineConfig("draft", 5), EngineConfig("mtp", 2), EngineConfig("ngram", 4))


def screening_passes(configs: list[EngineConfig], concurrency: int, repeats: int) -> dict[EngineConfig, list[float]]:
    """``repeats`` passes per configuration, each in a fresh worker (as a study's screening runs)."""
    workload = builtin_workload()
    passes: dict[EngineConfig, list[float]] = {config: [] for config in configs}
    for repeat in range(repeats):
        for config in configs if repeat % 2 == 0 else configs[::-1]:
            with EngineWorker(engine_spec("embedded", device="cpu"), timeout_s=600) as worker:
                passes[config].append(worker.measure(config, workload, concurrency).tokens_per_s)
    return passes


def confirmation_rounds(configs: list[EngineConfig], concurrency: int, repeats: int) -> dict[EngineConfig, list[float]]:
    """One confirmation run of exactly ``repeats`` kept rounds (as a study's confirmation runs)."""
    options = ProtocolOptions(min_repetitions=repeats, max_repetitions=repeats, max_seconds=1e9, precision=1e-6)
    speculative = [c for c in configs if c.method != "none"]
    with EngineWorker(engine_spec("embedded", device="cpu"), timeout_s=3600) as worker:
        result = worker.measure_repeatedly(speculative, builtin_workload(), concurrency, options=options)
    return {m.config: list(m.samples) for m in result.measurements}


def log_difference(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """mean(log a) - mean(log b) with a 95 % Welch interval: (value, low, high)."""
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    diff = statistics.fmean(la) - statistics.fmean(lb)
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    se = math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1)) if va + vb > 0 else 1e9
    t = t_quantile(max(1, math.floor(dof)))
    return diff, diff - t * se, diff + t * se


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,4", help="comma-separated concurrency levels (default 1,4)")
    parser.add_argument("--repeats", type=int, default=5, help="screening passes and confirmation rounds per point")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    configs = [EngineConfig("none"), *CONFIGS]
    started, load = time.monotonic(), os.getloadavg()[0]
    print(f"{'point':<14} {'screening tok/s':>22} {'confirmation tok/s':>22} {'confirm/screen - 1':>26}")
    differences = []
    for concurrency in levels:
        screened = screening_passes(configs, concurrency, args.repeats)
        confirmed = confirmation_rounds(configs, concurrency, args.repeats)
        for config in configs:
            s, c = screened[config], confirmed[config]
            diff, low, high = log_difference(c, s)
            differences.append(diff)
            print(f"{config.label() + f' c{concurrency}':<14} {_figure(s):>22} {_figure(c):>22} "
                  f"{math.expm1(diff):+7.1%} [{math.expm1(low):+.1%}, {math.expm1(high):+.1%}]")
    pooled = mean_interval(differences)
    print(f"pooled over {len(differences)} points: {math.expm1(pooled.value):+.1%} "
          f"[{math.expm1(pooled.low):+.1%}, {math.expm1(pooled.high):+.1%}] (mean of the log differences, t interval)")
    print(f"{time.monotonic() - started:.0f} s; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")


def _figure(values: list[float]) -> str:
    estimate = mean_interval(values)
    return f"{estimate.value:.0f} ±{(estimate.high - estimate.value) / estimate.value:.0%} (n={len(values)})"


if __name__ == "__main__":
    main()
