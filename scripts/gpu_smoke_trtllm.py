"""GPU smoke test of autotune's TensorRT-LLM engine: the points of issue 13 on real hardware.

Run by scripts/gpu_smoke_trtllm.sh, or alone. Each check is one row of a markdown table (printed at
the end, written to OUT/table.md, pasteable into docs/trtllm.md) whose first column is the issue's
point:

1. step count: method none, generation steps = ``decoding_iter - 1`` per request, i.e. output tokens
   - requests (the PyTorch backend counts the context step in ``decoding_iter``);
2. sampling: one-model MTP / EAGLE-3 at temperature > 0 either sample (output differs from greedy)
   or are refused where the installed class has no ``allow_advanced_sampling``; identical output is a
   greedy fallback reported as sampled (FAIL);
3. stats per method: drafts counted from the iteration statistics, drafting time only for a
   two-model draft, memory = weights + KV pool below the device-wide figure;
4/5. every YAML (the adapter's ``yaml_config`` and, with ``--export-db``, each stored profile as
   ``autotune export --format trtllm`` writes it) loaded by ``trtllm-serve`` (healthy) and
   ``trtllm-bench`` (a report), for the installed version's line;
6. rebuild at a second, larger concurrency in the same worker with the first LLM's memory freed (the
   KV pool as large again, the device figure not grown), and one build per configuration;
7. step-cost timing with ``TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS`` (acceptance forced);
8. steady state (issue 38): each measurement kept C requests in flight over its steady window
   (occupancy >= 0.95). The runner itself refuses a stream whose ``token_ids_diff`` chunks do not add
   up to the request's output (autotune/engines/trtllm/streaming.py): such a release fails row 3.

Writes ``results.json`` and ``table.md`` to the output folder; exits 1 when a check failed, 2 when
the preflight refuses the target. A dry run works with the CPU stand-in:
``PYTHONPATH=tests/engines/trtllm/fake_trtllm python scripts/gpu_smoke_trtllm.py --target DIR
--probe-device cpu --trtllm-version 1.2 --skip-cli``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.trtllm.checks import check_config
from autotune.engines.trtllm.engine import TrtLlmEngine, runner_spec
from autotune.engines.trtllm.mapping import ONE_MODEL_KINDS, TWO_MODEL_KINDS, yaml_config
from autotune.engines.trtllm.stats import MEMORY_KIND
from autotune.engines.trtllm.versions import trtllm_rules
from autotune.engines.worker import EngineWorker, WorkerFailure
from autotune.errors import ConfigurationError
from autotune.workload import Workload, load_workload

SAMPLED_TEMPERATURE = 1.0
MEMORY_TOLERANCE = 0.1  # a rebuilt LLM's pool / device figure may differ this much from the first's
STEADY_OCCUPANCY = 0.95  # issue 38: a measurement keeps C in flight over its window


@dataclass(frozen=True)
class Check:
    """One row of the table: the issue's point, what was checked, PASS / FAIL / SKIP / INFO, details."""

    point: str
    check: str
    status: str
    detail: str


class Checks(list):
    """The checks so far, printed as they come."""

    def add(self, point: str, check: str, status: str | bool, detail: str) -> None:
        status = ("PASS" if status else "FAIL") if isinstance(status, bool) else status
        self.append(Check(point, check, status, detail))
        print(f"{status}: [{point}] {check} ({detail})", flush=True)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self if c.status == "FAIL"]


def markdown_table(checks: list[Check], version: str, line: str) -> str:
    """The checks as a markdown table for docs/trtllm.md (``|`` in a cell escaped)."""
    rows = [f"Smoke run, TensorRT-LLM {version} (rules of line {line}):", "",
            "| point | check | status | detail |", "| --- | --- | --- | --- |"]
    rows += ["| " + " | ".join(cell.replace("|", "\\|") for cell in (c.point, c.check, c.status, c.detail)) + " |"
             for c in checks]
    return "\n".join(rows) + "\n"


