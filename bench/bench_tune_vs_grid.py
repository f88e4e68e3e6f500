"""Does the tuner find (nearly) the best configuration? TPE with a small budget versus an exhaustive
grid over the same search space.

Runs ``tune`` with the given sampler and budget, then the grid (every point once), then measures
the two winners again, alternating, ``--repeats`` times each in fresh worker processes, and prints
whether the tuned configuration's median throughput is within 5 % of the grid best's::

    python bench/bench_tune_vs_grid.py                          # built-in models and workload
    python bench/bench_tune_vs_grid.py --requests 4 --max-tokens 24 --max-depth 2 --n-trials 8   # smoke run

A figure, not a pass/fail test: the exit code is 0 either way.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from autotune.engines.worker import EngineWorker
from autotune.hardware import probe_hardware
from autotune.search import TuneOptions, TuneProgress, tune
from autotune.search.samplers import DEFAULT_N_TRIALS
from autotune.search.setup import set_up_study
from autotune.search.space import Candidate
from autotune.workload import load_workload

TOLERANCE = 0.05
NOISY_SPREAD = 0.2  # max/min of a configuration's re-measurements above 1.2: too noisy to judge


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="database URL (default: a temporary SQLite file)")
    parser.add_argument("--workload", help="JSONL workload (default: the built-in one)")
    parser.add_argument("--requests", type=int, help="use only the first N requests")
    parser.add_argument("--max-tokens", type=int, help="cap every request's max_tokens")
    parser.add_argument("--max-depth", type=int, default=8)
    parser.add_argument("--concurrency", dest="concurrencies", type=lambda text: tuple(int(b) for b in text.split(",")))
    parser.add_argument("--sampler", default="tpe", choices=("model", "tpe", "random"))
    parser.add_argument("--n-trials", type=int, default=DEFAULT_N_TRIALS, help="the tuned study's budget (default: tune's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="re-measurements of each winner")
    return parser.parse_args()


def print_progress(update: TuneProgress) -> None:
    if update.finished is not None:
        print(f"  [{update.trials_done}/{update.trials_total}] {update.current}: {update.finished}", flush=True)


def remeasure(options: TuneOptions, candidates: dict[str, Candidate], repeats: int) -> dict[str, list[float]]:
    """tokens/s of each candidate, ``repeats`` times, alternating, each run in a fresh worker."""
    setup = set_up_study(options)
    figures: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, candidate in candidates.items():
            with EngineWorker(setup.engine_spec, timeout_s=options.trial_timeout) as worker:
                config = candidate.engine_config(setup.draft_engine_args)
                measurement = worker.measure(config, setup.workload, candidate.concurrency, seed=options.seed or 0)
            figures[name].append(measurement.tokens_per_s)
    return figures


def winner(result) -> Candidate:
    row = result.profile.row
    return Candidate(row.method, row.depth, row.concurrency, row.draft)


def main() -> None:
    args = parse_args()
    workload = load_workload(args.workload)
    if args.requests:
        workload = workload.head(args.requests)
    if args.max_tokens:
        workload = workload.with_max_tokens(args.max_tokens)
    db_url = args.db or f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-tune-')) / 'bench.db'}"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    options = TuneOptions(
        db_url=db_url, workload=workload, max_depth=args.max_depth, concurrencies=args.concurrencies, seed=args.seed,
        hardware=probe_hardware(quick=True),
    )
    print(f"database: {db_url}")

    tuned_options = replace(options, study_name=f"bench-{args.sampler}-{stamp}", sampler=args.sampler,
                            n_trials=args.n_trials)
    print(f"{args.sampler}: {args.n_trials} trials")
    started = time.monotonic()
    tuned = tune(tuned_options, print_progress)
    tuned_s = time.monotonic() - started

    grid_options = replace(options, study_name=f"bench-grid-{stamp}", sampler="grid", n_trials=None)
    print(f"grid: {set_up_study(grid_options).n_trials} trials")
    started = time.monotonic()
    grid = tune(grid_options, print_progress)
    grid_s = time.monotonic() - started

    candidates = {"tuned": winner(tuned), "grid": winner(grid)}
    same = candidates["tuned"] == candidates["grid"]
    print(f"re-measuring {candidates['tuned'].label} (tuned) and {candidates['grid'].label} (grid best), "
          f"{args.repeats}x each")
    figures = remeasure(options, {"grid": candidates["grid"]} if same else candidates, args.repeats)
    if same:
        figures["tuned"] = figures["grid"]
    medians = {name: statistics.median(values) for name, values in figures.items()}
    ratio = medians["tuned"] / medians["grid"]
    spread = max(max(values) / min(values) for values in figures.values())

    print()
    print(f"{'':8} {'configuration':18} {'trials':>6} {'time s':>7} {'study tok/s':>12} {'re-measured tok/s':>18}")
    for name, result, seconds in (("tuned", tuned, tuned_s), ("grid", grid, grid_s)):
        print(f"{name:8} {candidates[name].label:18} {result.analysis.counts.total:>6} {seconds:>7.0f} "
              f"{result.profile.row.tokens_per_s:>12.1f} {medians[name]:>18.1f}")
    verdict = "within" if ratio >= 1 - TOLERANCE else "NOT within"
    print(f"tuned / grid best = {ratio:.3f}: {verdict} {TOLERANCE:.0%} of the grid's best "
          f"with {tuned.analysis.counts.total / grid.analysis.counts.total:.0%} of its trials"
          + (" (both found the same configuration)" if same else ""))
    if spread > 1 + NOISY_SPREAD:
        print(f"warning: repeated measurements of one configuration differ by {spread - 1:.0%}; "
              "the machine is busy or the workload too short for a stable figure")


if __name__ == "__main__":
    main()
