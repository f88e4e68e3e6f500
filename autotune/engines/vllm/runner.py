"""What runs inside the worker process: the ``vllm serve`` servers a study measures through, and the
request streams fed to them.

:class:`VllmRunner` has the engine interface (``load`` / ``measure`` / ``close`` / ``loads``) so
that :class:`~autotune.engines.worker.EngineWorker` can host it; it is built in the child from
``"autotune.engines.vllm.runner:VllmRunner"``.

**Measured the way ``vllm serve`` runs it** (docs/vllm.md, "Why the study's engine was slower than
vllm serve"). Each configuration is served by a real ``vllm serve`` on 127.0.0.1 (through
:mod:`autotune.engines.vllm.serve_main`, which adds the stat logger the counts come from), started
with the engine arguments the exported script gives it (:func:`~autotune.engines.vllm.mapping.
engine_arguments`: compiled as ``vllm serve`` is by default, vLLM's own dtype choice unless told one,
the exported step budget) and the memory :mod:`autotune.engines.vllm.memory` sets. A run sends the
protocol's request stream with ``concurrency`` requests in flight through our load generator
(:mod:`autotune.engines.vllm.client`, validate's too), every token timed as it reaches the client, and
the figures are the steady window's (:mod:`autotune.analysis.steady`). On our 2-core CPU the in-process
engine client (``AsyncLLM`` without the API server) decoded 17 % more than ``vllm serve`` under
``vllm bench serve`` at concurrency 1, beyond the 10 % a study may differ from what is served; the
server itself is what a study must measure.

Speculative-decoding counts and the engine steps come from the server's stat logger
(:class:`~autotune.engines.vllm.stats.StepLogReader`). Each server is watched: one that dies stops the
run with one line naming it and why (:class:`~autotune.engines.vllm.server.Server`).

One server serves every concurrency: it is started with ``--max-num-seqs`` = the largest concurrency of
the study. On a CPU every configuration loaded in this process keeps its server, so the protocol's
rounds alternate configurations without starting them again (a start takes 30-120 s here), up to
``KEPT_CPU_ENGINES`` or as many as the machine's memory holds (beyond that one is stopped: the least
recently used among those the caller does not say it will run next, :meth:`VllmRunner.keep`, else the
least recently used; the worker keeps this process for a whole study). On a GPU two servers would
each claim their share of the device, so the previous one is stopped first. The servers stay in this
process's group, so a worker killed with its group takes them along.

**Step-cost timing** (:meth:`VllmRunner.time_steps`): each configuration is served with synthetic
acceptance of every draft (:mod:`autotune.engines.vllm.timing`), once for the largest timed
concurrency, and timed through the same server: its rows sent together, each engine step timed as its
outputs reached the engine client, its own accepted-token counters deciding whether the forcing
worked.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.analysis.steady import RequestResult
from autotune.engines.base import (EngineConfig, Measurement, RunContext, RunShape, measurement_of_run,
                                   validate_run_options)
from autotune.engines.failures import OUT_OF_MEMORY_MARKERS, first_line, raise_out_of_memory
from autotune.engines.forcing import timing_max_tokens, timing_rows
from autotune.engines.limits import DEFAULT_MAX_NGRAM
from autotune.engines.vllm import INSTALL_HINT
from autotune.engines.vllm.checks import check_config
from autotune.engines.vllm.client import completion_bodies, run_stream
from autotune.engines.vllm.mapping import EngineSettings, engine_arguments, serve_arguments
from autotune.engines.vllm.memory import EngineHost, EngineMemory, available_memory_bytes, engine_memory
from autotune.engines.vllm.server import HOST, Launch, Server, ServerDied, engine_core_nice, free_port
from autotune.engines.vllm.stats import StepLogReader, StepTimes, TimedStep, run_counters
from autotune.engines.vllm.timing import require_synthetic, timing_arguments, timing_point
from autotune.errors import EngineError, UnsupportedConfigError
from autotune.models.folder import HfModel, ModelFolders
from autotune.workload import Request, Workload

WARMUP_TOKENS = 4
# vLLM's CPU backend refuses to start when the memory it wants is not free ("Available memory on node
# 0 ... is less than desired CPU memory utilization"), and a server the kernel's OOM killer ended
# says so (autotune/engines/vllm/death.py): out of memory too.
VLLM_OUT_OF_MEMORY_MARKERS = (*OUT_OF_MEMORY_MARKERS, "less than desired", "OOM killer")
# What a server that refused its arguments logs last (pydantic's ValidationError is a ValueError).
REFUSALS = ("ValueError", "TypeError", "NotImplementedError", "ValidationError")
# Servers kept at once on a CPU (each holding its weights and KV cache): a confirmation alternates at
# most 4 finalists and the baseline, and one more spares a start when screening goes on with the
# configuration before.
KEPT_CPU_ENGINES = 6


def evictee(kept: Sequence[EngineConfig], wanted: frozenset[EngineConfig]) -> EngineConfig:
    """The server to stop to make room: of ``kept`` (least recently used first), the first not
    ``wanted`` next (:meth:`VllmRunner.keep`), else the first."""
    return next((config for config in kept if config not in wanted), kept[0])


@dataclass
class _Served:
    """One configuration's server: the process, the reader of its step log, the model name it answers
    to, its weights' bytes and memory, and whether it has run."""

    server: Server
    steps: StepLogReader
    model: str
    weight_bytes: int
    memory: EngineMemory
    warm: bool = False


