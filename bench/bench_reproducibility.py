"""Does the tuner's answer survive a re-run? Two default studies on one machine, one after the other.

Runs ``autotune tune`` twice through the library (the defaults: built-in models and workload,
screening plus confirmation), with seeds 1 and 2, each into its own fresh SQLite database, and
prints both recommendations, whether they are the same configuration or one the first study itself
reports as statistically tied with its recommendation, and the ratio of their confirmed throughputs
with a 95 % interval (two independent runs: the log half-widths add in quadrature). Each study's
wall time is printed too (a default study should take under 10 minutes on our 2-core CPU).

``--burn-at S --burn-for D`` starts, S seconds into each study, one busy process per core (in a
session of their own, so they count as other load) for D seconds: the "machine briefly loaded"
check. The study must then store no speedup above what its acceptance allows, and recommend what an
unloaded run does or a configuration tied with it.

    python bench/bench_reproducibility.py                      # two quiet runs (~15-20 min)
    python bench/bench_reproducibility.py --burn-at 60 --burn-for 60 --seeds 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autotune.analysis.intervals import Estimate
from autotune.analysis.plausibility import speedup_bound
from autotune.search import TuneOptions, tune

BURN = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


def burner(start_after_s: float, seconds: float) -> threading.Timer:
    """Start one busy process per core after ``start_after_s`` seconds, for ``seconds``."""
    def start() -> None:
        for _ in range(os.cpu_count() or 1):
            subprocess.Popen([sys.executable, "-c", BURN.format(seconds=seconds)], start_new_session=True)

    timer = threading.Timer(start_after_s, start)
    timer.daemon = True
    timer.start()
    return timer


def independent_ratio(a: Estimate, b: Estimate) -> Estimate:
    """a / b for two independent estimates: log half-widths add in quadrature (95 %)."""
    def log_half(e: Estimate) -> float:
        return (math.log(e.high) - math.log(e.low)) / 2 if e.has_interval and e.low > 0 else 0.0

    half = math.hypot(log_half(a), log_half(b))
    ratio = a.value / b.value
    return Estimate(ratio, ratio * math.exp(-half), ratio * math.exp(half), min(a.n, b.n))


def run_study(seed: int, folder: Path, burn: tuple[float, float] | None) -> dict:
    db = f"sqlite:///{folder / f'seed{seed}.db'}"
    if burn is not None:
        burner(*burn)
    started = time.monotonic()
    result = tune(TuneOptions(db_url=db, study_name=f"repro-seed{seed}", seed=seed))
    elapsed = time.monotonic() - started
    profile = result.profile
    row = profile.row
    implausible = [
        f"{r.label}: {r.speedup:.2f}x > bound {speedup_bound(r.acceptance_length, r.depth):.2f}x"
        for r in result.rows
        if r.speedup is not None and r.method != "none" and r.speedup > speedup_bound(r.acceptance_length, r.depth)
    ]
    return {
        "seed": seed, "elapsed_s": elapsed, "label": row.label, "config": row.config_label, "concurrency": row.concurrency,
        "confirmed": row.confirmed, "tokens_per_s": row.estimate("tokens_per_s"), "speedup": row.estimate("speedup"),
        "tied": [r for r in (profile.decision.tied if profile.decision else [])],
        "summary": result.summary_lines(), "implausible": implausible,
        "discarded_rounds": sum(int(r.extra.get("rounds_discarded", 0)) for r in result.rows if r.method == "none"
                                and r.phase == "confirmation"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2", help="comma-separated seeds, one study each")
    parser.add_argument("--burn-at", type=float, default=None, help="seconds into each study to start loading the CPU")
    parser.add_argument("--burn-for", type=float, default=60.0, help="seconds the load lasts")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    burn = (args.burn_at, args.burn_for) if args.burn_at is not None else None
    runs = []
    with tempfile.TemporaryDirectory(prefix="autotune-repro-") as folder:
        for seed in (int(s) for s in args.seeds.split(",")):
            run = run_study(seed, Path(folder), burn)
            runs.append(run)
            print(f"seed {seed}: {run['elapsed_s'] / 60:.1f} min; recommends {run['label']} "
                  f"({'confirmed' if run['confirmed'] else 'NOT confirmed'}): "
                  f"{run['tokens_per_s'].describe(1, ' tokens/s')}, speedup {run['speedup'].describe(2, 'x')}; "
                  f"tied with: {', '.join(r.label for r in run['tied']) or 'nothing'}; "
                  f"baseline rounds re-measured: {run['discarded_rounds']}")
            for line in run["summary"]:
                print("   ", line)
            print("    implausible stored speedups:", "; ".join(run["implausible"]) or "none")
    if len(runs) >= 2:
        first, second = runs[0], runs[1]
        first_tied, second_tied = {r.label for r in first["tied"]}, {r.label for r in second["tied"]}
        same = first["label"] == second["label"]
        # Each study reports its own ties: the answers agree when either study counts the other's
        # recommendation as tied with its own.
        tied = same or second["label"] in first_tied or first["label"] in second_tied
        shared = sorted(first_tied & second_tied)
        ratio = independent_ratio(second["tokens_per_s"], first["tokens_per_s"])
        speedups = independent_ratio(second["speedup"], first["speedup"])
        print(f"same recommendation: {same}; same or statistically tied: {tied}; "
              f"configurations both studies tie with their recommendation: {', '.join(shared) or 'none'}")
        print(f"confirmed tokens/s, seed {second['seed']} / seed {first['seed']}: {ratio.value:.3f} "
              f"[{ratio.low:.3f}, {ratio.high:.3f}] (1 inside: {ratio.low <= 1 <= ratio.high})")
        print(f"confirmed speedups, seed {second['seed']} / seed {first['seed']}: {speedups.value:.3f} "
              f"[{speedups.low:.3f}, {speedups.high:.3f}] (1 inside: {speedups.low <= 1 <= speedups.high})")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps([
            {**{k: v for k, v in run.items() if k not in ("tokens_per_s", "speedup", "tied")},
             "tokens_per_s": run["tokens_per_s"].to_dict(), "speedup": run["speedup"].to_dict(),
             "tied": [r.label for r in run["tied"]]} for run in runs], indent=2))


if __name__ == "__main__":
    main()
