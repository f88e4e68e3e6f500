"""What runs inside the worker process: a TensorRT-LLM ``LLM`` and the streamed workload.

:class:`TrtLlmRunner` has the engine interface (``load`` / ``measure`` / ``close`` / ``loads``) so that
:class:`~autotune.engines.worker.EngineWorker` can host it; it is built in the child from
``"autotune.engines.trtllm.runner:TrtLlmRunner"``. ``tensorrt_llm`` is imported in :meth:`_build`
only, i.e. in the child.

A run decodes the steady-state stream it is given (:mod:`autotune.analysis.steady`) with
``concurrency`` requests in flight, as ``trtllm-bench --concurrency`` does and as a load generator
does against ``trtllm-serve`` (:mod:`autotune.engines.trtllm.streaming`, which cites the sources):
each request is an ``llm.generate_async(prompt, sampling_params, streaming=True)`` sent the moment
a slot frees, its stream read with ``async for``, each token timed by the chunk that brought it; a
concurrent task reads ``llm.get_stats_async()``. The step-cost timing runs go through the same
path, every row in flight at once.

One asyncio event loop lives as long as the LLM: TensorRT-LLM binds its stats queue to the loop of
the first submission, so every run must use the same loop.

**Sampling with one-model speculation** (MTP, EAGLE-3): where the installed configuration class
declares ``allow_advanced_sampling`` (a pydantic field, 1.1/1.2 era; a no-op on main) it is passed
as True; where it does not (the 1.0 line), the one-model worker takes the target's argmax at any
temperature (:mod:`autotune.engines.trtllm.mapping`), and a run at temperature > 0 is refused
(UnsupportedConfigError, a failed trial) rather than recorded. Recording it as greedy was the other
choice; it is not taken because the caller asked for a sampled measurement: its baseline is sampled,
the tuner compares the two at one temperature, and a greedy run's acceptance is higher than a
sampled one's, so a relabelled run would still be compared with the wrong baseline.

**Step-cost timing** (:meth:`TrtLlmRunner.time_steps`): each configuration's LLM is built with
``TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS`` = depth (:mod:`autotune.engines.trtllm.timing`).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import time
from collections.abc import Awaitable, Sequence
from functools import partial
from typing import Any, TypeVar

from autotune.engines.base import EngineConfig, Measurement, RunContext, RunShape, validate_run_options
from autotune.engines.failures import first_line, raise_out_of_memory
from autotune.engines.forcing import timing_max_tokens, timing_rows
from autotune.engines.limits import DEFAULT_MAX_NGRAM
from autotune.engines.trtllm import INSTALL_HINT
from autotune.engines.trtllm.checks import check_config
from autotune.engines.trtllm.mapping import (
    ADVANCED_SAMPLING_FIELD,
    ONE_MODEL_KINDS,
    SPECULATIVE_CLASSES,
    TWO_MODEL_KINDS,
    ConfigObject,
    llm_arguments,
    speculative_kind,
)
from autotune.engines.trtllm.stats import (
    STATS_TIMEOUT_S,
    ModelMemory,
    RequestRecord,
    build_measurement,
    summarize_iterations,
)
from autotune.engines.trtllm.streaming import keep_in_flight, stream_request
from autotune.engines.trtllm.timing import forced_acceptance, timing_point
from autotune.errors import EngineError, UnsupportedConfigError
from autotune.models import fit
from autotune.models.folder import HfModel, ModelFolders
from autotune.models.footprint import folder_footprint
from autotune.models.kind import DRAFT_TARGET, EAGLE3
from autotune.workload import Workload

WARMUP_TOKENS = 4
STATS_POLL_S = 0.01
T = TypeVar("T")


class TrtLlmRunner:
    """Measures configurations with a TensorRT-LLM ``LLM`` built for them (in the worker process).

    ``max_batch_size``: the LLM is built for this many concurrent sequences (None: the first
    measured concurrency) and reused for every concurrency up to it; a larger batch rebuilds it.
    ``models``: the model folders the parent has read (:func:`~autotune.engines.trtllm.engine.runner_spec`).
    """

    name = "trtllm"
    # The worker keeps this process across configurations: a switch shuts the LLM down and builds the
    # next one here (one LLM at a time: each claims a fraction of the GPU's free memory for its KV pool),
    # and an LLM serves every concurrency up to the one it was built for.
    manages_engines = True
    holds_one_configuration = True  # the protocol warms up only the one it measures first
    timing_leaves_engines_reusable = True  # time_steps shuts every forced LLM down (see there)

    def __init__(
        self,
        target: str,
        max_batch_size: int | None = None,
        tensor_parallel_size: int = 1,
        max_ngram: int = DEFAULT_MAX_NGRAM,
        stats_timeout_s: float = STATS_TIMEOUT_S,
        models: Sequence[HfModel] = (),
    ) -> None:
        self.target = str(target)
        self._folders = ModelFolders(models)  # read by the parent: this process reads none of them again
        self.max_batch_size = max_batch_size
        self.tensor_parallel_size = tensor_parallel_size
        self.max_ngram = max_ngram
        self.stats_timeout_s = stats_timeout_s
        self.loads = 0
        self.config: EngineConfig | None = None
        self._kind_of_draft: str | None = None
        self._llm: Any = None
        self._built_batch_size = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._warm = False
        self._version: str | None = None  # tensorrt_llm.__version__ of the built LLM
        self._memory: ModelMemory | None = None

    def load(self, config: EngineConfig) -> None:
        """Check ``config`` against the model folders; build the LLM now when its size is known."""
        kind = check_config(config, self.target, self._folders)
        if config != self.config:
            self.close()
        self.config = config
        self._kind_of_draft = kind if config.method == "draft" else None
        self._memory = model_memory(config, self.target, self._kind_of_draft, self._folders)
        if self.max_batch_size is not None and self._llm is None:
            self._build(self.max_batch_size)

    def measure(self, workload: Workload, concurrency: int, temperature: float | None = None, seed: int = 0) -> Measurement:
        """Run ``workload``'s requests (the protocol hands the steady-state stream) with ``concurrency``
        in flight and measure it over its steady window (:func:`autotune.engines.base.measurement_of_run`)."""
        if self.config is None:
            raise EngineError("no configuration loaded; call load(config) before measure()")
        validate_run_options(concurrency, temperature)
        if self._greedy_only() and _sampled(workload, temperature):
            raise UnsupportedConfigError(
                f"{self.config.label()} at temperature > 0: this TensorRT-LLM's {self._speculative_class().__name__} has "
                f"no {ADVANCED_SAMPLING_FIELD}, so one-model speculation decodes greedily; a sampled measurement "
                "would really be greedy (measure at temperature 0, or use TensorRT-LLM 1.1 or later)"
            )
        if self._llm is None or concurrency > self._built_batch_size:
            self._build(max(concurrency, self.max_batch_size or 0))
        try:
            return self._loop.run_until_complete(self._run(workload, concurrency, temperature, seed))
        except Exception as exc:
            # The failed run's other requests may still be running in the engine, where they would
            # share the next run's iterations and statistics: that run gets a fresh LLM.
            self.close()
            raise_out_of_memory(exc)
            raise

    def close(self) -> None:
        """Shut the LLM down (TensorRT-LLM stops its executor processes) and drop the event loop."""
        if self._llm is not None:
            self._llm.shutdown()
            self._llm = None
            self._built_batch_size = 0
            self._warm = False
            gc.collect()
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    # -- building ---------------------------------------------------------------------------------

    def _build(self, max_batch_size: int) -> None:
        self.close()
        try:
            import tensorrt_llm  # noqa: PLC0415 - only ever imported in the worker process
        except ImportError as exc:
            raise EngineError(f"tensorrt_llm cannot be imported in the worker ({exc}); {INSTALL_HINT}") from exc
        arguments = llm_arguments(
            self.config, self.target, max_batch_size, self._kind_of_draft, self.tensor_parallel_size, self.max_ngram,
            advanced_sampling=not self._greedy_only(),
        )
        llmapi = importlib.import_module("tensorrt_llm.llmapi")
        kwargs = {key: _instantiate(llmapi, value) if isinstance(value, ConfigObject) else value
                  for key, value in arguments.items()}
        try:
            self._llm = tensorrt_llm.LLM(**kwargs)
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise_out_of_memory(exc)
            raise UnsupportedConfigError(f"TensorRT-LLM refused {self.config.label()}: {first_line(exc)}") from exc
        except Exception as exc:
            raise_out_of_memory(exc)
            raise
        self._version = getattr(tensorrt_llm, "__version__", None)
        self.loads += 1
        self._built_batch_size = max_batch_size
        self._loop = asyncio.new_event_loop()

    def _speculative_class(self) -> type | None:
        """The installed class that runs the loaded configuration (None for method none)."""
        kind = speculative_kind(self.config, self._kind_of_draft)
        return None if kind is None else _first_class(importlib.import_module("tensorrt_llm.llmapi"), SPECULATIVE_CLASSES[kind])

    def _greedy_only(self) -> bool:
        """Whether the loaded configuration decodes greedily at any temperature: a one-model kind whose
        installed class has no ``allow_advanced_sampling`` field (module doc; a field check, not a
        version number, so a backport or a renamed release is judged by what it declares)."""
        if speculative_kind(self.config, self._kind_of_draft) not in ONE_MODEL_KINDS:
            return False
        return ADVANCED_SAMPLING_FIELD not in getattr(self._speculative_class(), "model_fields", {})

    # -- step-cost timing -------------------------------------------------------------------------

    def time_steps(self, configs: list[EngineConfig], workload: Workload, concurrencies: list[int], *, steps: int,
                   rounds: int) -> list[dict[str, Any]]:
        """Step costs at forced full acceptance (:mod:`autotune.engines.trtllm.timing`): one dict per
        (configuration, round, concurrency) with the keys of :class:`autotune.perfmodel.cost.CostPoint`,
        ``concurrency`` rows of the workload's prompts (cycled) each generating ``steps`` full steps.

        One LLM per configuration, built once for the largest concurrency with the forcing variable set
        (a build takes minutes, so rounds repeat the concurrency levels within a configuration rather than
        the whole set as the embedded engine does). The baseline is timed last and its LLM kept
        loaded: nothing is forced for it, so it is the very LLM the first trials (the baselines)
        would build; a forced LLM is never left loaded."""
        points = []
        prompts = [request.prompt for request in workload.requests]
        for config in sorted(configs, key=lambda c: c.method == "none"):  # stable: the baseline last
            self.close()  # every LLM of a timing run is built with the variable set
            with forced_acceptance(config.depth):
                self.load(config)
                if self._llm is None or self._built_batch_size < max(concurrencies):
                    self._build(max(concurrencies))
            kind = speculative_kind(config, self._kind_of_draft)
            for round_index in range(rounds):
                for concurrency in concurrencies:
                    rows, prefill_tokens = timing_rows(prompts, concurrency)
                    stats = self._loop.run_until_complete(self._timed(rows, timing_max_tokens(config.depth, steps)))
                    points.append(timing_point(stats, config, concurrency, round_index, prefill_tokens, kind in TWO_MODEL_KINDS))
        if self.config is not None and self.config.depth > 0:
            self.close()
            self.config = None
        return points

    async def _timed(self, prompts: list[str], max_tokens: int) -> list[Any]:
        """Iteration statistics of ``prompts`` run together, greedy, EOS ignored."""
        await self._warm_up(prompts[0], WARMUP_TOKENS, 0.0, 0)
        _, stats = await self._with_stats(self._stream([(p, max_tokens, 0.0) for p in prompts], len(prompts), 0.0, 0,
                                                       time.perf_counter(), ignore_eos=True))
        return stats

    # -- running ----------------------------------------------------------------------------------

    async def _run(self, workload: Workload, concurrency: int, temperature: float | None, seed: int) -> Measurement:
        first = workload.requests[0]
        await self._warm_up(first.prompt, min(WARMUP_TOKENS, first.max_tokens), first.temperature if temperature is None
                            else temperature, seed)

        async def streamed() -> tuple[list[RequestRecord], float]:
            start = time.perf_counter()  # runs once _with_stats has drained the stats queue
            records = await self._stream([(r.prompt, r.max_tokens, r.temperature) for r in workload.requests], concurrency,
                                         temperature, seed, start)
            return records, time.perf_counter() - start  # the wall time ends with the last token, not the stats

        (records, wall_time_s), stats = await self._with_stats(streamed())
        kind = speculative_kind(self.config, self._kind_of_draft)
        summary = summarize_iterations(stats, drafter_timed=kind in TWO_MODEL_KINDS)
        if self.config.method != "none" and summary.iterations == 0:
            raise EngineError(
                "TensorRT-LLM returned no iteration statistics, so acceptance cannot be counted; "
                "this TensorRT-LLM may not support enable_iter_perf_stats with get_stats_async()"
            )
        device = "cuda" if self.tensor_parallel_size == 1 else f"cuda x{self.tensor_parallel_size}"
        run = RunContext(self.config, RunShape(workload, concurrency, temperature, seed), "trtllm", device)
        return build_measurement(records, summary, run, wall_time_s, version=self._version, memory=self._memory)

    async def _warm_up(self, prompt: str, max_tokens: int, temperature: float, seed: int) -> None:
        """One short request on a fresh LLM: lazy initialisation, not part of any measured run."""
        if not self._warm:
            await self._stream([(prompt, max_tokens, temperature)], 1, temperature, seed, time.perf_counter())
            self._warm = True

    async def _with_stats(self, run: Awaitable[T]) -> tuple[T, list[Any]]:
        """``run``'s result and the iteration statistics collected while it ran (what earlier runs left
        in the stats queue is dropped first: it is not this run's)."""
        await self._read_stats([])
        stats: list[Any] = []
        done = asyncio.Event()
        collector = asyncio.create_task(self._collect_stats(stats, done))
        try:
            result = await run
        finally:
            done.set()
            await collector
        return result, stats

    async def _stream(
        self, requests: list[tuple[str, int, float]], concurrency: int, temperature: float | None, seed: int, start: float,
        ignore_eos: bool = False,
    ) -> list[RequestRecord]:
        """Run ``requests`` (prompt, max_tokens, temperature) in order with ``concurrency`` in flight
        (:func:`~autotune.engines.trtllm.streaming.keep_in_flight`), request i seeded ``seed + i``;
        their records in request order, times in seconds since ``start``."""
        sends = [
            partial(stream_request, self._llm, prompt,
                    self._sampling_params(max_tokens, own if temperature is None else temperature, seed + index, ignore_eos),
                    start)
            for index, (prompt, max_tokens, own) in enumerate(requests)
        ]
        return await keep_in_flight(sends, concurrency)

    def _sampling_params(self, max_tokens: int, temperature: float, seed: int, ignore_eos: bool = False) -> Any:
        from tensorrt_llm import SamplingParams  # noqa: PLC0415 - worker process only

        options = {"ignore_eos": True} if ignore_eos else {}
        if temperature == 0:  # greedy: TensorRT-LLM decodes greedily with top_k = 1
            return SamplingParams(max_tokens=max_tokens, top_k=1, detokenize=False, **options)
        return SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed, detokenize=False, **options)

    async def _collect_stats(self, sink: list[Any], done: asyncio.Event) -> None:
        """Read iteration statistics while the run lasts, then until none arrive for a while.

        ``get_stats_async`` stops after ``stats_timeout_s`` without a new iteration, hence the loop."""
        while not done.is_set():
            await self._read_stats(sink)
            await asyncio.sleep(STATS_POLL_S)
        await self._read_stats(sink)

    async def _read_stats(self, sink: list[Any]) -> None:
        """The iteration statistics that arrive until none has for ``stats_timeout_s``.

        Once it has waited that long, TensorRT-LLM's ``IterationResult`` yields nothing more until a
        request is submitted (``mark_undone``, ``tensorrt_llm/executor/result.py``): an iteration
        longer than the timeout in a run without further submissions (a timing run, a run's last
        requests) left the rest of its statistics unread, to be counted by the next run. So every
        read marks it undone first."""
        stats = self._llm.get_stats_async(timeout=self.stats_timeout_s)
        mark_undone = getattr(stats, "mark_undone", None)  # absent before anything was submitted
        if mark_undone is not None:
            mark_undone()
        async for stat in stats:
            sink.append(stat)