class VllmRunner:
    """Measures configurations with ``vllm serve`` servers started for them (in the worker process).

    ``max_batch_size``: the servers are started for this many concurrent sequences (None: the first
    measured concurrency; a larger batch starts them again). ``enforce_eager``: None means False, as
    ``vllm serve`` runs by default (torch.compile: a start takes ~30 s longer on our CPU, and decodes
    ~1.7x faster there: docs/vllm.md). ``dtype``: vLLM's compute dtype; None means ``"auto"``, what
    ``vllm serve`` picks (on a CPU with bfloat16 support a float32 checkpoint is computed in bfloat16).
    ``models``: the model folders the parent has read (:func:`~autotune.engines.vllm.engine.runner_spec`).
    """

    name = "vllm"
    # The worker keeps this process across configurations: the servers started here decide what a
    # switch costs (module doc).
    manages_engines = True
    timing_leaves_engines_reusable = True  # time_steps stops every forced server (see there)

    def __init__(
        self,
        target: str,
        max_batch_size: int | None = None,
        max_ngram: int = DEFAULT_MAX_NGRAM,
        enforce_eager: bool | None = None,
        dtype: str | None = None,
        models: Sequence[HfModel] = (),
    ) -> None:
        self.target = str(target)
        self._folders = ModelFolders(models)  # read by the parent: this process reads none of them again
        self.dtype = dtype or "auto"
        self.max_batch_size = max_batch_size
        self.max_ngram = max_ngram
        self.enforce_eager = bool(enforce_eager)
        self.loads = 0
        self.config: EngineConfig | None = None
        self._kinds: dict[EngineConfig, str | None] = {}
        self._served: dict[EngineConfig, _Served] = {}
        self._wanted: frozenset[EngineConfig] = frozenset()  # what the caller will run next (keep())
        self._built_batch_size = 0
        self._on_cpu: bool | None = None
        self._available_bytes: int | None = None  # the machine's memory before the first server
        # The servers' logs and step logs; a failure's message names its log, so the folder stays
        # until close().
        self._work = Path(tempfile.mkdtemp(prefix="autotune-vllm-"))

    @property
    def holds_one_configuration(self) -> bool:
        """True on a GPU (one server at a time): the protocol then warms up only the configuration it
        measures first. False until the first server has found the platform."""
        return self._on_cpu is False

    def keep(self, configs: Sequence[EngineConfig]) -> None:
        """The configurations the caller will run next (the confirmation's finalists, the guide's open
        points): a server must be stopped to start another, one of these goes only when every
        server kept is one of them. Each call replaces the last."""
        self._wanted = frozenset(configs)

    def load(self, config: EngineConfig) -> None:
        """Check ``config`` against the model folders; start its server now when its size is known."""
        self._kinds[config] = check_config(config, self.target, self._folders)
        self.config = config
        if config in self._served:
            self._served[config] = self._served.pop(config)  # the most recently used last
        elif self.max_batch_size is not None:
            self._start(config, self.max_batch_size)

    def measure(self, workload: Workload, concurrency: int, temperature: float | None = None, seed: int = 0) -> Measurement:
        """Send ``workload`` (the protocol's request stream) with ``concurrency`` requests in flight and
        measure it over its steady window."""
        if self.config is None:
            raise EngineError("no configuration loaded; call load(config) before measure()")
        validate_run_options(concurrency, temperature)
        if concurrency > self._built_batch_size:
            self._stop_all()
        served = self._served.get(self.config) or self._start(self.config, max(concurrency, self.max_batch_size or 0))
        self._warm_up(served, workload.requests[0].prompt)
        start = time.perf_counter()
        results = self._send(served, completion_bodies(workload, served.model, seed, temperature), concurrency, start)
        wall_time_s = time.perf_counter() - start
        counts, steps = served.steps.take(start)
        counters = run_counters(counts, results, StepTimes.of(steps), self._memory_bytes(served))
        run = RunContext(self.config, RunShape(workload, concurrency, temperature, seed), "vllm",
                         "cpu" if self._on_cpu else "cuda")
        return measurement_of_run(run, results, counters, wall_time_s)

    def close(self) -> None:
        """Stop every server (and vLLM's processes under them); remove their logs."""
        self._stop_all()
        shutil.rmtree(self._work, ignore_errors=True)

    # -- step-cost timing -------------------------------------------------------------------------

    def time_steps(self, configs: list[EngineConfig], workload: Workload, concurrencies: list[int], *, steps: int,
                   rounds: int) -> list[dict[str, Any]]:
        """Step costs with every draft accepted (:mod:`autotune.engines.vllm.timing`): one dict per
        (configuration, round, concurrency) with the keys of :class:`autotune.perfmodel.cost.CostPoint`,
        ``concurrency`` rows of the workload's prompts (cycled) each generating ``steps`` full steps.

        One server per configuration, started once for the largest concurrency with synthetic
        acceptance (rounds repeat the concurrency levels within a configuration, as TensorRT-LLM's timing
        does, since a start costs far more than a run) and stopped before the next, so no forced server
        is left running; the baseline, which nothing forces, is timed last and kept for the study's
        trials (``timing_leaves_engines_reusable``: the worker keeps this process). EngineError, naming
        the installed vLLM, when it has no synthetic acceptance, when a timing server or run fails, or
        when its counters show a rejected draft."""
        version = _synthetic_version()
        self._stop_all()
        self.config = None
        prompts = [request.prompt for request in workload.requests]
        points = []
        for config in sorted(configs, key=lambda c: c.method == "none"):  # stable: the baseline last
            self._kinds[config] = check_config(config, self.target, self._folders)
            runs = []
            baseline = config.method == "none"
            try:
                served = self._start(config, max(concurrencies), forced=not baseline)
                for round_index in range(rounds):
                    for concurrency in concurrencies:
                        rows, prefill_tokens = timing_rows(prompts, concurrency)
                        timed = self._timed(served, rows, timing_max_tokens(config.depth, steps))
                        runs.append((timed, concurrency, round_index, prefill_tokens))
            except Exception as exc:
                self._stop_all()
                raise EngineError(f"vLLM {version} could not time {config.label()} with synthetic acceptance: "
                                  f"{first_line(exc)}") from exc
            if not baseline:
                self._stop_all()
            points.extend(timing_point(timed, config, concurrency, round_index, prefill_tokens, version)
                          for timed, concurrency, round_index, prefill_tokens in runs)
        return points

    # -- servers ----------------------------------------------------------------------------------

    def _start(self, config: EngineConfig, max_batch_size: int, forced: bool = False) -> _Served:
        """Start ``config``'s server for ``max_batch_size`` sequences; ``forced``: a timing server
        (every draft accepted). UnsupportedConfigError where vLLM refuses the arguments."""
        on_cpu, has_triton = _platform()
        self._on_cpu = on_cpu
        if not on_cpu or max_batch_size != self._built_batch_size:
            self._stop_all()  # one server at a time on a GPU; all servers share one batch limit
        memory = self._memory(config, max_batch_size)
        while len(self._served) >= min(KEPT_CPU_ENGINES, memory.engines):
            self._served.pop(evictee(list(self._served), self._wanted)).server.stop()
        settings = EngineSettings(max_ngram=self.max_ngram, enforce_eager=self.enforce_eager, dtype=self.dtype)
        arguments = engine_arguments(config, self.target, max_batch_size, self._kinds.get(config), settings)
        arguments.update(memory.engine_arguments())
        if forced:
            arguments = timing_arguments(arguments, config.depth, cpu_kernel=on_cpu and not has_triton)
        name = f"{config.label()}{' (timing)' if forced else ''}"
        step_log = self._work / f"{name.replace('@', '-').replace(' ', '')}-{self.loads}.steps"
        step_log.touch()
        launch = Launch([sys.executable, "-m", "autotune.engines.vllm.serve_main", str(step_log), "serve",
                         *serve_arguments(arguments)], dict(os.environ), own_group=False,
                        engine_core_nice=engine_core_nice(on_cpu))
        server = Server(f"vLLM server of {name}", launch, free_port(), step_log.with_suffix(".log"))
        try:
            server.start()
            model = json.loads(server.get("/v1/models"))["data"][0]["id"]
        except ServerDied as exc:
            raise_out_of_memory(exc, VLLM_OUT_OF_MEMORY_MARKERS)
            if any(marker in str(exc) for marker in REFUSALS):
                raise UnsupportedConfigError(f"vLLM refused {config.label()}: {exc}") from exc
            raise
        self.loads += 1
        self._built_batch_size = max_batch_size
        draft = config.draft if config.method == "draft" else None
        served = _Served(server, StepLogReader(step_log), model, _weight_bytes(self.target, draft), memory)
        self._served[config] = served
        return served

    def _memory(self, config: EngineConfig, max_batch_size: int) -> EngineMemory:
        """This server's memory (:mod:`autotune.engines.vllm.memory`), shared out of what the machine had
        before the first server among the servers kept at once."""
        if self._available_bytes is None:
            self._available_bytes = available_memory_bytes()
        draft = self._folders.get(config.draft, "draft") if config.method == "draft" and config.draft else None
        host = EngineHost(KEPT_CPU_ENGINES if self._on_cpu else 1, on_cpu=bool(self._on_cpu), server=True,
                          available_bytes=self._available_bytes)
        return engine_memory(config.method, self._folders.get(self.target, "target"), draft, max_batch_size, host)

    def _stop_all(self) -> None:
        for served in self._served.values():
            served.server.stop()
        self._served.clear()
        self._built_batch_size = 0

    # -- running ----------------------------------------------------------------------------------

    def _send(self, served: _Served, bodies: list[dict[str, Any]], concurrency: int, start: float) -> list[RequestResult]:
        """``bodies`` to the server with ``concurrency`` in flight (:func:`~autotune.engines.vllm.client.
        run_stream`), the run stopped at once when the server dies."""
        try:
            return asyncio.run(run_stream(HOST, served.server.port, bodies, concurrency, alive=served.server.check,
                                          start=start))
        except EngineError as exc:
            raise_out_of_memory(exc, VLLM_OUT_OF_MEMORY_MARKERS)
            raise

    def _warm_up(self, served: _Served, prompt: str) -> None:
        """One short request of ``prompt`` to a fresh server (lazy initialisation, not part of any run);
        what it counted is dropped."""
        if not served.warm:
            warm_up = Workload("warm-up", (Request(prompt, WARMUP_TOKENS, 0.0),))
            self._send(served, completion_bodies(warm_up, served.model), 1, time.perf_counter())
            served.warm = True
        served.steps.take(time.perf_counter())

    def _timed(self, served: _Served, rows: list[str], max_tokens: int) -> list[TimedStep]:
        """The engine steps of ``rows`` sent together, greedy, EOS ignored, each with its draft counts."""
        self._warm_up(served, rows[0])
        workload = Workload("timing", tuple(Request(row, max_tokens, 0.0) for row in rows))
        start = time.perf_counter()
        self._send(served, completion_bodies(workload, served.model, ignore_eos=True), len(rows), start)
        return served.steps.take(start)[1]

    def _memory_bytes(self, served: _Served) -> int | None:
        """Weights plus the KV cache space vLLM reserves on a CPU; None on a GPU (not measured)."""
        reserved = served.memory.reserved_bytes
        return None if not self._on_cpu or reserved is None else served.weight_bytes + reserved


