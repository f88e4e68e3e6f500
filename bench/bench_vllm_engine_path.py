"""Where the study's vLLM engine path lost to ``vllm serve``, and whether the new path matches it.

Issue 38, item 2: at concurrency 1 ``vllm serve`` decoded 292 tok/s where the study's offline engine
decoded 139-179 for the same model (docs/benchmarks.md, "Served schedules on vLLM"). This bench
builds every path at once in this process, then runs them in alternating rounds (A B C ..., then
... C B A, so that a drift of the shared machine cancels out of the pairs) on the same request
stream (the built-in workload, cycled to >= 4 x C requests, greedy, EOS honoured):

* ``llmengine:MODE:DTYPE``: the old path, ``LLMEngine.add_request`` / ``step`` driven from the
  caller's loop (vLLM 0.32.0 ``vllm/v1/engine/llm_engine.py``), as VllmRunner did before;
* ``asyncllm:MODE:DTYPE``: ``AsyncLLM`` (``vllm/v1/engine/async_llm.py``), the engine client of vLLM's
  API server, in this process, C client tasks streaming ``generate()`` (the API server without HTTP);
* ``runner:MODE:DTYPE``: the new path, :class:`autotune.engines.vllm.runner.VllmRunner`: a real ``vllm
  serve`` on loopback driven by our load generator (:mod:`autotune.engines.vllm.client`), its
  steady-window figure as a study stores it;
* ``bench:MODE:DTYPE``: ``vllm serve`` with the exported script's limits driven by ``vllm bench
  serve`` (its ``output_throughput``: output tokens over the whole run), the reference the issue names.

MODE is ``eager`` (``enforce_eager``) or ``compiled`` (vLLM's default); DTYPE ``float32`` (the
built-in checkpoints' own) or ``auto`` (what ``vllm serve`` picks: bfloat16 on a CPU with AVX-512
BF16). Two output tokens/s per run: over the steady window (:mod:`autotune.analysis.steady`, what a
study stores) and over the whole run (first send to last token, ``vllm bench serve``'s
``output_throughput``); for ``bench`` both come from its ``--save-detailed`` per-request times (one
token per streamed chunk: method none), so every path is measured both ways. The window leaves out
the first request's time to first token, which is long after an idle pause (~0.3 s here), and the
drain after the last C requests. Every figure gets its 95 % interval over the rounds, every path its
paired ratio to the first one and to ``bench`` where it ran. ``--profile DIR`` also records each in-process path (and each server) with py-spy for
one extra run (``py-spy record --subprocesses``, on-CPU samples only: the caller, vLLM's engine core
and its worker), writing collapsed stacks to DIR. Runs in the vLLM venv::

    .venv-vllm/bin/autotune models export-hf --out /tmp/hf
    .venv-vllm/bin/python bench/bench_vllm_engine_path.py --target /tmp/hf/autotune-byte-target --rounds 5 \\
        --paths llmengine:eager:float32,llmengine:compiled:auto,asyncllm:compiled:auto,runner:compiled:auto,bench:compiled:auto
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from autotune.analysis.intervals import mean_interval, paired_ratio_interval
from autotune.analysis.steady import RequestResult, request_stream, window_figures
from autotune.engines.base import EngineConfig
from autotune.engines.vllm.memory import engine_memory
from autotune.models.folder import read_model
from autotune.engines.vllm.server import free_port
from autotune.validation.install import path_with_vllm
from autotune.workload import Workload, builtin_workload

MAX_NUM_BATCHED_TOKENS = 8192  # what the exported script sets (autotune/serving/vllm.py)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the exported built-in target folder")
    parser.add_argument("--paths", required=True, help="comma-separated KIND:MODE:DTYPE (module doc)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", help="record one extra run of each path with py-spy into this folder")
    parser.add_argument("--json", dest="json_path", help="also write the figures to this JSON file")
    return parser.parse_args()


class OldEngine:
    """The path VllmRunner measured before: LLMEngine driven step by step from the caller's loop."""

    def __init__(self, target: str, eager: bool, dtype: str, concurrency: int, kv_bytes: int) -> None:
        from vllm.engine.arg_utils import EngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.llm_engine import LLMEngine

        self.engine = LLMEngine.from_engine_args(EngineArgs(
            model=target, tokenizer=target, max_num_seqs=concurrency, enforce_eager=eager, dtype=dtype, seed=0,
            disable_log_stats=False, kv_cache_memory_bytes=kv_bytes), usage_context=UsageContext.LLM_CLASS)
        self.ids = 0

    def run(self, workload: Workload, concurrency: int) -> tuple[float, float]:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        pending = list(enumerate(workload.requests))
        in_flight: dict[str, int] = {}
        sent = [0.0] * len(pending)
        tokens: list[list[int]] = [[] for _ in pending]
        times: list[list[float]] = [[] for _ in pending]
        start = time.perf_counter()
        while pending or in_flight:
            while pending and len(in_flight) < concurrency:
                index, request = pending.pop(0)
                params = SamplingParams(max_tokens=request.max_tokens, temperature=0.0,
                                        output_kind=RequestOutputKind.DELTA, detokenize=False)
                sent[index] = time.perf_counter() - start
                self.engine.add_request(f"r{self.ids}", request.prompt, params)
                in_flight[f"r{self.ids}"] = index
                self.ids += 1
            for output in self.engine.step():
                now = time.perf_counter() - start
                index = in_flight[output.request_id]
                new = list(output.outputs[0].token_ids)
                tokens[index] += new
                times[index] += [now] * len(new)
                if output.finished:
                    del in_flight[output.request_id]
        return both_figures([RequestResult(t, s, ts, ts[-1]) for t, s, ts in zip(tokens, sent, times)], concurrency)

    def close(self) -> None:
        self.engine.engine_core.shutdown()


