"""A default study on a machine other processes keep busy, against the same study on the idle machine.

Issue 40, item 4: under two busy-loop processes on a 2-core machine a default study should finish
with a confirmed profile within 3x its idle wall time, and recommend what the idle study recommends
(tied: paired rounds on the idle machine, the decision rule's 3 % practical margin). This runs the
idle study (or reads a finished one back with ``--idle-db``: resuming a finished study measures
nothing), then the same study with ``--loops`` busy loops running (``python -c "while True: pass"``,
stopped afterwards whatever happens), then the tie check, and prints wall times, the screening
passes measured again, the rows marked loaded, both recommendations and the verdict::

    python bench/bench_busy_machine.py                        # seed 1, 2 loops
    python bench/bench_busy_machine.py --idle-db sqlite:////tmp/bench-default-x/tune.db --idle-study NAME

Figures, not pass/fail: the exit code is 0 either way.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from bench_model_guided import Run, execute, tie

from autotune.analysis.decision import PRACTICAL_MARGIN
from autotune.search.request import tune_options
from autotune.search.screening import LOADED_ATTR, RERUNS_ATTR

MAX_SLOWDOWN = 3.0  # issue 40: within 3x the idle wall time


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--loops", type=int, default=2, help="busy-loop processes during the loaded study")
    parser.add_argument("--idle-db", help="a database holding the finished idle study (default: run it)")
    parser.add_argument("--idle-study", default="idle", help="the idle study's name in --idle-db")
    parser.add_argument("--idle-seconds", type=float, help="the idle study's wall time, when read back from --idle-db")
    return parser.parse_args()


def fresh_db() -> str:
    return f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-busy-')) / 'tune.db'}"


def busy_loops(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def describe(run: Run) -> str:
    screened = run.screening
    reruns = sum(int(row.extra.get(RERUNS_ATTR, 0)) for row in screened)
    loaded = sum(bool(row.extra.get(LOADED_ATTR)) for row in screened)
    estimate = run.result.profile.row.estimate("tokens_per_s")
    return (f"{run.name:6} {run.seconds:6.0f} s  {len(screened):3} passes kept, {reruns:2} measured again, "
            f"{loaded:3} loaded  -> {run.choice.label} {estimate.value:.0f} tok/s")


def main() -> None:
    args = parse_args()
    # The options `autotune tune --seed S` passes (one conversion for the CLI and this bench).
    base = tune_options({"seed": args.seed, "study": "busy"}, fresh_db())
    idle = execute(Run("idle", tune_options({"seed": args.seed, "study": args.idle_study}, args.idle_db or fresh_db())))
    if args.idle_seconds:
        idle.seconds = args.idle_seconds
    loops = busy_loops(args.loops)
    try:
        busy = execute(Run("busy", base))
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    tied, how = tie(busy, idle, replace(base, db_url=fresh_db()))
    print()
    print(describe(idle))
    print(describe(busy))
    for line in busy.result.summary_lines():
        print(f"  {line}")
    ratio = f"{busy.seconds / idle.seconds:.2f}" if idle.seconds > 1 else "unknown (read back: give --idle-seconds)"
    print(f"\nbusy / idle wall time: {ratio} (goal <= {MAX_SLOWDOWN:g}); "
          f"recommendation tied with the idle one: {'yes' if tied else 'NO'} ({how}; "
          f"practical margin {PRACTICAL_MARGIN:.0%})")


if __name__ == "__main__":
    main()
