"""The engine interface: what a configuration is, what a run measures, and what an engine does.

An engine loads one speculative-decoding configuration (:class:`EngineConfig`) and measures a
workload at any concurrency (:class:`Measurement`). The tuner only talks to this interface, so the
embedded PyTorch engine and a TensorRT-LLM engine are interchangeable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from autotune.analysis.categories import acceptance_by_category
from autotune.analysis.steady import RequestResult, tpot_ms, ttft_ms, window_figures
from autotune.errors import ConfigurationError

if TYPE_CHECKING:
    from autotune.workload import Workload

METHODS = ("none", "mtp", "draft", "ngram")
SPECULATIVE_METHODS = ("mtp", "draft", "ngram")
MAX_DEPTH = 16
BUILTIN_DRAFT = "builtin"


@dataclass(frozen=True)
class EngineConfig:
    """One speculative-decoding configuration.

    ``method``: none | mtp | draft | ngram; ``depth``: draft tokens proposed per target pass
    (0 for none); ``draft``: the draft model for method draft, a model path or ``"builtin"``
    (None means the built-in draft). ``off_state``: a speculative method at depth 0, "K = 0 inside
    a speculative server" (the drafter loaded and kept in step, no token drafted: what a vLLM server
    runs where its schedule says 0, :mod:`autotune.analysis.offstate`); only engines whose adapter's
    off rule asks for it to be measured run it.
    """

    method: str
    depth: int = 0
    draft: str | None = None
    off_state: bool = False

    def validate(self) -> None:
        """Raise :class:`ConfigurationError` when the combination cannot be run by any engine."""
        if self.method not in METHODS:
            raise ConfigurationError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if not isinstance(self.depth, int) or isinstance(self.depth, bool):
            raise ConfigurationError(f"depth must be an integer, got {self.depth!r}")
        if self.method == "none" and self.depth != 0:
            raise ConfigurationError(f"method none drafts nothing: depth must be 0, got {self.depth}")
        if self.off_state and (self.method not in SPECULATIVE_METHODS or self.depth != 0):
            raise ConfigurationError(f"the off state (K = 0) is a speculative method at depth 0, not {self.label()}")
        if self.method in SPECULATIVE_METHODS and self.depth < 1 and not self.off_state:
            raise ConfigurationError(f"method {self.method} needs depth >= 1 (draft tokens per step), got {self.depth}")
        if self.depth > MAX_DEPTH:
            raise ConfigurationError(f"depth {self.depth} is above the maximum of {MAX_DEPTH}")
        if self.draft is not None and self.method != "draft":
            raise ConfigurationError(f"a draft model is only used by method draft, not {self.method}; drop --draft")

    @property
    def draft_model(self) -> str | None:
        """The draft model to load: the given path, ``"builtin"`` by default for method draft, else None."""
        if self.method != "draft":
            return None
        return self.draft or BUILTIN_DRAFT

    def label(self) -> str:
        """Short human-readable name, e.g. ``draft@4`` or ``none``."""
        return self.method if self.method == "none" else f"{self.method}@{self.depth}"


@dataclass(kw_only=True)
class RunCounters:
    """What an engine counted while decoding, and the memory it measured: the part of a
    :class:`Measurement` each engine computes its own way (definitions there)."""

    drafted_tokens: int
    accepted_tokens: int
    acceptance_alpha: float | None
    acceptance_length: float
    acceptance_by_position: list[float]
    target_passes: int
    sequence_steps: int
    propose_time_s: float | None  # None: the engine does not time drafting apart from verification
    verify_time_s: float
    prefill_time_s: float
    peak_memory_bytes: int
    memory_kind: str
    peak_rss_delta_bytes: int | None = None
    # Memory in use on the whole device as the engine reports it (other processes and pre-allocated
    # pools included, e.g. TensorRT-LLM's gpuMemUsage); None where the engine reports none.
    device_memory_bytes: int | None = None
    # Sequence-steps that drafted >= i+1 tokens (the denominators of acceptance_by_position); empty
    # where an engine does not count them.
    drafted_by_position: list[int] = field(default_factory=list)
    # Tokens per sequence-step a run at depth k = 1..depth would have made, replayed over this run's
    # runs of matching drafts (:mod:`autotune.analysis.match_runs`); empty where an engine does not
    # report its steps one by one.
    replayed_acceptance_length: list[float] = field(default_factory=list)


@dataclass(kw_only=True)
class Measurement(RunCounters):
    """What one run of a workload measured.

    Throughput and latency over the run's steady window (:mod:`autotune.analysis.steady`, ``vllm bench
    serve``'s definitions): ``tokens_per_s`` = tokens that arrived inside the window / its length;
    ``requests_per_s``; TTFT = first token - send, TPOT = (last token - first token) / (tokens - 1),
    percentiles over the requests sent and finished inside the window. ``wall_time_s``: the whole run,
    first send to last finish; ``n_requests`` / ``output_tokens``: the whole run's.
    Speculation, counted while decoding (never inferred from depth): ``drafted_tokens``,
    ``accepted_tokens``, ``acceptance_rate`` = accepted / drafted (None when nothing was
    drafted), ``acceptance_alpha`` = accepted / (accepted + rejections): the per-position
    acceptance probability alpha of the i.i.d. model behind Omega(alpha, depth), since every draft
    up to and including the first rejected one is evaluated, ``acceptance_length`` = tokens produced per sequence per target verification pass
    (>= 1; prefill excluded), ``acceptance_by_position[i]`` = fraction of the sequence-steps that
    drafted >= i+1 tokens in which draft position i was accepted (``drafted_by_position[i]`` counts those
    sequence-steps), ``replayed_acceptance_length[k-1]`` = the acceptance length a depth-k run would
    have had, replayed over this run's runs of matching drafts. ``request_tokens``: tokens generated per request.
    Cost: ``target_passes`` (batched target forward passes after prefill), ``sequence_steps``
    (sequences x passes), ``propose_time_s`` / ``verify_time_s`` / ``prefill_time_s`` (wall time
    spent drafting, verifying, prefilling; ``propose_time_s`` None: the engine does not time drafting
    apart from verification, which then includes it).
    Memory: ``peak_memory_bytes`` is ``torch.cuda.max_memory_allocated`` on CUDA
    (``memory_kind="cuda_max_allocated"``); on CPU it is the bytes of model weights plus the KV
    caches and decoding buffers allocated for the run (``memory_kind="cpu_weights_and_caches"``),
    and ``peak_rss_delta_bytes`` is how much the run raised the process's peak resident set size
    (0 when an earlier peak was higher; None off Linux/macOS). TensorRT-LLM
    (``memory_kind="trtllm_weights_and_kv_cache"``): the models' weights plus the KV pool it
    allocated; ``device_memory_bytes`` is the device-wide figure an engine reports (None elsewhere).
    ``outputs``: generated token ids per request, kept out of :meth:`to_dict` unless asked for.
    """

    method: str
    depth: int
    concurrency: int
    draft: str | None
    temperature: float | None  # None: each request's own temperature
    seed: int
    device: str
    workload_name: str
    workload_sha256: str
    n_requests: int
    output_tokens: int
    wall_time_s: float
    tokens_per_s: float
    requests_per_s: float
    ttft_ms_p50: float | None
    ttft_ms_p90: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p90: float | None
    tpot_ms_p99: float | None
    acceptance_rate: float | None  # the rest of the counters come from RunCounters
    engine: str = "embedded"
    # The steady window the figures come from (autotune.analysis.steady): its start and length in
    # seconds, mean occupancy (in flight / concurrency), requests finished inside it, and whether the
    # run reached a steady state (False: too short, figures over the whole run). None: a measurement
    # stored before the window existed (its figures include the drain).
    window_start_s: float | None = None
    window_s: float | None = None
    occupancy: float | None = None
    window_requests: int | None = None
    steady: bool | None = None
    request_ttft_ms: list[float] = field(default_factory=list)
    request_tpot_ms: list[float | None] = field(default_factory=list)
    request_tokens: list[int] = field(default_factory=list)  # tokens generated per request, in request order
    # Acceptance length per request category (autotune.analysis.categories: value, 95 % interval,
    # prompts, requests, decode tokens and steps); None for a workload without categories.
    acceptance_by_category: dict[str, dict[str, Any]] | None = None
    outputs: list[list[int]] | None = None

    @property
    def config(self) -> EngineConfig:
        return EngineConfig(self.method, self.depth, self.draft)

    def to_dict(self, include_outputs: bool = False) -> dict[str, Any]:
        """JSON-friendly dict; the generated token ids only with ``include_outputs``."""
        data = asdict(self)
        if not include_outputs:
            data.pop("outputs")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        """Inverse of :meth:`to_dict`; unknown keys are an error (they signal a version mismatch)."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown Measurement fields: {sorted(unknown)}")
        return cls(**data)


