"""Model-guided search versus the repeated grid and TPE: trials, loads, answer, prediction error.

Runs, each in a fresh SQLite database (so no study learns from another's stored profiles):

* the **grid**: every point of the space once, then the confirmation phase (the finalists of
  every batch size re-measured with the repeated, paired protocol): the reference answer;
* **TPE** with tune's default budget, for each ``--tpe-seeds``;
* the **model-guided** default, for each ``--seeds``.

For every run it prints the measured (screening) trials and their share of the grid's, model loads,
wall time, the recommendation with its 95 % interval, whether it is tied with the grid's (the same
configuration, or both re-measured together with the paired protocol and the ratio's interval
includes 1 or favours the run), and the median absolute error of the predictions stored with the
trials (predicted before each trial was measured) against the measured tokens/s. Then the
acceptance-curve check: Omega(depth) derived from the grid's maximum-depth runs against the
acceptance length the grid measured directly at each depth::

    python bench/bench_model_guided.py                                   # built-in models, ~25 min
    python bench/bench_model_guided.py --seeds 1 --tpe-seeds "" --max-depth 3 --batch-sizes 1,4   # smoke

Figures, not pass/fail: the exit code is 0 either way. ``--json PATH`` writes them too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autotune.analysis.intervals import Estimate
from autotune.engines.protocol import ProtocolOptions
from autotune.engines.worker import EngineWorker
from autotune.hardware import probe_hardware
from autotune.perfmodel.acceptance import AcceptanceCurve, row_counts
from autotune.search import TuneOptions, TuneProgress, tune
from autotune.search.plan import plan_study
from autotune.search.space import Candidate
from autotune.workload import load_workload

TRIALS_SHARE = 0.15  # the criteria, printed next to the figures
TPE_SHARE = 0.5
PREDICTION_ERROR = 0.10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3", help="seeds of the model-guided runs")
    parser.add_argument("--tpe-seeds", default="1", help="seeds of the TPE runs ('' for none)")
    parser.add_argument("--max-depth", type=int, default=8)
    parser.add_argument("--batch-sizes", type=lambda text: tuple(int(b) for b in text.split(",")))
    parser.add_argument("--requests", type=int, help="use only the first N requests of the workload")
    parser.add_argument("--grid-db", help="reuse the grid study (named 'grid') of an earlier run in this database")
    parser.add_argument("--json", dest="json_path", help="also write the figures to this JSON file")
    return parser.parse_args()


def seeds(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


@dataclass
class Run:
    name: str
    options: TuneOptions
    result: Any = None
    seconds: float = 0.0

    @property
    def screening(self) -> list:
        return [r for r in self.result.rows if r.phase == "screening"]

    @property
    def trials(self) -> int:
        return self.result.analysis.counts.total

    @property
    def choice(self) -> Candidate:
        row = self.result.profile.row
        return Candidate(row.method, row.depth, row.batch_size, row.draft)

    def prediction_errors(self) -> list[float]:
        """|predicted / measured - 1| of every complete screening trial predicted before it ran."""
        errors = []
        for row in self.screening:
            predicted = (row.prediction or {}).get("tokens_per_s", {}).get("value")
            if row.state == "complete" and predicted and row.tokens_per_s:
                errors.append(abs(predicted / row.tokens_per_s - 1))
        return errors


def progress(name: str):  # noqa: ANN201 - a TuneProgress callback
    def show(update: TuneProgress) -> None:
        if update.finished is not None:
            print(f"  {name} [{update.trials_done}] {update.current}: {update.finished}", flush=True)
        elif not update.current.endswith(tuple("0123456789")):
            print(f"  {name}: {update.current}", flush=True)
    return show


def execute(run: Run) -> Run:
    print(f"{run.name}: starting", flush=True)
    started = time.monotonic()
    run.result = tune(run.options, progress(run.name))
    run.seconds = time.monotonic() - started
    return run


def tie(run: Run, grid: Run, base: TuneOptions) -> tuple[bool, str]:
    """Is the run's recommendation tied with the grid's (see the module doc)?"""
    mine, best = run.choice, grid.choice
    if mine == best:
        return True, "same configuration"
    if mine.batch_size != best.batch_size:
        a, b = run.result.profile.row.estimate("tokens_per_s"), grid.result.profile.row.estimate("tokens_per_s")
        overlap = a.high is not None and b.low is not None and (a.high >= b.low)
        return overlap, f"other batch size; intervals {'overlap' if overlap else 'apart'}"
    plan = plan_study(replace(base, study_name="tie-check"))
    configs = [c.engine_config(plan.draft_engine_args) for c in (mine, best)]
    with EngineWorker(plan.engine_spec, timeout_s=base.trial_timeout) as worker:
        result = worker.measure_repeatedly(configs, plan.workload, mine.batch_size, seed=0,
                                           options=ProtocolOptions(0.03, 5, 10, 60.0))
    ratio: Estimate = result.compare(configs[0], configs[1])
    tied = ratio.high is None or ratio.high >= 1.0
    return tied, f"paired {mine.config_label}/{best.config_label} = {ratio.value:.3f} [{ratio.low:.3f}, {ratio.high:.3f}]"


def derivation_check(grid: Run) -> list[dict[str, Any]]:
    """Omega(depth) from each proposer's deepest grid runs versus the acceptance length measured at
    each depth (mean over batch sizes)."""
    rows = [r for r in grid.screening if r.state == "complete" and r.method != "none"]
    checks = []
    for key in sorted({(r.method, r.draft) for r in rows}, key=str):
        mine = [r for r in rows if (r.method, r.draft) == key]
        deepest = max(r.depth for r in mine)
        curve = AcceptanceCurve.empty(key[0])
        for row in mine:
            if row.depth == deepest:
                curve = curve.pooled(row_counts(row), row.measurement_id)
        for depth in range(1, deepest + 1):
            direct = [r.acceptance_length for r in mine if r.depth == depth]
            if direct and curve.covers(depth):
                measured = statistics.fmean(direct)
                checks.append({"method": key[0], "depth": depth, "derived": curve.omega(depth), "direct": measured,
                               "error": curve.omega(depth) / measured - 1})
    return checks


def main() -> None:
    args = parse_args()
    workload = load_workload(None)
    if args.requests:
        workload = workload.head(args.requests)
    hardware = probe_hardware(quick=True)

    def options(name: str, db_url: str | None = None, **changes: Any) -> TuneOptions:
        db_url = db_url or f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-guided-')) / 'bench.db'}"
        return TuneOptions(db_url=db_url, study_name=name, workload=workload, max_depth=args.max_depth,
                           batch_sizes=args.batch_sizes, hardware=hardware, **changes)

    # Resuming a finished study measures nothing: --grid-db reads the earlier grid back.
    grid = execute(Run("grid", options("grid", args.grid_db, sampler="grid", seed=0)))
    print(f"grid database: {grid.options.db_url}")
    runs = [execute(Run(f"tpe seed {s}", options(f"tpe-{s}", sampler="tpe", seed=s))) for s in seeds(args.tpe_seeds)]
    guided = [execute(Run(f"model seed {s}", options(f"model-{s}", seed=s))) for s in seeds(args.seeds)]

    figures = []
    tpe_trials = [r.trials for r in runs]
    print()
    print(f"{'run':14} {'trials':>6} {'of grid':>7} {'loads':>5} {'time s':>6}  {'recommendation':16} "
          f"{'tokens/s [95%]':26} {'pred err':>8} {'n':>3}  tied with the grid's answer")
    for run in [grid] + runs + guided:
        row = run.result.profile.row
        estimate = row.estimate("tokens_per_s")
        interval = f"{estimate.value:.0f} [{estimate.low:.0f}, {estimate.high:.0f}]" if estimate.low else f"{estimate.value:.0f}"
        tied, how = (True, "(the reference)") if run is grid else tie(run, grid, options("tie"))
        errors = run.prediction_errors()
        median_error = statistics.median(errors) if errors else None
        figures.append({"run": run.name, "trials": run.trials, "share_of_grid": run.trials / grid.trials,
                        "model_loads": run.result.analysis.model_loads, "seconds": run.seconds,
                        "recommendation": run.choice.label, "tokens_per_s": estimate.to_dict(), "tied": tied,
                        "tie_check": how, "prediction_median_abs_error": median_error, "predictions": len(errors)})
        error_text = f"{median_error:8.1%}" if median_error is not None else f"{'-':>8}"
        print(f"{run.name:14} {run.trials:>6} {run.trials / grid.trials:>7.0%} {run.result.analysis.model_loads:>5} "
              f"{run.seconds:>6.0f}  {run.choice.label:16} {interval:26} {error_text} {len(errors):>3}  "
              f"{'yes' if tied else 'NO'}: {how}")

    print()
    guided_figures = [f for f in figures if f["run"].startswith("model")]
    most = max(f["trials"] for f in guided_figures)
    pooled = [e for run in guided for e in run.prediction_errors()]
    print(f"model-guided, {len(guided)} seeds: at most {most} trials = {most / grid.trials:.0%} of the grid's "
          f"{grid.trials} (criterion <= {TRIALS_SHARE:.0%})"
          + (f", {most / statistics.fmean(tpe_trials):.0%} of TPE's {statistics.fmean(tpe_trials):.0f} "
             f"(criterion <= {TPE_SHARE:.0%})" if tpe_trials else ""))
    print(f"tied with the grid's answer: {sum(f['tied'] for f in guided_figures)} of {len(guided_figures)}")
    if pooled:
        print(f"median |predicted / measured - 1| over the guided runs' {len(pooled)} predicted trials: "
              f"{statistics.median(pooled):.1%} (criterion <= {PREDICTION_ERROR:.0%}); over the grid's "
              f"{len(grid.prediction_errors())}: {statistics.median(grid.prediction_errors()):.1%}")

    checks = derivation_check(grid)
    print()
    print("acceptance length derived from the maximum-depth runs vs measured at each depth (grid, mean over batch sizes):")
    for method in dict.fromkeys(c["method"] for c in checks):
        line = "  ".join(f"d{c['depth']} {c['derived']:.2f}/{c['direct']:.2f} ({c['error']:+.1%})"
                         for c in checks if c["method"] == method)
        print(f"  {method:6} {line}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"runs": figures, "derivation": checks}, indent=2))


if __name__ == "__main__":
    main()