def main() -> int:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    version = args.trtllm_version or installed_version()
    line = version_line(version)
    checks = Checks()
    results: dict[str, Any] = {"tensorrt_llm": version, "line": line}
    try:
        status = run_checks(args, out, line, checks, results)
    finally:
        results["checks"] = [c.__dict__ for c in checks]
        (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
        table = markdown_table(checks, version, line)
        (out / "table.md").write_text(table)
        print("\n" + table)
    print(f"{len(checks) - len(checks.failed)} checks without failure, {len(checks.failed)} failed; {out / 'table.md'}")
    return status or (1 if checks.failed else 0)


def run_checks(args: argparse.Namespace, out: Path, line: str, checks: Checks, results: dict[str, Any]) -> int:
    """Every check in the issue's order; returns 2 when the preflight refuses the target."""
    workload = load_workload(args.workload).head(args.requests).with_max_tokens(args.max_tokens)
    yamls: list[tuple[str, Path]] = []
    if not args.skip_engine:
        configs = usable_configs(args, results)
        if configs is None:
            return 2
        greedy = check_methods(args, configs, workload, checks, results)
        check_sampling(args, configs, workload, greedy, checks)
        check_rebuild(args, workload, checks)
        check_timing(args, configs, workload, checks)
        for config, kind in configs:
            path = out / f"{config.label().replace('@', '-d')}.{line}.yaml"
            path.write_text(yaml.safe_dump(yaml_config(config, max(args.concurrencies), kind, version=line)))
            yamls.append((f"yaml_config {config.label()}", path))
    if args.export_db:
        yamls += exported_yamls(args.export_db, out, line)
    check_yamls(args, yamls, workload, out, checks)
    return 0


def usable_configs(args: argparse.Namespace, results: dict[str, Any]) -> list[tuple[EngineConfig, str | None]] | None:
    """(configuration, draft kind) for none, ngram, mtp (when the target has MTP modules) and each
    draft the preflight keeps; None when it refuses the target."""
    from autotune.engines.trtllm.checks import TRTLLM_SUPPORT
    from autotune.hardware import probe_hardware  # torch + NVML, only when run
    from autotune.models.kind import mtp_layers
    from autotune.preflight import PreflightSpace, preflight, usable_drafts

    hardware = probe_hardware(quick=True, device=args.probe_device)
    results["hardware"] = hardware.to_dict()
    space = PreflightSpace(args.concurrencies, args.seq_len, [args.depth])
    report = preflight(args.target, args.draft, TRTLLM_SUPPORT, hardware=hardware, space=space)
    results["preflight"] = report.to_dict()
    for check in report.checks:
        print(f"preflight {check.status:5} {check.name:15} {check.message}")
    if report.target_errors:
        return None
    drafts, rejected = usable_drafts(report)
    for draft, reason in rejected.items():
        print(f"leaving out draft {draft}: {reason}")
    folders = report.models  # the folders the preflight read
    configs = [EngineConfig("none"), EngineConfig("ngram", args.depth)]
    if mtp_layers(folders.get(args.target, "target").config):
        configs.append(EngineConfig("mtp", args.depth))
    configs += [EngineConfig("draft", args.depth, str(draft)) for draft in drafts]
    return [(config, check_config(config, args.target, folders) if config.method == "draft" else None)
            for config in configs]


def check_methods(args: argparse.Namespace, configs: list[tuple[EngineConfig, str | None]], workload: Workload,
                  checks: Checks, results: dict[str, Any]) -> dict[str, Measurement]:
    """Points 1, 3 and 6 (one build per configuration): every configuration at every concurrency,
    greedy. Returns the first concurrency's measurement per configuration label."""
    engine = TrtLlmEngine(args.target, max_batch_size=max(args.concurrencies), timeout_s=args.timeout_s)
    first: dict[str, Measurement] = {}
    measurements: list[dict[str, Any]] = []
    built = 0
    try:
        for config, kind in configs:
            engine.load(config)
            measured = False
            for concurrency in args.concurrencies:
                try:
                    m = engine.measure(workload, concurrency, temperature=0.0)
                except WorkerFailure as failure:
                    checks.add("3", f"{config.label()} c{concurrency}: measured", False, f"{failure.kind}: {failure.reason}")
                    break
                measured = True
                measurements.append(m.to_dict(include_outputs=True))
                first.setdefault(config.label(), m)
                check_measurement(config, kind, m, checks)
            built += measured
        checks.add("6", "one LLM build per configuration, reused across concurrency levels", engine.loads == built,
                   f"{engine.loads} builds for {built} configurations")
    finally:
        engine.close()
    results["measurements"] = measurements
    return first


def check_measurement(config: EngineConfig, kind: str | None, m: Measurement, checks: Checks) -> None:
    where = f"{config.label()} c{m.concurrency}"
    if config.method == "none":
        after_first = m.output_tokens - m.n_requests
        checks.add("1", f"{where}: generation steps = decoding_iter - 1 per request (= output tokens - requests)",
                   m.sequence_steps == after_first, f"sequence_steps {m.sequence_steps}, output tokens - requests {after_first}")
    else:
        checks.add("3", f"{where}: drafts counted from iteration stats",
                   m.drafted_tokens > 0 and m.accepted_tokens <= m.drafted_tokens and m.acceptance_length <= config.depth + 1,
                   f"drafted {m.drafted_tokens}, accepted {m.accepted_tokens}, length {m.acceptance_length:.2f}")
        timed = (kind or config.method) in TWO_MODEL_KINDS
        checks.add("3", f"{where}: drafting time {'measured (two-model)' if timed else 'not measured (None)'}",
                   (m.propose_time_s is not None and m.propose_time_s > 0) if timed else m.propose_time_s is None,
                   f"propose_time_s {m.propose_time_s}")
    checks.add("8", f"{where}: {m.concurrency} requests in flight over the steady window (occupancy >= {STEADY_OCCUPANCY})",
               bool(m.steady) and (m.occupancy or 0.0) >= STEADY_OCCUPANCY,
               f"occupancy {m.occupancy or 0.0:.3f} over {m.window_s or 0.0:.3f} s of {m.wall_time_s:.3f} s, "
               f"{m.window_requests} of {m.n_requests} requests finished in it")
    device = m.device_memory_bytes or 0
    checks.add("3", f"{where}: memory = weights + KV pool, device-wide figure apart",
               m.memory_kind == MEMORY_KIND and 0 < m.peak_memory_bytes <= device,
               f"{m.peak_memory_bytes / 2**30:.2f} GiB configured, {device / 2**30:.2f} GiB device-wide")


def check_sampling(args: argparse.Namespace, configs: list[tuple[EngineConfig, str | None]], workload: Workload,
                   greedy: dict[str, Measurement], checks: Checks) -> None:
    """Point 2: one-model kinds at temperature > 0 sample or are refused; never greedy reported as sampled."""
    one_model = [(c, k) for c, k in configs if (k or c.method) in ONE_MODEL_KINDS and c.label() in greedy]
    if not one_model:
        checks.add("2", "one-model MTP / EAGLE-3 at temperature > 0", "SKIP", "no MTP target and no EAGLE-3 draft given")
        return
    engine = TrtLlmEngine(args.target, max_batch_size=max(args.concurrencies), timeout_s=args.timeout_s)
    try:
        for config, _kind in one_model:
            reference = greedy[config.label()]
            engine.load(config)
            try:
                sampled = engine.measure(workload, reference.concurrency, temperature=SAMPLED_TEMPERATURE, seed=1)
            except WorkerFailure as failure:
                checks.add("2", f"{config.label()} at temperature {SAMPLED_TEMPERATURE}: refused (no allow_advanced_sampling)",
                           failure.kind == "unsupported" and "decodes greedily" in failure.reason, failure.reason)
                continue
            checks.add("2", f"{config.label()} at temperature {SAMPLED_TEMPERATURE}: sampled, not a greedy fallback",
                       sampled.outputs != reference.outputs,
                       "output differs from greedy" if sampled.outputs != reference.outputs else "output equals greedy")
    finally:
        engine.close()


def check_rebuild(args: argparse.Namespace, workload: Workload, checks: Checks) -> None:
    """Point 6: an LLM built for the first concurrency is rebuilt for a larger one in the same worker,
    the first one's memory freed: the KV pool as large again, the device-wide figure not grown."""
    small, large = min(args.concurrencies), max(args.concurrencies)
    if small == large:
        checks.add("6", "rebuild at a second concurrency", "SKIP", "give two concurrency levels")
        return
    engine = TrtLlmEngine(args.target, max_batch_size=None, timeout_s=args.timeout_s)
    try:
        engine.load(EngineConfig("none"))
        before = engine.measure(workload, small, temperature=0.0)
        after = engine.measure(workload, large, temperature=0.0)
        rebuilt = (engine.loads, engine.worker_starts) == (2, 1)
        freed = (after.peak_memory_bytes >= (1 - MEMORY_TOLERANCE) * before.peak_memory_bytes
                 and (after.device_memory_bytes or 0) <= (1 + MEMORY_TOLERANCE) * (before.device_memory_bytes or 0))
        checks.add("6", f"rebuild c{small} -> c{large} in one worker, memory freed", rebuilt and freed,
                   f"{engine.loads} builds in {engine.worker_starts} worker(s); configured "
                   f"{before.peak_memory_bytes / 2**30:.2f} -> {after.peak_memory_bytes / 2**30:.2f} GiB, device "
                   f"{(before.device_memory_bytes or 0) / 2**30:.2f} -> {(after.device_memory_bytes or 0) / 2**30:.2f} GiB")
    except WorkerFailure as failure:
        checks.add("6", f"rebuild c{small} -> c{large} in one worker", False, f"{failure.kind}: {failure.reason}")
    finally:
        engine.close()


def check_timing(args: argparse.Namespace, configs: list[tuple[EngineConfig, str | None]], workload: Workload,
                 checks: Checks) -> None:
    """Point 7: step costs timed with forced acceptance (the runner refuses unforced acceptance)."""
    worker = EngineWorker(runner_spec(args.target, max_batch_size=max(args.concurrencies)), timeout_s=args.timeout_s)
    try:
        points = worker.time_steps([c for c, _ in configs], workload, list(args.concurrencies), steps=4, rounds=1)
    except WorkerFailure as failure:
        checks.add("7", "step costs at forced acceptance", False, f"{failure.kind}: {failure.reason}")
        return
    for point in points:
        label = EngineConfig(point["method"], point["depth"], point["draft"]).label()
        step_ms = (point["propose_s"] + point["verify_s"]) * 1e3
        checks.add("7", f"{label} c{point['concurrency']}: step cost at forced acceptance", point["steps"] > 0,
                   f"{step_ms:.2f} ms/step over {point['steps']} steps, {point['drafted_per_step']:.2f} drafted per row")


def exported_yamls(db_url: str, out: Path, line: str) -> list[tuple[str, Path]]:
    """Every stored profile of ``db_url`` as ``autotune export --format trtllm --trtllm-version LINE`` writes it."""
    from autotune.serving import write_export
    from autotune.profiles import list_profiles

    files = []
    for profile in list_profiles(db_url):
        path = write_export(db_url, profile.id, "trtllm", output=out / f"profile-{profile.id}.{line}.trtllm.yaml",
                            force=True, trtllm_version=line)
        files.append((f"autotune export {profile.id} ({profile.label()})", path))
    return files


def check_yamls(args: argparse.Namespace, yamls: list[tuple[str, Path]], workload: Workload, out: Path,
                checks: Checks) -> None:
    """Points 4 and 5: each YAML loaded by trtllm-serve (healthy) and trtllm-bench (a report)."""
    missing = [tool for tool in ("trtllm-serve", "trtllm-bench") if shutil.which(tool) is None]
    if args.skip_cli or missing:
        reason = "--skip-cli" if args.skip_cli else f"{', '.join(missing)} not on PATH"
        for name, path in yamls:
            checks.add("4/5", f"{name}: trtllm-serve and trtllm-bench load {path.name}", "SKIP", reason)
        return
    dataset = out / "trtllm-bench-dataset.jsonl"
    dataset.write_text("".join(json.dumps({"task_id": i, "prompt": r.prompt, "output_tokens": r.max_tokens}) + "\n"
                               for i, r in enumerate(workload.requests)))
    for name, path in yamls:
        ok, detail = serve(args.target, path, args.serve_timeout_s)
        checks.add("4/5", f"{name}: trtllm-serve loads {path.name}", ok, detail)
        ok, detail = bench(args.target, path, dataset, out / f"{path.stem}.bench.json", min(args.concurrencies),
                           args.serve_timeout_s)
        checks.add("4/5", f"{name}: trtllm-bench runs {path.name}", ok, detail)


def serve(target: str, config: Path, timeout_s: float) -> tuple[bool, str]:
    """Start trtllm-serve with ``config``; healthy within ``timeout_s`` or not, then stop it."""
    port = free_port()
    command = ["trtllm-serve", target, "--backend", "pytorch", "--port", str(port), "--extra_llm_api_options", str(config)]
    log = config.with_suffix(".serve.log")
    with open(log, "w", encoding="utf-8") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:  # noqa: S310 - local
                    if response.status == 200:
                        return True, "healthy"
            except OSError:
                time.sleep(0.5)  # a stand-in server is healthy within seconds; a GPU one takes minutes
        return False, f"exit {process.poll()} or no health within {timeout_s:.0f} s: {last_line(log)}"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def bench(target: str, config: Path, dataset: Path, report: Path, concurrency: int, timeout_s: float) -> tuple[bool, str]:
    """One trtllm-bench throughput run with ``config``; a report file or not."""
    command = ["trtllm-bench", "--model", Path(target).name, "--model_path", target, "throughput", "--backend", "pytorch",
               "--dataset", str(dataset), "--extra_llm_api_options", str(config), "--concurrency", str(concurrency),
               "--streaming", "--report_json", str(report)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return False, f"no result within {timeout_s:.0f} s"
    if done.returncode != 0 or not report.exists():
        return False, f"exit {done.returncode}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
    return True, f"report {report.name}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "(no output)"


def installed_version() -> str:
    """The installed TensorRT-LLM release, from its package metadata (importing it needs the GPU
    driver and belongs in the worker only)."""
    for name in ("tensorrt_llm", "tensorrt-llm"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    raise SystemExit("TensorRT-LLM is not installed (no package metadata); give --trtllm-version for a stand-in")


def version_line(version: str) -> str:
    """The rules line of a release: its own (1.0, 1.2) where autotune has one, else main (releases
    after 1.2 were not read apart; the smoke run's YAML rows say whether main's rules hold)."""
    try:
        return trtllm_rules(version).version
    except ConfigurationError:
        return "main"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="Hugging Face model folder of the target")
    parser.add_argument("--draft", action="append", default=[], help="draft model or EAGLE-3 head folder (repeatable)")
    parser.add_argument("--out", default="trtllm-smoke")
    parser.add_argument("--workload", default=None, help="JSONL workload (default: the built-in one)")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=512, help="tokens per sequence assumed by the preflight")
    parser.add_argument("--concurrency", dest="concurrencies", type=int, nargs="+", default=[1, 4], help="two or more: the rebuild check")
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--serve-timeout-s", type=float, default=900.0, help="per trtllm-serve / trtllm-bench run")
    parser.add_argument("--probe-device", default="cuda", help="cpu only for a dry run with a stand-in tensorrt_llm")
    parser.add_argument("--trtllm-version", default=None, help="default: the installed release (package metadata)")
    parser.add_argument("--export-db", default=None, metavar="URL",
                        help="also load every stored profile of this database as autotune export writes it")
    parser.add_argument("--skip-engine", action="store_true", help="only the YAML checks (with --export-db)")
    parser.add_argument("--skip-cli", action="store_true", help="do not start trtllm-serve / trtllm-bench")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
