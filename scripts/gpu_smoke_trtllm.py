"""GPU smoke test of autotune's TensorRT-LLM engine (run by scripts/gpu_smoke_trtllm.sh).

Steps: probe the GPU, preflight the target and drafts, then a small grid (none, ngram, mtp when the
target has MTP modules, draft-target / EAGLE-3 for each usable draft) at a few batch sizes through
TrtLlmEngine, checking what the CPU tests could only assume about real TensorRT-LLM:

* the LLM is built once per configuration and reused across batch sizes;
* ``decoding_iter`` counts generation iterations after the first token (method none: sequence
  steps == output tokens - requests), which autotune's acceptance length relies on;
* speculative runs report counted drafts (iteration stats arrive through get_stats_async);
* greedy speculative output matches the baseline (reported, not failed: numerics may flip ties).

Writes ``results.json`` (probe, preflight, measurements, checks) and the YAML of every measured
configuration to the output folder; exits 1 when a check failed, 2 when preflight refuses the target.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.trtllm.checks import check_config
from autotune.engines.trtllm.engine import TrtLlmEngine
from autotune.engines.trtllm.mapping import yaml_config
from autotune.engines.worker import WorkerFailure
from autotune.preflight import preflight, usable_drafts
from autotune.preflight.architecture import mtp_layers
from autotune.preflight.models import read_config
from autotune.workload import load_workload


def main() -> int:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"checks": []}

    from autotune.hardware import probe_hardware  # torch + NVML, only when run

    hardware = probe_hardware(quick=True, device=args.probe_device)
    results["hardware"] = hardware.to_dict()
    print(f"GPU: {hardware.name}, {hardware.memory_total_bytes / 2**30:.0f} GiB")

    workload = load_workload(args.workload).head(args.requests).with_max_tokens(args.max_tokens)
    report = preflight(args.target, args.draft, hardware=hardware, batch_sizes=args.batch_sizes,
                       seq_len=args.seq_len, depths=[args.depth])
    results["preflight"] = report.to_dict()
    for check in report.checks:
        print(f"preflight {check.status:5} {check.name:15} {check.message}")
    if report.target_errors:
        write(out, results)
        return 2
    drafts, rejected = usable_drafts(report)
    for draft, reason in rejected.items():
        print(f"leaving out draft {draft}: {reason}")

    configs = [EngineConfig("none"), EngineConfig("ngram", args.depth)]
    if mtp_layers(read_config(args.target, "target")):
        configs.append(EngineConfig("mtp", args.depth))
    configs += [EngineConfig("draft", args.depth, str(draft)) for draft in drafts]

    engine = TrtLlmEngine(args.target, max_batch_size=max(args.batch_sizes), timeout_s=args.timeout_s)
    measurements: list[dict[str, Any]] = []
    baseline: dict[int, Measurement] = {}
    builds = 0
    try:
        for config in configs:
            kind = check_config(config, args.target)
            (out / f"{config.label().replace('@', '-d')}.yaml").write_text(
                yaml.safe_dump(yaml_config(config, max(args.batch_sizes), kind if config.method == "draft" else None)))
            engine.load(config)
            measured_any = False
            for batch_size in args.batch_sizes:
                try:
                    m = engine.measure(workload, batch_size)
                except WorkerFailure as failure:
                    print(f"{config.label():12} batch {batch_size:3}: FAILED ({failure.kind}: {failure.reason})")
                    measurements.append({"config": config.label(), "batch_size": batch_size, "failure": str(failure)})
                    break
                measured_any = True
                measurements.append(m.to_dict(include_outputs=True))
                print(f"{config.label():12} batch {batch_size:3}: {m.tokens_per_s:8.1f} tok/s  TPOT p50 "
                      f"{m.tpot_ms_p50 or 0:6.2f} ms  acceptance rate {m.acceptance_rate}  length {m.acceptance_length:.2f}")
                verify(results, config, m, baseline)
            builds += measured_any
        record(results, "one LLM build per configuration, reused across batch sizes", engine.loads == builds,
               f"{engine.loads} builds for {builds} configurations")
    finally:
        engine.close()
    results["measurements"] = measurements
    write(out, results)
    failed = [c for c in results["checks"] if c["status"] == "FAIL"]
    print(f"{len(results['checks']) - len(failed)} checks passed, {len(failed)} failed; results in {out / 'results.json'}")
    return 1 if failed else 0


def verify(results: dict[str, Any], config: EngineConfig, m: Measurement, baseline: dict[int, Measurement]) -> None:
    where = f"{config.label()} batch {m.batch_size}"
    record(results, f"{where}: every request produced tokens", m.output_tokens >= m.n_requests, f"{m.output_tokens} tokens")
    if config.method == "none":
        baseline[m.batch_size] = m
        # Without speculation each generation iteration adds one token after the first.
        after_first = m.output_tokens - m.n_requests
        record(results, f"{where}: decoding_iter counts generation iterations", m.sequence_steps == after_first,
               f"sequence_steps {m.sequence_steps}, output tokens - requests {after_first}")
        return
    counted = m.drafted_tokens > 0 and m.accepted_tokens <= m.drafted_tokens
    record(results, f"{where}: drafts counted from iteration stats", counted,
           f"drafted {m.drafted_tokens}, accepted {m.accepted_tokens}")
    reference = baseline.get(m.batch_size)
    if reference is not None and reference.outputs is not None and m.outputs is not None:
        same = m.outputs == reference.outputs
        results["checks"].append({"check": f"{where}: greedy output equals the baseline", "status": "INFO",
                                  "detail": "identical" if same else "differs (numerics can flip near-ties)"})


def record(results: dict[str, Any], name: str, passed: bool, detail: str) -> None:
    status = "PASS" if passed else "FAIL"
    results["checks"].append({"check": name, "status": status, "detail": detail})
    print(f"{status}: {name} ({detail})")


def write(out: Path, results: dict[str, Any]) -> None:
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="Hugging Face model folder of the target")
    parser.add_argument("--draft", action="append", default=[], help="draft model folder (repeatable)")
    parser.add_argument("--out", default="trtllm-smoke")
    parser.add_argument("--workload", default=None, help="JSONL workload (default: the built-in one)")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=512, help="tokens per sequence assumed by the preflight")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--probe-device", default="cuda", help="cpu only for a dry run with a stand-in tensorrt_llm")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