def validate_run_options(concurrency: int, temperature: float | None = None) -> None:
    """ConfigurationError for a concurrency below 1 or a temperature that is not a number >= 0."""
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ConfigurationError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if temperature is not None and not (
        isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and math.isfinite(temperature) and temperature >= 0
    ):
        raise ConfigurationError(f"temperature must be a number >= 0 (0 = greedy), got {temperature!r}")


class Engine(Protocol):
    """Runs speculative-decoding configurations; used by ``measure`` and the tuner."""

    name: str
    loads: int  # model loads so far (the tuner reports how often configs forced a reload)

    def load(self, config: EngineConfig) -> None:
        """Prepare ``config`` (loading models only when they are not loaded yet)."""

    def measure(
        self, workload: Workload, concurrency: int, temperature: float | None = None, seed: int = 0
    ) -> Measurement:
        """Run ``workload`` with the loaded config at ``concurrency`` concurrent sequences."""

    def close(self) -> None:
        """Release models and memory."""


@dataclass(frozen=True)
class RunShape:
    """How a run is driven: the workload's steady-state stream at ``concurrency`` requests in
    flight, at ``temperature`` (None: the requests' own), with ``seed``."""

    workload: Workload
    concurrency: int
    temperature: float | None = None
    seed: int = 0


@dataclass(frozen=True)
class RunContext:
    """What one run measured and where: ``config`` driven as ``shape`` says, by ``engine`` (its
    name) on ``device``."""

    config: EngineConfig
    shape: RunShape
    engine: str
    device: str


