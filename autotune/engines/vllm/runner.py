"""What runs inside the worker process: vLLM engines and the workload fed through them.

:class:`VllmRunner` has the engine interface (``load`` / ``measure`` / ``close`` / ``loads``) so
that :class:`~autotune.engines.worker.EngineWorker` can host it; it is built in the child from
``"autotune.engines.vllm.runner:VllmRunner"``. ``vllm`` is imported in :meth:`_build` only.

One engine serves every batch size: it is built with ``max_num_seqs`` = the largest batch size of
the study, and a run keeps exactly ``batch_size`` requests in flight itself, adding the next request
as soon as one finishes (``LLMEngine.add_request`` / ``step``, vLLM 0.32.0
``vllm/v1/engine/llm_engine.py``), so the batch is full as long as requests remain, as with the
other engines. Every request counts as arriving at t=0 (TTFT includes queueing). Outputs are
streamed per step (``RequestOutputKind.DELTA``), which gives each request's first-token and finish
times and its decode steps. Speculative-decoding counts come from the engine's per-step statistics
(:class:`~autotune.engines.vllm.stats.SpecDecodingRecorder`).

On a CPU every configuration loaded in this process keeps its engine (each is an engine-core
process with its own KV cache, ``VLLM_CPU_KVCACHE_SPACE`` GiB), so the protocol's rounds alternate
configurations without rebuilding them (a build takes ~15-25 s here), up to ``KEPT_CPU_ENGINES``
(beyond that one is shut down: the least recently used among those the caller does not say it will
run next, :meth:`VllmRunner.keep`, else the least recently used; the worker keeps this process for a
whole study). On a GPU two engines would each claim ``gpu_memory_utilization`` of the device, so the
previous one is shut down first.

**Step-cost timing** (:meth:`VllmRunner.time_steps`): each configuration is built with synthetic
acceptance of every draft (:mod:`autotune.engines.vllm.timing`), once for the largest timed batch
size, and its own accepted-token counters decide whether the forcing worked.
"""

from __future__ import annotations

import gc
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.engines.base import EngineConfig, Measurement, measurement_of_run, validate_run_options
from autotune.engines.failures import OUT_OF_MEMORY_MARKERS, first_line, raise_out_of_memory
from autotune.engines.forcing import timing_max_tokens, timing_rows
from autotune.engines.vllm import INSTALL_HINT
from autotune.engines.vllm.checks import check_config
from autotune.engines.vllm.mapping import DEFAULT_MAX_NGRAM, engine_arguments
from autotune.engines.vllm.stats import SpecDecodingRecorder, StepTimes, StreamedRequest, run_counters
from autotune.engines.vllm.timing import TimedStep, require_synthetic, timing_arguments, timing_point
from autotune.errors import EngineError, UnsupportedConfigError
from autotune.models.folder import HfModel, ModelFolders, config_dtype
from autotune.workload import Workload

WARMUP_TOKENS = 4
# vLLM's CPU backend otherwise wants 92 % of the NUMA node's memory for the KV cache and refuses to
# start when anything else uses memory (docs/vllm.md); 1 GiB holds ~1M tokens of the built-in target.
DEFAULT_CPU_KV_CACHE_GIB = "1"
# vLLM's CPU backend refuses to start when the memory it wants is not free ("Available memory on node
# 0 ... is less than desired CPU memory utilization"): out of memory too.
VLLM_OUT_OF_MEMORY_MARKERS = (*OUT_OF_MEMORY_MARKERS, "less than desired")
# Engines kept at once on a CPU (each an engine-core process holding its weights and KV cache): a
# confirmation alternates at most 4 finalists and the baseline, and one more spares a rebuild when
# screening goes on with the configuration before.
KEPT_CPU_ENGINES = 6


def evictee(kept: Sequence[EngineConfig], wanted: frozenset[EngineConfig]) -> EngineConfig:
    """The engine to shut down to make room: of ``kept`` (least recently used first), the first
    not ``wanted`` next (:meth:`VllmRunner.keep`), else the first."""
    return next((config for config in kept if config not in wanted), kept[0])


@dataclass
class _Loaded:
    """One built engine: vLLM's LLMEngine, its statistics recorder, and whether it has run."""

    engine: Any
    recorder: SpecDecodingRecorder
    weight_bytes: int
    warm: bool = False
    submitted: int = 0  # requests added so far (vLLM's request ids must be unique per engine)