def model_memory(config: EngineConfig, target: str, kind_of_draft: str | None, folders: ModelFolders) -> ModelMemory | None:
    """Weights and KV bytes per token of ``config``'s model folders (None when config.json and the
    safetensors headers do not tell): the target (plus one layer's KV per MTP module for method mtp)
    and, for a draft model or EAGLE-3 head, the draft's weights and KV cache. The KV pool is taken
    to hold the same number of tokens for the draft as for the target (not verified on a GPU)."""
    own = folder_footprint(folders.get(target, "target"))
    draft = None
    if config.method == "draft" and kind_of_draft in (DRAFT_TARGET, EAGLE3):
        draft = folder_footprint(folders.get(config.draft_model, "draft"))
    if not all(model.weights_known and model.kv_known for model in (own, draft) if model is not None):
        return None
    return ModelMemory(fit.weight_bytes(config.method, own, draft), fit.bytes_per_position(config.method, own, draft))


def _first_class(module: Any, class_names: tuple[str, ...]) -> type:
    """The first of ``class_names`` this TensorRT-LLM has (the mapping lists fallbacks for older ones)."""
    for name in class_names:
        cls = getattr(module, name, None)
        if cls is not None:
            return cls
    raise UnsupportedConfigError(
        f"this TensorRT-LLM has none of {', '.join(class_names)} in tensorrt_llm.llmapi; upgrade TensorRT-LLM"
    )


def _instantiate(module: Any, spec: ConfigObject) -> Any:
    """The first of ``spec.class_names`` this TensorRT-LLM has, built with ``spec.fields``."""
    return _first_class(module, spec.class_names)(**spec.fields)


def _sampled(workload: Workload, temperature: float | None) -> bool:
    """Whether a run samples: ``temperature`` > 0, or (None) any request's own temperature > 0."""
    return temperature > 0 if temperature is not None else any(r.temperature > 0 for r in workload.requests)