def _platform() -> tuple[bool, bool]:
    """Whether vLLM runs on a CPU here, and whether it has Triton (the synthetic kernels)."""
    try:
        from vllm.platforms import current_platform  # noqa: PLC0415 - only ever imported in the worker
        from vllm.triton_utils import HAS_TRITON  # noqa: PLC0415
    except ImportError as exc:
        raise EngineError(f"vllm cannot be imported in the worker ({exc}); {INSTALL_HINT}") from exc
    return current_platform.is_cpu(), HAS_TRITON


def _synthetic_version() -> str | None:
    """``vllm.__version__``, once its ``SpeculativeConfig`` is known to declare synthetic acceptance
    (EngineError otherwise, :func:`autotune.engines.vllm.timing.require_synthetic`)."""
    try:
        import vllm  # noqa: PLC0415 - worker process only
        from vllm.config import SpeculativeConfig  # noqa: PLC0415
    except ImportError as exc:
        raise EngineError(f"vllm cannot be imported in the worker ({exc}); {INSTALL_HINT}") from exc
    version = getattr(vllm, "__version__", None)
    require_synthetic(getattr(SpeculativeConfig, "__dataclass_fields__", {}), version)
    return version


def _weight_bytes(*folders: str | None) -> int:
    """Bytes of the safetensors files vLLM loads (the top level of each model folder)."""
    return sum(file.stat().st_size for folder in folders if folder for file in Path(folder).glob("*.safetensors"))
