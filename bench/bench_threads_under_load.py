"""The embedded engine's passes on an idle machine and under busy loops, on every core's thread
against the cores the load leaves (issue 40, item 4: why a study under two busy loops was chaotic).

For each condition (idle, then ``--loops`` busy-loop processes in sessions of their own) and each
thread count (torch's default, then one per core the load leaves), every configuration is measured
``--passes`` times at each concurrency, the conditions' passes in the same process one after the
other; it prints each pass and the median with its spread (max/min)::

    python bench/bench_threads_under_load.py                 # prose, draft@4 and none, c1 and c4
    python bench/bench_threads_under_load.py --passes 5 --concurrency 1,2,8

Figures, not pass/fail: the exit code is 0 either way.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import torch

from autotune.engines import noise
from autotune.engines.base import EngineConfig
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.protocol import measure_pass
from autotune.workload import load_workload

CONFIGS = (EngineConfig("draft", 4), EngineConfig("none"))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="prose")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--loops", type=int, default=2)
    parser.add_argument("--concurrency", default="1,4", type=lambda text: [int(c) for c in text.split(",")])
    return parser.parse_args()


def measure(engine: EmbeddedEngine, condition: str, threads: int, args: argparse.Namespace) -> None:
    torch.set_num_threads(threads)
    workload = load_workload(args.workload)
    for config in CONFIGS:
        engine.load(config)
        for concurrency in args.concurrency:
            passes = [measure_pass(engine, workload, concurrency, seed=seed) for seed in range(args.passes)]
            rates = [one.measurement.tokens_per_s for one in passes]
            others = [one.load.other_cpu_cores or 0.0 for one in passes]
            label = f"{config.method}@{config.depth}" if config.depth else config.method
            print(f"{condition:5} {threads} thread(s)  {label:8} c{concurrency}:  "
                  + " ".join(f"{rate:7.1f}" for rate in rates)
                  + f"   median {statistics.median(rates):7.1f}  max/min {max(rates) / min(rates):5.2f}"
                  + f"   other processes {statistics.mean(others):.2f} cores", flush=True)


def main() -> None:
    args = parse_args()
    engine = EmbeddedEngine()
    default = torch.get_num_threads()
    measure(engine, "idle", default, args)
    measure(engine, "idle", 1, args)
    # Sessions of their own: the noise reading counts only other sessions as other work.
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(args.loops)]
    try:
        time.sleep(1.0)
        load = noise.while_waiting(1.0)
        print(f"\nbusy loops: {load.describe()}; cores left: {load.cores_left()}\n")
        measure(engine, "busy", default, args)
        measure(engine, "busy", load.cores_left(), args)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


if __name__ == "__main__":
    main()
