"""Acceptance at shallow depths: measured, derived from the deepest run by position, and replayed
over the deepest run's runs of matching drafts.

Issue 40, item 2: on the prose workload the acceptance length the performance model derived from
maximum-depth runs by position came out 6-11 % below the one measured at depths 1-4
(docs/benchmarks.md), so the guided search under-predicted shallow n-gram and draft points and
some seeds never screened the winner.

Two derivations of depth k from one run at depth D, against a run at depth k:

* **by position** (:mod:`autotune.perfmodel.acceptance`): Omega(k) = 1 + sum_{i <= k} a_i, with
  a_i = P(a step of the deep run accepts >= i drafts);
* **replayed** (:mod:`autotune.analysis.match_runs`): a depth-k run stepped over the deep run's
  runs of matching drafts, request by request, each unseen position (after a step that accepted
  all D drafts) a match with probability a_D / a_(D-1). The engine reports it with every run
  (``Measurement.replayed_acceptance_length``); the model uses it for the proposers in
  ``REPLAYED``.

The in-process embedded engine runs every depth 1..--max-depth of each proposer at one
concurrency over the workload's steady-state stream::

    python bench/bench_acceptance_replay.py                       # prose, ngram and draft, d1-8
    python bench/bench_acceptance_replay.py --workload code --methods ngram,draft,mtp

Greedy decoding is deterministic, so a rerun prints the same figures. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import statistics

from autotune.analysis.match_runs import continuation
from autotune.engines.base import EngineConfig
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.protocol import measure_pass
from autotune.perfmodel.acceptance import AcceptanceCurve, run_counts
from autotune.workload import load_workload


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="prose")
    parser.add_argument("--methods", default="ngram,draft", type=lambda text: text.split(","))
    parser.add_argument("--max-depth", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=1)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    engine, workload = EmbeddedEngine(), load_workload(args.workload)
    errors: dict[str, list[float]] = {"positional": [], "replay": []}
    deepest = args.max_depth
    for method in args.methods:
        measured = {}
        for depth in range(1, deepest + 1):
            engine.load(EngineConfig(method, depth))
            deep = measure_pass(engine, workload, args.concurrency).measurement
            measured[depth] = deep.acceptance_length
        curve = AcceptanceCurve(method, tuple(run_counts(
            deep.acceptance_by_position, deep.drafted_by_position, deep.sequence_steps, deepest)))
        print(f"{method}: {deep.sequence_steps} sequence-steps at depth {deepest}, "
              f"unseen positions a match with p = {continuation([p.accepted for p in curve.positions], deep.sequence_steps):.2f}")
        for depth in range(1, deepest):
            derived, again = curve.omega(depth), deep.replayed_acceptance_length[depth - 1]
            errors["positional"].append(derived / measured[depth] - 1)
            errors["replay"].append(again / measured[depth] - 1)
            print(f"  d{depth}: measured {measured[depth]:.3f}   from d{deepest} by position {derived:.3f} "
                  f"({derived / measured[depth] - 1:+6.1%})   replayed {again:.3f} ({again / measured[depth] - 1:+6.1%})")
    for name, values in errors.items():
        print(f"median |{name} / measured - 1| over {len(values)} depths: "
              f"{statistics.median(abs(e) for e in values):.1%}, mean signed {statistics.fmean(values):+.1%}")


if __name__ == "__main__":
    main()