class VllmRunner:
    """Measures configurations with vLLM engines built for them (in the worker process).

    ``max_batch_size``: the engines are built for this many concurrent sequences (None: the first
    measured batch size; a larger batch rebuilds). ``enforce_eager``: None means True on a CPU (no
    torch.compile: a build then takes ~20 s instead of ~60 s) and False on a GPU (CUDA graphs, as
    served). ``dtype``: vLLM's compute dtype; None means the checkpoint's own (config.json's
    ``torch_dtype`` / ``dtype``; vLLM's ``"auto"`` would compute a float32 checkpoint in bfloat16 on a
    CPU, which is not the model that was trained), ``"auto"`` where config.json names none.
    ``models``: the model folders the parent has read (:func:`~autotune.engines.vllm.engine.runner_spec`).
    """

    name = "vllm"
    # The worker keeps this process across configurations: the engines built here decide what a
    # switch costs (module doc).
    manages_engines = True
    timing_leaves_engines_reusable = True  # time_steps shuts every forced engine down (see there)

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
        self.dtype = dtype or config_dtype(self._folders.get(self.target, "target").config) or "auto"
        self.max_batch_size = max_batch_size
        self.max_ngram = max_ngram
        self.enforce_eager = enforce_eager
        self.loads = 0
        self.config: EngineConfig | None = None
        self._kinds: dict[EngineConfig, str | None] = {}
        self._engines: dict[EngineConfig, _Loaded] = {}
        self._wanted: frozenset[EngineConfig] = frozenset()  # what the caller will run next (keep())
        self._built_batch_size = 0
        self._on_cpu: bool | None = None
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", DEFAULT_CPU_KV_CACHE_GIB)

    @property
    def holds_one_configuration(self) -> bool:
        """True on a GPU (one engine at a time): the protocol then warms up only the configuration it
        measures first. False until the first build has found the platform."""
        return self._on_cpu is False

    def keep(self, configs: Sequence[EngineConfig]) -> None:
        """The configurations the caller will run next (the confirmation's finalists, the guide's open
        points): an engine must be shut down to build another, one of these goes only when every
        engine kept is one of them. Each call replaces the last."""
        self._wanted = frozenset(configs)

    def load(self, config: EngineConfig) -> None:
        """Check ``config`` against the model folders; build its engine now when its size is known."""
        self._kinds[config] = check_config(config, self.target, self._folders)
        self.config = config
        if config in self._engines:
            self._engines[config] = self._engines.pop(config)  # the most recently used last
        elif self.max_batch_size is not None:
            self._build(config, self.max_batch_size)

    def measure(self, workload: Workload, batch_size: int, temperature: float | None = None, seed: int = 0) -> Measurement:
        """Feed ``workload`` with ``batch_size`` requests in flight and measure it."""
        if self.config is None:
            raise EngineError("no configuration loaded; call load(config) before measure()")
        validate_run_options(batch_size, temperature)
        if batch_size > self._built_batch_size:
            self._shutdown_all()
        loaded = self._engines.get(self.config) or self._build(self.config, max(batch_size, self.max_batch_size or 0))
        try:
            return self._run(loaded, workload, batch_size, temperature, seed)
        except Exception as exc:
            raise_out_of_memory(exc, VLLM_OUT_OF_MEMORY_MARKERS)
            raise

    def close(self) -> None:
        """Shut every engine down (vLLM stops its engine-core processes)."""
        self._shutdown_all()

    # -- step-cost timing -------------------------------------------------------------------------

    def time_steps(self, configs: list[EngineConfig], workload: Workload, batch_sizes: list[int], *, steps: int,
                   rounds: int) -> list[dict[str, Any]]:
        """Step costs with every draft accepted (:mod:`autotune.engines.vllm.timing`): one dict per
        (configuration, round, batch size) with the keys of :class:`autotune.perfmodel.cost.CostPoint`,
        ``batch_size`` rows of the workload's prompts (cycled) each generating ``steps`` full steps.

        One engine per configuration, built once for the largest batch size with synthetic acceptance
        (rounds repeat the batch sizes within a configuration, as TensorRT-LLM's timing does, since a
        build costs far more than a run) and shut down before the next, so no forced engine is left
        loaded; the baseline, which nothing forces, is timed last and kept for the study's trials
        (``timing_leaves_engines_reusable``: the worker keeps this process). EngineError, naming the installed vLLM, when it has no synthetic acceptance, when a
        timing build or run fails, or when its counters show a rejected draft."""
        version = _synthetic_version()
        self._shutdown_all()
        self.config = None
        prompts = [request.prompt for request in workload.requests]
        points = []
        for config in sorted(configs, key=lambda c: c.method == "none"):  # stable: the baseline last
            self._kinds[config] = check_config(config, self.target, self._folders)
            runs = []
            baseline = config.method == "none"
            try:
                loaded = self._build(config, max(batch_sizes), forced=not baseline)
                for round_index in range(rounds):
                    for batch_size in batch_sizes:
                        rows, prefill_tokens = timing_rows(prompts, batch_size)
                        timed = self._timed(loaded, rows, timing_max_tokens(config.depth, steps))
                        runs.append((timed, batch_size, round_index, prefill_tokens))
            except Exception as exc:
                self._shutdown_all()
                raise EngineError(f"vLLM {version} could not time {config.label()} with synthetic acceptance: "
                                  f"{first_line(exc)}") from exc
            if not baseline:
                self._shutdown_all()
            points.extend(timing_point(timed, config, batch_size, round_index, prefill_tokens, version)
                          for timed, batch_size, round_index, prefill_tokens in runs)
        return points

    # -- building ---------------------------------------------------------------------------------

    def _build(self, config: EngineConfig, max_batch_size: int, forced: bool = False) -> _Loaded:
        """Build ``config``'s engine for ``max_batch_size`` sequences; ``forced``: a timing build
        (every draft accepted)."""
        try:
            from vllm.engine.arg_utils import EngineArgs  # noqa: PLC0415 - only ever imported in the worker
            from vllm.platforms import current_platform  # noqa: PLC0415
            from vllm.triton_utils import HAS_TRITON  # noqa: PLC0415
            from vllm.usage.usage_lib import UsageContext  # noqa: PLC0415
            from vllm.v1.engine.llm_engine import LLMEngine  # noqa: PLC0415
        except ImportError as exc:
            raise EngineError(f"vllm cannot be imported in the worker ({exc}); {INSTALL_HINT}") from exc
        self._on_cpu = current_platform.is_cpu()
        if not self._on_cpu or max_batch_size != self._built_batch_size:
            self._shutdown_all()  # one engine at a time on a GPU; all engines share one batch limit
        while len(self._engines) >= KEPT_CPU_ENGINES:
            self._shutdown(self._engines.pop(evictee(list(self._engines), self._wanted)))
        enforce_eager = self._on_cpu if self.enforce_eager is None else self.enforce_eager
        arguments = engine_arguments(config, self.target, max_batch_size, self._kinds.get(config),
                                     max_ngram=self.max_ngram, enforce_eager=enforce_eager, dtype=self.dtype)
        if forced:
            arguments = timing_arguments(arguments, config.depth, cpu_kernel=self._on_cpu and not HAS_TRITON)
        recorder = SpecDecodingRecorder()
        try:
            engine = LLMEngine.from_engine_args(EngineArgs(**arguments), usage_context=UsageContext.LLM_CLASS,
                                                stat_loggers=[recorder.factory])
        except (TypeError, ValueError, NotImplementedError) as exc:  # pydantic's ValidationError is a ValueError
            raise_out_of_memory(exc, VLLM_OUT_OF_MEMORY_MARKERS)
            raise UnsupportedConfigError(f"vLLM refused {config.label()}: {first_line(exc)}") from exc
        self.loads += 1
        self._built_batch_size = max_batch_size
        loaded = _Loaded(engine, recorder, _weight_bytes(self.target, config.draft if config.method == "draft" else None))
        self._engines[config] = loaded
        return loaded

    def _shutdown_all(self) -> None:
        for loaded in self._engines.values():
            self._shutdown(loaded)
        self._engines.clear()
        self._built_batch_size = 0

    @staticmethod
    def _shutdown(loaded: _Loaded) -> None:
        shutdown = getattr(loaded.engine, "shutdown", None) or getattr(loaded.engine.engine_core, "shutdown", None)
        if shutdown is not None:
            shutdown()
        gc.collect()

    # -- running ----------------------------------------------------------------------------------

    def _run(self, loaded: _Loaded, workload: Workload, batch_size: int, temperature: float | None, seed: int) -> Measurement:
        first = workload.requests[0]
        self._warm_up(loaded, first.prompt, min(WARMUP_TOKENS, first.max_tokens),
                      first.temperature if temperature is None else temperature, seed)
        start = time.perf_counter()
        records, steps = self._stream(
            loaded, [(r.prompt, r.max_tokens, r.temperature) for r in workload.requests], batch_size, temperature, seed,
            start,
        )
        wall_time_s = time.perf_counter() - start
        memory = self._memory_bytes(loaded)
        counters = run_counters(loaded.recorder.take(), records, steps, memory)
        return measurement_of_run(
            self.config, workload, records, counters, batch_size=batch_size, temperature=temperature, seed=seed,
            wall_time_s=wall_time_s, device="cpu" if self._on_cpu else "cuda", engine="vllm",
        )

    def _warm_up(self, loaded: _Loaded, prompt: str, max_tokens: int, temperature: float, seed: int) -> None:
        """One short request on a fresh engine (lazy initialisation, not part of any run); what it
        counted is dropped."""
        if not loaded.warm:
            self._stream(loaded, [(prompt, max_tokens, temperature)], 1, temperature, seed, time.perf_counter())
            loaded.warm = True
        loaded.recorder.take()

    def _timed(self, loaded: _Loaded, rows: list[str], max_tokens: int) -> list[TimedStep]:
        """The engine steps of ``rows`` run together, greedy, EOS ignored, each with its draft counts."""
        self._warm_up(loaded, rows[0], WARMUP_TOKENS, 0.0, 0)
        steps: list[TimedStep] = []

        def record(seconds: float, decoded_rows: int) -> None:
            counts = loaded.recorder.take()
            steps.append(TimedStep(seconds, decoded_rows, counts.draft_tokens, counts.accepted_tokens))

        self._stream(loaded, [(row, max_tokens, 0.0) for row in rows], len(rows), 0.0, 0, time.perf_counter(),
                     ignore_eos=True, on_step=record)
        return steps

    def _stream(
        self, loaded: _Loaded, requests: list[tuple[str, int, float]], batch_size: int, temperature: float | None,
        seed: int, start: float, ignore_eos: bool = False, on_step: Callable[[float, int], None] | None = None,
    ) -> tuple[list[StreamedRequest], StepTimes]:
        """Run ``requests`` (prompt, max_tokens, temperature) with ``batch_size`` in flight, in order;
        ``on_step`` is told each engine step's wall time and how many requests it decoded."""
        engine = loaded.engine
        pending = deque(enumerate(requests))
        in_flight: dict[str, int] = {}  # vLLM's request id -> index
        tokens: list[list[int]] = [[] for _ in requests]
        first_token_s: list[float | None] = [None] * len(requests)
        finish_s: list[float] = [0.0] * len(requests)
        decode_steps = [0] * len(requests)
        passes, decode_s, prefill_s = 0, 0.0, 0.0
        while pending or in_flight:
            while pending and len(in_flight) < batch_size:
                index, (prompt, max_tokens, own_temperature) = pending.popleft()
                request_id = f"r{loaded.submitted}"
                loaded.submitted += 1
                params = self._sampling_params(max_tokens, own_temperature if temperature is None else temperature,
                                               seed + index, ignore_eos)
                # The text prompt, tokenized by the model's own tokenizer (BOS included), as a server does.
                # Outputs carry the id given here (add_request returns vLLM's internal one).
                engine.add_request(request_id, prompt, params)
                in_flight[request_id] = index
            step_start = time.perf_counter()
            outputs = engine.step()
            now = time.perf_counter()
            decoded = 0
            for output in outputs:
                index = in_flight.get(output.request_id)
                if index is None:
                    continue
                new = list(output.outputs[0].token_ids) if output.outputs else []
                if new:
                    if first_token_s[index] is None:
                        first_token_s[index] = now - start
                    else:
                        decode_steps[index] += 1
                        decoded += 1
                    tokens[index].extend(new)
                if output.finished:
                    finish_s[index] = now - start
                    del in_flight[output.request_id]
            if in_flight and not outputs and not engine.has_unfinished_requests():
                raise EngineError(f"vLLM dropped {len(in_flight)} request(s) without finishing them")
            if on_step is not None:
                on_step(now - step_start, decoded)
            if decoded:
                passes += 1
                decode_s += now - step_start
            else:
                prefill_s += now - step_start
        records = [StreamedRequest(tokens[i], first_token_s[i], finish_s[i], decode_steps[i]) for i in range(len(requests))]
        return records, StepTimes(passes, decode_s, prefill_s)

    @staticmethod
    def _sampling_params(max_tokens: int, temperature: float, seed: int, ignore_eos: bool = False) -> Any:
        from vllm import SamplingParams  # noqa: PLC0415 - worker process only
        from vllm.sampling_params import RequestOutputKind  # noqa: PLC0415

        # ignore_eos is False for measurements: a request ends at EOS or max_tokens, as in the other
        # engines; timing runs ignore EOS so that every row runs all its steps.
        return SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=None if temperature == 0 else seed,
                              output_kind=RequestOutputKind.DELTA, detokenize=False, ignore_eos=ignore_eos)

    def _memory_bytes(self, loaded: _Loaded) -> int | None:
        """Weights plus the KV cache space vLLM's CPU backend reserves; None on a GPU (not measured)."""
        if not self._on_cpu:
            return None
        kv_gib = float(os.environ.get("VLLM_CPU_KVCACHE_SPACE") or DEFAULT_CPU_KV_CACHE_GIB)
        return loaded.weight_bytes + int(kv_gib * (1 << 30))


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