class InProcess:
    """AsyncLLM in this process, C client tasks each streaming the next request when its own is done."""

    def __init__(self, target: str, eager: bool, dtype: str, concurrency: int, kv_bytes: int) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.async_llm import AsyncLLM

        self.loop = asyncio.new_event_loop()
        arguments = AsyncEngineArgs(model=target, tokenizer=target, max_num_seqs=concurrency, enforce_eager=eager,
                                    dtype=dtype, seed=0, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                                    kv_cache_memory_bytes=kv_bytes)

        async def build() -> Any:  # on the loop, where AsyncLLM's output handler will run
            return AsyncLLM.from_engine_args(arguments, usage_context=UsageContext.OPENAI_API_SERVER)

        self.engine = self.loop.run_until_complete(build())
        self.ids = 0

    def run(self, workload: Workload, concurrency: int) -> tuple[float, float]:
        return both_figures(self.loop.run_until_complete(self._stream(workload, concurrency)), concurrency)

    async def _stream(self, workload: Workload, concurrency: int) -> list[RequestResult]:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        start = time.perf_counter()
        results: list[RequestResult | None] = [None] * len(workload.requests)
        queue = iter(enumerate(workload.requests))

        async def client() -> None:
            for index, request in queue:
                sent, tokens, times = time.perf_counter() - start, [], []
                self.ids += 1
                params = SamplingParams(max_tokens=request.max_tokens, temperature=0.0,
                                        output_kind=RequestOutputKind.DELTA)
                async for output in self.engine.generate(request.prompt, params, f"a{self.ids}"):
                    new = list(output.outputs[0].token_ids)
                    tokens += new
                    times += [time.perf_counter() - start] * len(new)
                results[index] = RequestResult(tokens, sent, times, times[-1])

        await asyncio.gather(*(client() for _ in range(concurrency)))
        return [result for result in results if result is not None]

    def close(self) -> None:
        self.engine.shutdown()


