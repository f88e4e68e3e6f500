"""Served schedules on vLLM: a tuned profile's exported schedule against its best fixed depth and none.

Issues 26 (item 3) and 38. Tunes a vLLM profile (or takes a stored one with ``--profile``), then runs
``autotune validate`` on it: the exported script served as written, the best single depth and no
speculation, in alternating rounds under our load generator at each of the profile's concurrency levels as
a concurrency level, ``--runs`` rounds. It prints the validation table (every figure with its 95 %
interval over the rounds), the schedule's paired ratios to the other servers, the tuned-vs-served gap
per concurrency, and the goals checked per concurrency:

* the schedule >= the best fixed depth, where the two serve different depths: the decision rule's
  3 % practical margin on their paired ratio (autotune/validation/figures.py);
* the schedule >= none (same rule; the schedule always differs from none);
* |served / tuned - 1| <= 10 % (issue 38; issue 26 asked 15 %).

::

    .venv-vllm/bin/autotune models export-hf --out hf
    .venv-vllm/bin/python bench/bench_served_schedule.py \\
        --target hf/autotune-byte-target --draft hf/autotune-byte-draft --method draft \\
        --max-depth 4 --concurrency 1,4,16 --requests 8 --runs 3
    # a profile already stored: validate only
    .venv-vllm/bin/python bench/bench_served_schedule.py --db sqlite:///a.db --profile 1

Figures, not pass/fail: the exit code is 0 either way. ``--json PATH`` writes the validation and
the goal checks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune import api
from autotune.search import tune
from autotune.search.request import tune_options
from autotune.tune_progress import tune_progress
from autotune.validation import ValidationOptions
from autotune.validation.results import ValidationResult
from autotune.validation.table import summary_lines, validation_rows
from autotune.workload import load_workload

MAX_GAP = 0.10  # issue 38: |served / tuned - 1| <= 10 % at every concurrency


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--profile", type=int, help="validate this stored profile instead of tuning one")
    parser.add_argument("--target", help="target model folder (Hugging Face, as vLLM serves it)")
    parser.add_argument("--draft", help="draft model folder")
    parser.add_argument("--method", action="append", help="methods to tune (repeatable; default: all)")
    parser.add_argument("--max-depth", type=int, default=4)
    parser.add_argument("--workload", help="JSONL workload (default: the built-in one)")
    parser.add_argument("--requests", type=int, help="use only the first N requests of the workload")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slo-tpot-ms", type=float, help="the study's TPOT limit (p90), as tune's --slo-tpot-ms")
    parser.add_argument("--runs", type=int, default=3, help="validation runs per server and concurrency")
    parser.add_argument("--concurrency", type=lambda text: tuple(int(c) for c in text.split(",")),
                        help="concurrency levels to tune and to validate at (default: the tune's own; with --profile, the profile's)")
    parser.add_argument("--server-arg", action="append", default=[], help="passed on to every `vllm serve`")
    parser.add_argument("--json", dest="json_path", help="also write the figures to this JSON file")
    return parser.parse_args()


def workload_file(args: argparse.Namespace, folder: Path) -> Path | None:
    """The workload as a file validate can check against the study's fingerprint (None: built-in)."""
    if not args.requests:
        return Path(args.workload) if args.workload else None
    workload = load_workload(args.workload).head(args.requests)
    path = folder / f"workload-{args.requests}.jsonl"
    path.write_text("".join(json.dumps({"prompt": r.prompt, "max_tokens": r.max_tokens,
                                        "temperature": r.temperature}) + "\n" for r in workload.requests))
    return path


def tuned_profile(args: argparse.Namespace, db_url: str, workload: Path | None) -> int:
    """Tune with the model-guided default and return the stored profile's id."""
    # The options by the command's names, as `autotune tune` passes them (one conversion for both).
    options = tune_options({"study": "served-schedule", "engine": "vllm", "target": args.target,
                            "draft": [args.draft] if args.draft else None, "method": args.method,
                            "max_depth": args.max_depth, "concurrencies": args.concurrency, "seed": args.seed,
                            "workload": str(workload) if workload else None, "slo_tpot_ms": args.slo_tpot_ms}, db_url)
    started = time.monotonic()
    with tune_progress(enabled=True) as progress:
        result = tune(options, progress)
    print(f"tuned in {time.monotonic() - started:.0f} s, {result.analysis.model_loads} engine builds")
    for line in result.summary_lines():
        print(f"  {line}")
    return api.list_profiles(db_url, study=result.study_name)[0].id  # the profile the study just stored


def goal_checks(result: ValidationResult) -> list[dict[str, Any]]:
    """Per concurrency: the schedule's verdicts against fixed and none (None where not judged) and the gap."""
    checks = []
    for concurrency in result.concurrency:
        verdicts = {c.other: c.verdict for c in result.comparisons if c.concurrency == concurrency}
        gap = result.gaps.get(concurrency)
        checks.append({
            "concurrency": concurrency,
            "schedule_vs_fixed": verdicts.get("fixed"),
            "schedule_vs_none": verdicts.get("none"),
            "gap": gap.to_dict() if gap else None,
            "gap_within": None if gap is None else ("met" if abs(gap.value) <= MAX_GAP else "missed"),
        })
    return checks


def main() -> None:
    args = parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-served-"))
    db_url = args.db or f"sqlite:///{folder / 'bench.db'}"
    workload = workload_file(args, folder)
    profile_id = args.profile if args.profile is not None else tuned_profile(args, db_url, workload)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    result = api.validate(db_url, profile_id, ValidationOptions(
        concurrency=args.concurrency, runs=args.runs, workload=workload, vllm_python=sys.executable,
        server_args=tuple(args.server_arg)), progress=lambda line: print(f"  validate: {line}", file=sys.stderr))
    seconds = time.monotonic() - started
    print(f"\nprofile {profile_id} ({db_url}): validated in {seconds:.0f} s, load average "
          f"{load_before:.1f} before / {os.getloadavg()[0]:.1f} after, {args.runs} round(s)")
    for row in validation_rows(result):
        print(f"  c={row['c']:<3} {row['server']:9} {row['config']:34} tok/s {row['tok/s']:24} "
              f"TPOT p50 {row['TPOT p50']:22} accept {row['accept']} occupancy {row['occupancy']}")
    for line in summary_lines(result):
        print(f"  {line}")
    checks = goal_checks(result)
    print("\ngoals (issue 38):")
    for check in checks:
        print(f"  c={check['concurrency']:<3} schedule >= fixed: {check['schedule_vs_fixed'] or '-':7} "
              f"schedule >= none: {check['schedule_vs_none'] or '-':7} "
              f"|gap| <= {MAX_GAP:.0%}: {check['gap_within'] or '-'}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"db_url": db_url, "profile_id": profile_id, "seconds": seconds,
                                                    "validation": result.to_dict(), "goals": checks}, indent=2))


if __name__ == "__main__":
    main()
