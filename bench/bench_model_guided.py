"""Model-guided search versus the repeated grid and TPE: configurations, builds, answer, prediction error.

Runs, each in a fresh SQLite database (so no study learns from another's stored profiles):

* the **grid**: every point of the space screened once, then the confirmation phase (up to the
  top 4 of every concurrency and its baseline re-measured with the repeated, paired protocol): the
  reference answer;
* **TPE** with tune's default budget, for each ``--tpe-seeds``;
* the **model-guided** default, for each ``--seeds``.

For every run it prints the screening trials, the distinct configurations measured, the model loads
(engine builds on vLLM and TensorRT-LLM), wall time, the load average around it, the recommendation
with its 95 % interval, and whether it is tied with the grid's (the same configuration, or both
re-measured together with the paired protocol and the ratio's interval includes 1 or favours the
run). The predictions stored with the trials (made before each trial was measured) are scored
against the *confirmation means* of the same configurations (the reference's confirmation and the
run's own) and, for comparison, against the single screening passes. Then the acceptance-curve
check: Omega(depth) derived from the grid's maximum-depth runs against the acceptance length the
grid measured directly at each depth::

    python bench/bench_model_guided.py                                   # built-in models, ~45 min
    python bench/bench_model_guided.py --seeds 1 --max-depth 3 --concurrency 1,4   # smoke
    # vLLM's CPU build (issue 21, 6b): guided against TPE against the grid, MTP through the MiMo export
    .venv-vllm/bin/autotune models export-hf --out hf && .venv-vllm/bin/autotune models export-hf --out hf-mimo --model target --format mimo
    .venv-vllm/bin/python bench/bench_model_guided.py --engine vllm --target hf-mimo/autotune-byte-target \
        --draft hf/autotune-byte-draft --max-depth 4 --concurrency 1,2,4 --seeds 1 --tpe-seeds 1

Figures, not pass/fail: the exit code is 0 either way. ``--json PATH`` writes them too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autotune.analysis import decision
from autotune.analysis.intervals import Estimate
from autotune.engines.protocol import ProtocolOptions
from autotune.engines.worker import EngineWorker
from autotune.hardware import probe_hardware
from autotune.perfmodel.acceptance import AcceptanceCurve, row_counts
from autotune.search import TuneOptions, TuneProgress, tune
from autotune.search.setup import set_up_study
from autotune.search.screening import RERUNS_ATTR, SURPRISE_ATTR
from autotune.search.space import Candidate
from autotune.workload import load_workload

# The criteria (issue 21, item 6), printed next to the figures.
MAX_CONFIGURATIONS = 15
PREDICTION_ERROR = 0.10
TPE_BUILDS_SHARE = 1 / 3


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5", help="seeds of the model-guided runs")
    parser.add_argument("--tpe-seeds", default="", help="seeds of the TPE runs ('' for none)")
    parser.add_argument("--engine", default="embedded", help="embedded (default), vllm or trtllm")
    parser.add_argument("--target", help="target model (a folder for vllm and trtllm)")
    parser.add_argument("--draft", help="draft model (a folder for vllm and trtllm)")
    parser.add_argument("--workload", help="JSONL workload (default: the built-in one)")
    parser.add_argument("--max-depth", type=int, default=8)
    parser.add_argument("--concurrency", dest="concurrencies", type=lambda text: tuple(int(b) for b in text.split(",")))
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
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before and after the run

    @property
    def screening(self) -> list:
        return [r for r in self.result.rows if r.phase == "screening"]

    @property
    def trials(self) -> int:
        return self.result.analysis.counts.total

    @property
    def configurations(self) -> int:
        """Distinct configurations the screening measured (a re-run pass counts once)."""
        return len({key(row) for row in self.screening})

    @property
    def reruns(self) -> int:
        """Screening passes measured again: disturbed, or far below their prediction (search/screening.py)."""
        return sum(int(row.extra.get(RERUNS_ATTR, 0)) + (SURPRISE_ATTR in row.extra)
                   for row in self.screening)

    def confirmed_means(self) -> dict[tuple, float]:
        """Tokens/s of every configuration the latest confirmation run measured."""
        return {key(row): row.tokens_per_s for row in decision.deciding_rows(self.result.rows)
                if decision.confirmation_run(row) is not None}

    @property
    def choice(self) -> Candidate:
        row = self.result.profile.row
        return Candidate(row.method, row.depth, row.concurrency, row.draft)

    def prediction_errors(self, against: dict[tuple, float] | None = None) -> list[float]:
        """|predicted / measured - 1| of every complete screening trial predicted before it ran:
        against its own pass, or against ``against``'s means where they hold the configuration
        (one error per configuration then, from its first prediction)."""
        errors, seen = [], set()
        for row in self.screening:
            predicted = (row.prediction or {}).get("tokens_per_s", {}).get("value")
            if row.state != "complete" or not predicted or not row.tokens_per_s:
                continue
            if against is None:
                errors.append(abs(predicted / row.tokens_per_s - 1))
            elif key(row) in against and key(row) not in seen:
                seen.add(key(row))
                errors.append(abs(predicted / against[key(row)] - 1))
        return errors


def key(row: Any) -> tuple:
    return (row.method, row.depth, row.concurrency, row.draft)


def progress(name: str):  # noqa: ANN201 - a TuneProgress callback
    def show(update: TuneProgress) -> None:
        if update.finished is not None:
            print(f"  {name} [{update.trials_done}] {update.current}: {update.finished}", flush=True)
        elif not update.current.endswith(tuple("0123456789")):
            print(f"  {name}: {update.current}", flush=True)
    return show


def execute(run: Run) -> Run:
    print(f"{run.name}: starting", flush=True)
    before = os.getloadavg()[0]
    started = time.monotonic()
    run.result = tune(run.options, progress(run.name))
    run.seconds = time.monotonic() - started
    run.load = (before, os.getloadavg()[0])
    return run


def tie(run: Run, grid: Run, base: TuneOptions) -> tuple[bool, str]:
    """Is the run's recommendation tied with the grid's (see the module doc)?"""
    mine, best = run.choice, grid.choice
    if mine == best:
        return True, "same configuration"
    if mine.concurrency != best.concurrency:
        a, b = run.result.profile.row.estimate("tokens_per_s"), grid.result.profile.row.estimate("tokens_per_s")
        overlap = a.high is not None and b.low is not None and (a.high >= b.low)
        return overlap, f"other concurrency; intervals {'overlap' if overlap else 'apart'}"
    setup = set_up_study(replace(base, study_name="tie-check"))
    configs = [c.engine_config(setup.draft_engine_args) for c in (mine, best)]
    with EngineWorker(setup.engine_spec, timeout_s=base.trial_timeout) as worker:
        result = worker.measure_repeatedly(configs, setup.workload, mine.concurrency, seed=0,
                                           options=ProtocolOptions(0.03, 5, 10, 60.0))
    ratio: Estimate = result.compare(configs[0], configs[1])
    tied = ratio.high is None or ratio.high >= 1.0
    return tied, f"paired {mine.config_label}/{best.config_label} = {ratio.value:.3f} [{ratio.low:.3f}, {ratio.high:.3f}]"


def derivation_check(grid: Run) -> list[dict[str, Any]]:
    """Omega(depth) from each proposer's deepest grid runs versus the acceptance length measured at
    each depth (mean over concurrency levels)."""
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


def median_text(errors: list[float]) -> str:
    return f"{statistics.median(errors):.1%} over {len(errors)}" if errors else "-"


def main() -> None:
    args = parse_args()
    workload = load_workload(args.workload)
    if args.requests:
        workload = workload.head(args.requests)
    hardware = probe_hardware(quick=True)
    models: dict[str, Any] = {"engine": args.engine}
    if args.target:
        models["target"] = args.target
    if args.draft:
        models["drafts"] = (args.draft,)

    def options(name: str, db_url: str | None = None, **changes: Any) -> TuneOptions:
        db_url = db_url or f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-guided-')) / 'bench.db'}"
        return TuneOptions(db_url=db_url, study_name=name, workload=workload, max_depth=args.max_depth,
                           concurrencies=args.concurrencies, hardware=hardware, **models, **changes)

    # Resuming a finished study measures nothing: --grid-db reads the earlier grid back.
    grid = execute(Run("grid", options("grid", args.grid_db, sampler="grid", seed=0)))
    print(f"grid database: {grid.options.db_url}")
    runs = [execute(Run(f"tpe seed {s}", options(f"tpe-{s}", sampler="tpe", seed=s))) for s in seeds(args.tpe_seeds)]
    guided = [execute(Run(f"model seed {s}", options(f"model-{s}", seed=s))) for s in seeds(args.seeds)]
    reference = grid.confirmed_means()

    figures = []
    print()
    print(f"{'run':14} {'trials':>6} {'configs':>7} {'reruns':>6} {'loads':>5} {'time s':>6} {'load avg':>9}  {'recommendation':16} "
          f"{'tokens/s [95%]':26}  tied with the grid's answer")
    for run in [grid] + runs + guided:
        row = run.result.profile.row
        estimate = row.estimate("tokens_per_s")
        interval = f"{estimate.value:.0f} [{estimate.low:.0f}, {estimate.high:.0f}]" if estimate.low else f"{estimate.value:.0f}"
        tied, how = (True, "(the reference)") if run is grid else tie(run, grid, options("tie"))
        errors = {"vs_reference_confirmation": run.prediction_errors(reference),
                  "vs_own_confirmation": run.prediction_errors(run.confirmed_means()),
                  "vs_screening_pass": run.prediction_errors()}
        figures.append({"run": run.name, "trials": run.trials, "configurations": run.configurations,
                        "screening_reruns": run.reruns,
                        "model_loads": run.result.analysis.model_loads, "seconds": run.seconds,
                        "load_average": run.load, "recommendation": run.choice.label,
                        "tokens_per_s": estimate.to_dict(), "tied": tied, "tie_check": how,
                        "prediction_abs_errors": errors})
        print(f"{run.name:14} {run.trials:>6} {run.configurations:>7} {run.reruns:>6} {run.result.analysis.model_loads:>5} "
              f"{run.seconds:>6.0f} {run.load[0]:>4.1f}/{run.load[1]:<4.1f}  {run.choice.label:16} {interval:26}  "
              f"{'yes' if tied else 'NO'}: {how}")

    print()
    print("median |predicted / measured - 1| (predictions made before each trial ran):")
    print(f"  {'run':14} {'vs reference confirmation':>26} {'vs own confirmation':>22} {'vs screening pass':>20}")
    for run, figure in zip([grid] + runs + guided, figures):
        e = figure["prediction_abs_errors"]
        print(f"  {run.name:14} {median_text(e['vs_reference_confirmation']):>26} "
              f"{median_text(e['vs_own_confirmation']):>22} {median_text(e['vs_screening_pass']):>20}")
    guided_figures = [f for f in figures if f["run"].startswith("model")]
    pooled = {name: [x for f in guided_figures for x in f["prediction_abs_errors"][name]]
              for name in ("vs_reference_confirmation", "vs_own_confirmation", "vs_screening_pass")}
    print()
    if guided_figures:
        print(f"model-guided, {len(guided)} seeds: at most {max(f['configurations'] for f in guided_figures)} "
              f"configurations measured (criterion <= {MAX_CONFIGURATIONS}; the grid's {grid.configurations})")
        print(f"tied with the grid's answer: {sum(f['tied'] for f in guided_figures)} of {len(guided_figures)}")
    print("pooled median |predicted / confirmed - 1|: "
          f"{median_text(pooled['vs_reference_confirmation'])} against the reference's confirmation, "
          f"{median_text(pooled['vs_own_confirmation'])} against the run's own (criterion <= {PREDICTION_ERROR:.0%}); "
          f"against screening passes {median_text(pooled['vs_screening_pass'])}")
    if runs and guided_figures:
        tpe_builds = statistics.fmean(f["model_loads"] for f in figures if f["run"].startswith("tpe"))
        guided_builds = statistics.fmean(f["model_loads"] for f in guided_figures)
        print(f"loads (builds): guided {guided_builds:.1f} against TPE's {tpe_builds:.1f} = "
              f"{guided_builds / tpe_builds:.0%} (goal <= {TPE_BUILDS_SHARE:.0%}); the grid {grid.result.analysis.model_loads}")

    checks = derivation_check(grid)
    print()
    print("acceptance length derived from the maximum-depth runs vs measured at each depth (grid, mean over concurrency levels):")
    for method in dict.fromkeys(c["method"] for c in checks):
        line = "  ".join(f"d{c['depth']} {c['derived']:.2f}/{c['direct']:.2f} ({c['error']:+.1%})"
                         for c in checks if c["method"] == method)
        print(f"  {method:6} {line}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"runs": figures, "derivation": checks, "pooled": pooled}, indent=2))


if __name__ == "__main__":
    main()
