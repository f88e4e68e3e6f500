"""A default ``autotune tune``: its wall time, and its predictions against the confirmed means.

Issue 38's goals for the embedded default: the study finishes within 10 minutes on a quiet 2-core
machine, and the predictions the study stored with its trials (each made before its trial ran)
miss the confirmation's means by a median |predicted / confirmed - 1| <= 7 %, with neither sign
holding more than 7 of 10 confirmed points. One line per confirmed configuration (its first
prediction, the confirmed mean with its 95 % interval over the rounds, the signed error), then the
median, the signs and the wall time per seed, and pooled::

    python bench/bench_default_tune.py                  # seed 1
    python bench/bench_default_tune.py --seeds 1,2 --workload prose

Figures, not pass/fail: the exit code is 0 either way. ``--json PATH`` writes them too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.analysis import decision
from autotune.search import tune
from autotune.search.request import tune_options
from autotune.tune_progress import tune_progress

MAX_SECONDS = 600  # issue 38: a default tune within 10 minutes
MAX_MEDIAN_ERROR = 0.07  # issue 38: median |predicted / confirmed - 1|
MAX_SAME_SIGN = 0.7  # issue 38: neither sign on more than 7 of 10 points


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1", help="comma-separated seeds, one default study each")
    parser.add_argument("--workload", help="code, prose, chat or a JSONL file (default: the built-in code one)")
    parser.add_argument("--json", dest="json_path", help="also write the figures to this JSON file")
    return parser.parse_args()


def configuration(row: Any) -> tuple:
    return (row.method, row.depth, row.draft, row.concurrency)


def label(row: Any) -> str:
    method = row.method if row.method == "none" else f"{row.method}@{row.depth}"
    return f"{method} c{row.concurrency}"


def points(rows: list[Any]) -> list[dict[str, Any]]:
    """Each confirmed configuration: its first stored prediction against its confirmed mean."""
    first_prediction: dict[tuple, float] = {}
    for row in sorted((r for r in rows if r.phase == "screening"), key=lambda r: r.trial_number or 0):
        value = (row.prediction or {}).get("tokens_per_s", {}).get("value")
        if value and configuration(row) not in first_prediction:
            first_prediction[configuration(row)] = value
    found = []
    for row in decision.deciding_rows(rows):
        if decision.confirmation_run(row) is None or configuration(row) not in first_prediction:
            continue
        estimate = row.estimate("tokens_per_s")
        predicted = first_prediction[configuration(row)]
        found.append({"configuration": label(row), "predicted": predicted, "confirmed": estimate.to_dict(),
                      "error": predicted / estimate.value - 1})
    return found


def verdict(errors: list[float]) -> dict[str, Any]:
    if not errors:
        return {"median_abs_error": None, "optimistic": 0, "pessimistic": 0, "count": 0}
    optimistic = sum(e > 0 for e in errors)
    return {"median_abs_error": statistics.median(abs(e) for e in errors), "optimistic": optimistic,
            "pessimistic": len(errors) - optimistic, "count": len(errors),
            "signs_met": max(optimistic, len(errors) - optimistic) <= MAX_SAME_SIGN * len(errors)}


def run_seed(seed: int, workload: str | None) -> dict[str, Any]:
    db_url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-default-')) / 'tune.db'}"
    options = tune_options({"seed": seed, "workload": workload}, db_url)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with tune_progress(enabled=True) as progress:
        result = tune(options, progress)
    seconds = time.monotonic() - started
    found = points(result.rows)
    print(f"\nseed {seed}: {seconds:.0f} s (goal <= {MAX_SECONDS}), load average {load_before:.1f} before / "
          f"{os.getloadavg()[0]:.1f} after, {db_url}")
    for line in result.summary_lines():
        print(f"  {line}")
    print(f"  {'confirmed configuration':24} {'predicted':>9} {'confirmed tok/s [95 %]':>26} {'error':>7}")
    for point in found:
        c = point["confirmed"]
        interval = f"{c['value']:.0f} [{c['low']:.0f}, {c['high']:.0f}]" if c.get("low") else f"{c['value']:.0f}"
        print(f"  {point['configuration']:24} {point['predicted']:>9.0f} {interval:>26} {point['error']:>+7.1%}")
    figures = verdict([p["error"] for p in found])
    if figures["count"]:
        print(f"  median |error| {figures['median_abs_error']:.1%} (goal <= {MAX_MEDIAN_ERROR:.0%}); "
              f"optimistic {figures['optimistic']}, pessimistic {figures['pessimistic']} of {figures['count']}")
    return {"seed": seed, "seconds": seconds, "load_average_before": load_before, "db_url": db_url,
            "recommendation": result.summary_lines()[:1], "points": found, **figures}


def main() -> None:
    args = parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    runs = [run_seed(seed, args.workload) for seed in seeds]
    pooled = verdict([p["error"] for run in runs for p in run["points"]])
    walls = ", ".join(f"{run['seconds']:.0f}" for run in runs)
    print(f"\npooled over {len(runs)} seed(s): median |error| "
          f"{pooled['median_abs_error'] if pooled['median_abs_error'] is None else format(pooled['median_abs_error'], '.1%')}, "
          f"optimistic {pooled['optimistic']} / pessimistic {pooled['pessimistic']}; "
          f"wall times {walls} s")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"runs": runs, "pooled": pooled}, indent=2))


if __name__ == "__main__":
    main()