class NewRunner:
    """The path a study measures now: VllmRunner's steady-window figure."""

    def __init__(self, target: str, eager: bool, dtype: str, concurrency: int) -> None:
        from autotune.engines.vllm.runner import VllmRunner

        self.runner = VllmRunner(target, max_batch_size=concurrency, enforce_eager=eager, dtype=dtype,
                                 models=[read_model(target, "target")])
        self.runner.load(EngineConfig("none"))

    def run(self, workload: Workload, concurrency: int) -> tuple[float, float]:
        measured = self.runner.measure(workload, concurrency, 0.0)
        return measured.tokens_per_s, measured.output_tokens / measured.wall_time_s

    def close(self) -> None:
        self.runner.close()


class Benched:
    """``vllm serve`` on loopback with the exported script's limits, driven by ``vllm bench serve``."""

    def __init__(self, target: str, eager: bool, dtype: str, concurrency: int, kv_bytes: int, folder: Path) -> None:
        self.path = path_with_vllm(Path(sys.executable), folder / "bin")
        self.port, self.folder = free_port(), folder
        command = ["vllm", "serve", target, "--host", "127.0.0.1", "--port", str(self.port), "--dtype", dtype,
                   "--max-num-seqs", str(concurrency), "--max-num-batched-tokens", str(MAX_NUM_BATCHED_TOKENS),
                   f"--kv-cache-memory-bytes={kv_bytes}", "--seed", "0", *(["--enforce-eager"] if eager else [])]
        self.log = folder / f"serve-{self.port}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, env={**os.environ, "PATH": self.path}, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5)
                break
            except OSError:
                if self.process.poll() is not None:
                    raise SystemExit(f"vllm serve exited: see {self.log}") from None
                time.sleep(1)
        models = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models").read())
        self.model = models["data"][0]["id"]

    def run(self, workload: Workload, concurrency: int) -> tuple[float, float]:
        dataset = self.folder / "dataset.jsonl"
        dataset.write_text("".join(json.dumps({"prompt": r.prompt, "output_tokens": r.max_tokens}) + "\n"
                                   for r in workload.requests))
        result = self.folder / f"bench-{time.monotonic_ns()}.json"
        subprocess.run(["vllm", "bench", "serve", "--backend", "vllm", "--base-url", f"http://127.0.0.1:{self.port}",
                        "--endpoint", "/v1/completions", "--model", self.model, "--dataset-name", "custom",
                        "--dataset-path", str(dataset), "--custom-output-len", "-1", "--skip-chat-template",
                        "--num-prompts", str(len(workload.requests)), "--max-concurrency", str(concurrency),
                        "--request-rate", "inf", "--temperature", "0", "--disable-tqdm", "--save-result", "--save-detailed",
                        "--result-dir", str(result.parent), "--result-filename", result.name],
                       env={**os.environ, "PATH": self.path}, check=True, capture_output=True)
        saved = json.loads(result.read_text())
        return both_figures(detailed_results(saved), concurrency)

    def close(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=60)


def both_figures(results: list[RequestResult], concurrency: int) -> tuple[float, float]:
    """Output tokens/s over the steady window and over the whole run (first send to last token)."""
    span = max(r.finish_s for r in results) - min(r.send_s for r in results)
    return window_figures(results, concurrency).tokens_per_s, sum(r.n_tokens for r in results) / span


def detailed_results(saved: dict[str, Any]) -> list[RequestResult]:
    """``vllm bench serve --save-detailed``'s requests as RequestResults: the first token at start +
    TTFT, then one token per later chunk (its ``itls``), which holds for method none; where chunks
    carried several tokens (the server merges deltas a slow client has not read) the tokens the chunks
    do not account for are put at the last chunk's time, and the count of such tokens is printed."""
    results = []
    for start, ttft, itls, length in zip(saved["start_times"], saved["ttfts"], saved["itls"], saved["output_lens"]):
        times = [start + ttft]
        for gap in itls:
            times.append(times[-1] + gap)
        if len(times) < length:
            print(f"  bench: {length - len(times)} token(s) arrived in merged chunks", flush=True)
            times += [times[-1]] * (length - len(times))
        results.append(RequestResult(list(range(length)), start, times, times[-1]))
    origin = min(r.send_s for r in results)
    return [RequestResult(r.tokens, r.send_s - origin, [t - origin for t in r.token_times_s], r.finish_s - origin)
            for r in results]