def measurement_of_run(
    run: RunContext, results: Sequence[RequestResult], counters: RunCounters, wall_time_s: float
) -> Measurement:
    """The :class:`Measurement` of ``run`` (``results`` in request order): throughput and latencies
    over the steady window (:mod:`autotune.analysis.steady`), the same way for every engine; the per-request lists cover
    every request of the run."""
    config, shape, workload = run.config, run.shape, run.shape.workload
    figures = window_figures(results, shape.concurrency)
    window = figures.window
    return Measurement(
        method=config.method,
        depth=config.depth,
        concurrency=shape.concurrency,
        draft=config.draft_model,
        temperature=shape.temperature,
        seed=shape.seed,
        device=run.device,
        workload_name=workload.label,
        workload_sha256=workload.sha256,
        n_requests=len(results),
        output_tokens=sum(len(r.tokens) for r in results),
        wall_time_s=wall_time_s,
        tokens_per_s=figures.tokens_per_s,
        requests_per_s=figures.requests_per_s,
        ttft_ms_p50=figures.ttft_ms[0],
        ttft_ms_p90=figures.ttft_ms[1],
        ttft_ms_p99=figures.ttft_ms[2],
        tpot_ms_p50=figures.tpot_ms[0],
        tpot_ms_p90=figures.tpot_ms[1],
        tpot_ms_p99=figures.tpot_ms[2],
        acceptance_rate=counters.accepted_tokens / counters.drafted_tokens if counters.drafted_tokens else None,
        engine=run.engine,
        window_start_s=window.start_s,
        window_s=window.length_s,
        occupancy=window.occupancy,
        window_requests=window.requests,
        steady=window.steady,
        request_ttft_ms=[ttft_ms(r) for r in results],
        request_tpot_ms=[tpot_ms(r) for r in results],
        request_tokens=[len(r.tokens) for r in results],
        acceptance_by_category=acceptance_by_category(
            [q.category for q in workload.requests], list(workload.requests), [len(r.tokens) for r in results],
            [r.token_times_s for r in results]) if len(workload.requests) == len(results) else None,
        outputs=[list(r.tokens) for r in results],
        **asdict(counters),
    )
