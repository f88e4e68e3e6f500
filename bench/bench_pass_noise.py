"""One screening pass's noise: within a worker process, between processes, and against the timing spread.

Issue 40, item 2 asks why a workload opens more points. The guide's pass noise (sigma_pass) is the
cost profile's spread: timing rounds of a few steps, all in one worker (docs/statistics.md,
section 3). A screening pass runs a whole stream, and the embedded engine starts a fresh worker
per configuration. This measures both parts for one configuration: ``--pairs`` pairs of worker
processes, both alive at once, each pair running ``--passes`` passes alternately (A B A B ...), so a
machine whose speed drifts over time hits A and B alike. Within a process: the pooled standard
deviation of log tokens/s over its passes. Between processes: from the pairs' mean log ratios,
E[(log A/B)^2] = 2 sigma_between^2 + 2 sigma_within^2 / passes. Then it times the step costs once
(as a study does) and prints their spread next to it.

    python bench/bench_pass_noise.py                                      # ngram@2 c8 on prose, 4 pairs
    python bench/bench_pass_noise.py --method draft --depth 4 --concurrency 1 --workload code --pairs 6

Figures, not pass/fail: the exit code is 0.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

from autotune.engines.base import EngineConfig
from autotune.engines.registry import engine_spec
from autotune.engines.worker import EngineWorker
from autotune.perfmodel.cost import CostPoint, CostProfile
from autotune.search.modeling import TIMING_ROUNDS, TIMING_STEPS
from autotune.workload import Workload, load_workload

SPEC = engine_spec("embedded", device="cpu")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="prose", help="a shipped workload (code, prose, chat) or a JSONL file")
    parser.add_argument("--method", default="ngram")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=4, help="pairs of worker processes")
    parser.add_argument("--passes", type=int, default=3, help="passes per process")
    return parser.parse_args()


def pair_passes(config: EngineConfig, workload: Workload, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """Two workers alive at once, ``args.passes`` passes each, alternating."""
    with EngineWorker(SPEC, timeout_s=600) as a, EngineWorker(SPEC, timeout_s=600) as b:
        first, second = [], []
        for _ in range(args.passes):
            first.append(a.measure(config, workload, args.concurrency).tokens_per_s)
            second.append(b.measure(config, workload, args.concurrency).tokens_per_s)
    return first, second


def timing_spread(config: EngineConfig, workload: Workload, concurrency: int) -> float:
    """The cost profile's spread for this configuration and the baseline, timed as a study times them."""
    with EngineWorker(SPEC, timeout_s=600) as worker:
        points = worker.time_steps([EngineConfig("none"), config], workload, [1, concurrency],
                                   steps=TIMING_STEPS, rounds=TIMING_ROUNDS)
    return CostProfile([CostPoint.from_dict(p) for p in points], "timed").spread


def main() -> None:
    args = parse_args()
    config, workload = EngineConfig(args.method, args.depth), load_workload(args.workload)
    started, load = time.monotonic(), os.getloadavg()[0]
    ratios, variances = [], []
    for pair in range(args.pairs):
        first, second = pair_passes(config, workload, args)
        logs_a, logs_b = [math.log(x) for x in first], [math.log(x) for x in second]
        ratios.append(statistics.fmean(logs_a) - statistics.fmean(logs_b))
        variances += [statistics.variance(logs_a), statistics.variance(logs_b)]
        print(f"pair {pair + 1} at {time.monotonic() - started:4.0f} s: A " + " ".join(f"{x:7.1f}" for x in first)
              + "   B " + " ".join(f"{x:7.1f}" for x in second) + f"   A/B {math.exp(ratios[-1]):.3f}", flush=True)
    within = statistics.fmean(variances)
    squared = statistics.fmean([r * r for r in ratios])
    between = max(0.0, (squared - 2 * within / args.passes) / 2)
    spread = timing_spread(config, workload, args.concurrency)
    print(f"{config.label()} c{args.concurrency} on {args.workload}, {args.pairs} pairs x {args.passes} passes, "
          f"{time.monotonic() - started:.0f} s, load average {load:.1f}/{os.getloadavg()[0]:.1f}")
    print(f"  pass noise within a process: sd {math.sqrt(within):.3f} (log, {2 * args.pairs * (args.passes - 1)} df)")
    print(f"  between processes:           sd {math.sqrt(between):.3f} (rms log A/B {math.sqrt(squared):.3f})")
    print(f"  the cost profile's spread:   {spread:.3f} (the guide's sigma_pass)")


if __name__ == "__main__":
    main()