def build(spec: str, target: str, concurrency: int, folder: Path) -> Any:
    kind, mode, dtype = spec.split(":")
    eager = mode == "eager"
    kv_bytes = engine_memory("none", read_model(target, "target"), None, concurrency, engines=6, on_cpu=True,
                             server=kind == "bench").kv_cache_bytes
    if kind == "llmengine":
        return OldEngine(target, eager, dtype, concurrency, kv_bytes)
    if kind == "asyncllm":
        return InProcess(target, eager, dtype, concurrency, kv_bytes)
    if kind == "runner":
        return NewRunner(target, eager, dtype, concurrency)
    return Benched(target, eager, dtype, concurrency, kv_bytes, folder)


def profiled(path: Any, name: str, workload: Workload, concurrency: int, folder: Path) -> None:
    """One extra run of ``path`` under py-spy (every process of it), collapsed stacks to ``folder/name.txt``."""
    pid = path.process.pid if isinstance(path, Benched) else os.getpid()
    out = folder / f"{name.replace(':', '-')}.txt"
    # Without --idle: only samples of threads on a CPU, so the idle engines of the other paths add nothing.
    spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--subprocesses", "--nonblocking",
                            "-r", "200", "-f", "raw", "-o", str(out), "-p", str(pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2)  # py-spy attaches
    path.run(workload, concurrency)
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=60)


def main() -> None:
    args = parse_args()
    specs = args.paths.split(",")
    folder = Path(tempfile.mkdtemp(prefix="bench-engine-path-"))
    workload = request_stream(builtin_workload(), args.concurrency)
    paths = {}
    for spec in specs:
        started = time.monotonic()
        paths[spec] = build(spec, args.target, args.concurrency, folder)
        paths[spec].run(workload.head(args.concurrency), args.concurrency)  # warm-up, not counted
        print(f"built {spec} in {time.monotonic() - started:.0f} s", flush=True)
    figures: dict[str, list[tuple[float, float]]] = {spec: [] for spec in specs}
    loads = []
    for round_index in range(args.rounds):
        for spec in specs if round_index % 2 == 0 else specs[::-1]:
            figures[spec].append(paths[spec].run(workload, args.concurrency))
            loads.append(os.getloadavg()[0])
            window, whole = figures[spec][-1]
            print(f"round {round_index + 1} {spec}: {window:.1f} tok/s over the window, {whole:.1f} over the whole "
                  f"run (load {loads[-1]:.1f})", flush=True)
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        for spec in specs:
            profiled(paths[spec], spec, workload, args.concurrency, Path(args.profile))
    for path in paths.values():
        path.close()
    print(f"\nconcurrency {args.concurrency}, {args.rounds} rounds, load average {min(loads):.1f}-{max(loads):.1f}")
    references = [specs[0]] + [spec for spec in specs if spec.startswith("bench:")][:1]
    report = {}
    for spec in specs:
        report[spec] = {}
        for index, figure in enumerate(("window", "whole_run")):
            runs = [pair[index] for pair in figures[spec]]
            entry = {"tokens_per_s": mean_interval(runs).to_dict(), "runs": runs}
            line = f"  {spec:26} {figure:9} {mean_interval(runs).describe(1)} tok/s"
            for reference in references:
                if reference != spec:
                    ratio = paired_ratio_interval(runs, [pair[index] for pair in figures[reference]])
                    entry[f"vs {reference}"] = ratio.to_dict()
                    line += f"   x{ratio.value:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] vs {reference}"
            report[spec][figure] = entry
            print(line)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"concurrency": args.concurrency, "rounds": args.rounds,
                                                    "load": [min(loads), max(loads)], "paths": report}, indent=2))


if __name__ == "__main__":
    main()
