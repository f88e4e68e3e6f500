"""Speedup of every speculative configuration over the autoregressive baseline (figures, not a test).

Every method x depth x concurrency is measured alternately with the baseline (method none) at the
same concurrency, in the same run; next to each measured speedup stand two predictions from the
runs' own counters:

    simple:  S = Omega / (gamma * c + 1)                  (Leviathan et al.; verify costs one step)
    full:    S = Omega * T_T / (gamma * T_D + T_V)         (MagicDec: verify measured too)

with Omega = (1 - alpha^(gamma+1)) / (1 - alpha), alpha = the measured per-position acceptance
(``acceptance_alpha``), T_T = the baseline's time per target step, T_D = drafting time per step
and draft position, c = T_D / T_T, T_V = the configuration's verification time per step. Both
predict the decode phase; the measured speedup is end to end (prefill included).

    python bench/bench_speculation.py                                  # everything: slow on a CPU
    python bench/bench_speculation.py --methods draft,mtp --depths 1-4 --concurrency 1 --prompts 4
    python bench/bench_speculation.py --target my.safetensors --draft d.safetensors --out bench.md
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from autotune.engines.base import SPECULATIVE_METHODS, EngineConfig, Measurement
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.errors import AutotuneError
from autotune.workload import Workload, load_workload


def omega(alpha: float, depth: int) -> float:
    """Expected tokens per target pass for i.i.d. acceptance alpha and ``depth`` drafts."""
    if alpha >= 1.0:
        return depth + 1.0
    return (1.0 - alpha ** (depth + 1)) / (1.0 - alpha)


@dataclass
class Row:
    method: str
    depth: int
    concurrency: int
    tokens_per_s: float
    baseline_tokens_per_s: float
    alpha: float | None
    acceptance_length: float
    cost_ratio: float  # c = T_D / T_T
    verify_ratio: float  # T_V / T_T
    predicted_simple: float
    predicted_full: float

    @property
    def speedup(self) -> float:
        return self.tokens_per_s / self.baseline_tokens_per_s

    @property
    def error_simple(self) -> float:
        return self.speedup / self.predicted_simple - 1.0

    @property
    def error_full(self) -> float:
        return self.speedup / self.predicted_full - 1.0


def step_time(m: Measurement, total_s: float) -> float:
    return total_s / m.target_passes if m.target_passes else 0.0


def compare(config: EngineConfig, m: Measurement, baseline: Measurement) -> Row:
    t_target = step_time(baseline, baseline.verify_time_s)  # T_T
    t_draft = step_time(m, m.propose_time_s) / config.depth  # T_D per draft position
    t_verify = step_time(m, m.verify_time_s)  # T_V
    alpha = m.acceptance_alpha if m.acceptance_alpha is not None else 0.0
    expected = omega(alpha, config.depth)
    c = t_draft / t_target
    return Row(
        method=config.method,
        depth=config.depth,
        concurrency=m.concurrency,
        tokens_per_s=m.tokens_per_s,
        baseline_tokens_per_s=baseline.tokens_per_s,
        alpha=m.acceptance_alpha,
        acceptance_length=m.acceptance_length,
        cost_ratio=c,
        verify_ratio=t_verify / t_target,
        predicted_simple=expected / (config.depth * c + 1.0),
        predicted_full=expected * t_target / (config.depth * t_draft + t_verify),
    )


HEADER = ["method", "depth", "batch", "tok/s", "base tok/s", "speedup", "alpha", "acc len", "c", "T_V/T_T", "pred", "err", "pred full", "err full"]


def cells(row: Row) -> list[str]:
    alpha = "-" if row.alpha is None else f"{row.alpha:.2f}"
    return [
        row.method, str(row.depth), str(row.concurrency), f"{row.tokens_per_s:.1f}", f"{row.baseline_tokens_per_s:.1f}",
        f"{row.speedup:.2f}x", alpha, f"{row.acceptance_length:.2f}", f"{row.cost_ratio:.3f}", f"{row.verify_ratio:.2f}",
        f"{row.predicted_simple:.2f}x", f"{row.error_simple:+.0%}", f"{row.predicted_full:.2f}x", f"{row.error_full:+.0%}",
    ]


def markdown(rows: list[Row], title: str) -> str:
    lines = [f"# {title}", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells(row)) + " |" for row in rows]
    lines += [
        "",
        "speedup = tok/s / base tok/s (end to end, same concurrency, same run); pred = Omega/(gamma c + 1); "
        "pred full = Omega T_T/(gamma T_D + T_V); err = speedup / pred - 1. The n-gram proposer drafts "
        "nothing where no n-gram matches, so Omega(alpha, gamma) overestimates its tokens per pass.",
    ]
    return "\n".join(lines) + "\n"


def measure_pair(
    engine: EmbeddedEngine, config: EngineConfig, workload: Workload, concurrency: int, repeats: int
) -> tuple[Measurement, Measurement]:
    """(baseline, config) measured alternately ``repeats`` times, the fastest run of each kept.

    Alternating puts both under the same machine load (a shared CPU's load drifts within minutes);
    greedy runs repeat with identical outputs and counters, so only timings vary.
    """
    baselines, runs = [], []
    for _ in range(max(1, repeats)):
        engine.load(EngineConfig("none"))
        baselines.append(engine.measure(workload, concurrency))
        engine.load(config)
        runs.append(engine.measure(workload, concurrency))
    return max(baselines, key=lambda m: m.tokens_per_s), max(runs, key=lambda m: m.tokens_per_s)


def parse_ints(text: str) -> list[int]:
    """'1-4' -> [1, 2, 3, 4]; '1,2,8' -> [1, 2, 8]."""
    values: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        values += list(range(int(low), int(high or low) + 1))
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default=",".join(SPECULATIVE_METHODS), help="comma-separated subset of mtp,draft,ngram")
    parser.add_argument("--depths", default="1-8", help="e.g. 1-8 or 1,2,4")
    parser.add_argument("--concurrency", dest="concurrencies", default="1,2,4,8")
    parser.add_argument("--prompts", type=int, default=None, help="use only the first N prompts of the workload")
    parser.add_argument("--max-tokens", type=int, default=None, help="cap every request's max_tokens")
    parser.add_argument("--workload", default=None, help="JSONL workload (default: the built-in one)")
    parser.add_argument("--target", default=None, help="target model file (default: built-in)")
    parser.add_argument("--draft", default=None, help="draft model file for method draft (default: built-in)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--repeats", type=int, default=2, help="measure each pair N times, keep the fastest of each")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    parser.add_argument("--json", type=Path, default=None, help="write rows and raw measurements as JSON here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    try:
        workload = load_workload(args.workload)
        if args.prompts:
            workload = workload.head(args.prompts)
        if args.max_tokens:
            workload = workload.with_max_tokens(args.max_tokens)
        engine = EmbeddedEngine(target=args.target, device=args.device)
        methods = [m for m in args.methods.split(",") if m]
        rows, raw = [], []
        print(" | ".join(HEADER), flush=True)
        for concurrency in parse_ints(args.concurrencies):
            for method in methods:
                for depth in parse_ints(args.depths):
                    config = EngineConfig(method, depth, args.draft if method == "draft" else None)
                    baseline, measurement = measure_pair(engine, config, workload, concurrency, args.repeats)
                    raw += [baseline.to_dict(), measurement.to_dict()]
                    rows.append(compare(config, measurement, baseline))
                    print(" | ".join(cells(rows[-1])), flush=True)
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    title = f"Speculative decoding speedup, {workload.label}, {len(workload.requests)} prompts, device {args.device}"
    if args.out:
        args.out.write_text(markdown(rows, title), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps({"rows": [r.__dict__ for r in rows], "measurements": raw}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
