"""Does a pass's figure depend on how long its stream is?

A pass at concurrency C decodes the workload cycled to at least 4 x C requests and reports the
tokens/s of its steady window (:mod:`autotune.analysis.steady`). If the window is right, a longer
stream of the same requests reads the same figure, within the run-to-run noise. This measures the
embedded engine at C on streams of 1, 2, 4 and 8 copies of the built-in workload (cut to short
requests, where the prefill is the largest share of a request and a biased window shows most), in
alternating order per round, and prints each length's median with its spread and its ratio to the
longest stream's median.

    python bench/bench_steady_window.py                      # draft@3, C = 4, 32-token requests, 4 rounds
    python bench/bench_steady_window.py --max-tokens 64 --concurrency 8 --rounds 6
"""

from __future__ import annotations

import argparse
import statistics

from autotune.engines.base import EngineConfig
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.protocol import measure_pass
from autotune.workload import Workload, builtin_workload

COPIES = (1, 2, 4, 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="draft")
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=32, help="Cap on every request's output tokens.")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    engine = EmbeddedEngine()
    engine.load(EngineConfig(args.method, args.depth))
    base = builtin_workload().with_max_tokens(args.max_tokens)
    streams = [Workload(base.name, base.requests * copies, base.version) for copies in COPIES]
    measure_pass(engine, streams[0], args.concurrency)  # warm-up, not counted
    figures: dict[int, list[float]] = {len(s.requests): [] for s in streams}
    for round_index in range(args.rounds):
        for stream in streams if round_index % 2 == 0 else streams[::-1]:  # alternating: drift hits all alike
            measured = measure_pass(engine, stream, args.concurrency).measurement
            figures[len(stream.requests)].append(measured.tokens_per_s)

    longest = statistics.median(figures[max(figures)])
    print(f"{args.method}@{args.depth} c{args.concurrency}, {args.max_tokens}-token requests, {args.rounds} rounds")
    print(f"{'requests':>8}  {'median tok/s':>12}  {'spread (sd/mean)':>16}  {'vs longest':>10}")
    for length, values in figures.items():
        spread = statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0
        median = statistics.median(values)
        print(f"{length:>8}  {median:>12.1f}  {spread:>15.1%}  {median / longest - 1:>+10.1%}")


if __name__ == "__main__":
    main()
