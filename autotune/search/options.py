"""The options of a tuning run, validated before anything is probed, loaded or written."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.engines.base import BUILTIN_DRAFT, MAX_DEPTH, METHODS
from autotune.engines.protocol import (
    DEFAULT_CONFIRM_REPETITIONS,
    DEFAULT_CONFIRM_SECONDS,
    DEFAULT_MIN_REPETITIONS,
    DEFAULT_PRECISION,
    ProtocolOptions,
)
from autotune.errors import ConfigurationError
from autotune.search.objective import Objective, Slo
from autotune.search.samplers import Sampler, get_sampler

if TYPE_CHECKING:
    from autotune.engines.adapter import EngineAdapter
    from autotune.hardware import HardwareProfile
    from autotune.workload import Workload

DEFAULT_MAX_DEPTH = 8
DEFAULT_TRIAL_TIMEOUT_S = 600.0
# Building a TensorRT-LLM LLM loads the weights, captures CUDA graphs and autotunes kernels: minutes.
# TensorRT-LLM and vLLM build an engine per configuration: minutes for a large model on a GPU.
FOLDER_ENGINE_TRIAL_TIMEOUT_S = 1800.0
DEFAULT_HEARTBEAT_INTERVAL_S = 20
DEFAULT_MAX_RETRY = 2
DEFAULT_RETRY_FAILED = 1
MAX_STUDY_NAME = 255


@dataclass(frozen=True)
class TuneOptions:
    """Everything ``autotune tune`` can be told.

    ``engine``: ``embedded`` (model files), ``trtllm`` (Hugging Face model folders, a CUDA GPU and
    TensorRT-LLM installed) or ``vllm`` (folders, vLLM installed; CPU or GPU). ``target``: model file,
    None for the built-in target (a folder, and required, for trtllm and vllm). ``drafts``: draft
    candidates for method draft (``"builtin"`` or model files; folders for trtllm and vllm, where
    ``"builtin"`` means none). ``methods``: None for every method
    the target supports (none, the baseline, is always included). ``concurrencies``: None for the
    hardware-aware default (see :mod:`autotune.search.memory`). ``n_trials``: the study-wide number
    of trials (baselines included; shared by every worker of a distributed study; None: the
    sampler's default, :data:`~autotune.search.samplers.DEFAULT_N_TRIALS` or every point for the
    grid). ``timeout_s``: the whole study's wall-clock budget, step timings, screening and
    confirmation together (:mod:`autotune.search.deadline`): nothing new starts after it, and the
    confirmation stores what it measured by then. ``trial_timeout_s``: limit
    for each engine call (model load, one measurement); the worker is killed past it (None: 600 s,
    1800 s for trtllm and vllm). ``hardware``: a probed profile, None to probe quickly now. ``workload``: JSONL path, None for the built-in
    workload. ``heartbeat_interval_s``: how often a running trial says it is alive; one silent for
    ``grace_period_s`` (default 2 x interval) is failed and retried up to ``max_retry`` times.
    ``retry_failed``: how many more times a configuration whose measurement failed (crash, timeout,
    out of memory) is measured again, see :mod:`autotune.search.trials` for when (None: 1).
    ``sampler``: ``model`` (the model-guided search, :mod:`autotune.search.guide`; the default on
    every engine), ``tpe``, ``random`` or ``grid`` (every point once).
    ``confirm``: end with the confirmation phase (:mod:`autotune.search.confirm`), whose protocol
    aims at ``precision`` (relative half-width of the 95 % intervals) with at most
    ``max_repetitions`` rounds and, once 3 are kept, no new round after ``confirm_seconds`` per
    concurrency (twice that while a speculative leader's speedup over none is undecided,
    :mod:`autotune.engines.protocol`). ``explore_beyond``: the model-guided search may measure up to two depths past
    ``max_depth`` where its prediction says they could win (:mod:`autotune.search.guide`); not part
    of the study's identity, so a study resumes with either.
    """

    db_url: str | None = field(default=None, repr=False)  # may hold a password: never in a repr
    study_name: str | None = None
    target: str | None = None
    drafts: tuple[str, ...] = (BUILTIN_DRAFT,)
    methods: tuple[str, ...] | None = None
    max_depth: int = DEFAULT_MAX_DEPTH
    concurrencies: tuple[int, ...] | None = None
    sampler: str | None = None
    seed: int | None = None
    n_trials: int | None = None
    timeout_s: float | None = None
    objective: str = "throughput"
    slo: Slo = field(default_factory=Slo)
    trial_timeout_s: float | None = None
    workload: str | Path | Workload | None = None
    engine: str = "embedded"
    hardware: HardwareProfile | None = None
    heartbeat_interval_s: int = DEFAULT_HEARTBEAT_INTERVAL_S
    grace_period_s: int | None = None
    max_retry: int = DEFAULT_MAX_RETRY
    retry_failed: int | None = None
    confirm: bool = True
    precision: float = DEFAULT_PRECISION
    max_repetitions: int = DEFAULT_CONFIRM_REPETITIONS
    confirm_seconds: float = DEFAULT_CONFIRM_SECONDS
    explore_beyond: bool = True

    @property
    def protocol(self) -> ProtocolOptions:
        """How the confirmation phase measures each concurrency's finalists."""
        return ProtocolOptions(self.precision, DEFAULT_MIN_REPETITIONS, self.max_repetitions, self.confirm_seconds)

    @property
    def retries(self) -> int:
        """How many more times a transiently failed configuration is measured (``retry_failed`` or 1)."""
        return DEFAULT_RETRY_FAILED if self.retry_failed is None else self.retry_failed

    @property
    def search_sampler(self) -> Sampler:
        """The sampler (:mod:`autotune.search.samplers`): as given, else the engine's default, ``model``
        (model-guided, :mod:`autotune.search.guide`) on every engine: each times step costs at forced
        acceptance (vLLM by synthetic acceptance, TensorRT-LLM by its forcing variable, unrun on a GPU:
        docs/trtllm.md). When the timing fails the study stops rather than search without the model;
        ``tpe`` is the user's choice then. ConfigurationError for an unknown or removed sampler."""
        return get_sampler(self.engine_adapter.default_sampler if self.sampler is None else self.sampler)

    @property
    def engine_adapter(self) -> EngineAdapter:
        """What the engine can do (ConfigurationError for an unknown engine)."""
        from autotune.engines.registry import engine_adapter

        return engine_adapter(self.engine)

    @property
    def folder_engine(self) -> bool:
        """True for the engines that run Hugging Face model folders in worker processes of their own."""
        return self.engine_adapter.runs_model_folders

    @property
    def trial_timeout(self) -> float:
        """The per-call limit in seconds (``trial_timeout_s`` or the engine's default)."""
        if self.trial_timeout_s is not None:
            return self.trial_timeout_s
        return FOLDER_ENGINE_TRIAL_TIMEOUT_S if self.folder_engine else DEFAULT_TRIAL_TIMEOUT_S

    @property
    def model_drafts(self) -> tuple[str, ...]:
        """The draft candidates that name a model (for trtllm and vllm, ``"builtin"`` names none)."""
        if self.folder_engine:
            return tuple(draft for draft in self.drafts if draft != BUILTIN_DRAFT)
        return self.drafts

    @property
    def objective_spec(self) -> Objective:
        return Objective(self.objective, self.slo)

    def validate(self) -> None:
        """Raise ConfigurationError for the first invalid option (nothing is read or written)."""
        from autotune.engines.registry import check_engine

        check_engine(self.engine)  # unknown engine, or trtllm / vllm not installed: one line, at once
        self._validate_models()
        self.validate_values()

    def validate_values(self) -> None:
        """The checks of :meth:`validate` that hold on any machine: everything but whether the
        engine is installed and the model files exist here. A service that queues the tune for
        another machine checks these; the machine that runs it checks the rest."""
        if self.study_name is not None and not (0 < len(self.study_name.strip()) <= MAX_STUDY_NAME):
            raise ConfigurationError(f"study name must have 1..{MAX_STUDY_NAME} characters, got {self.study_name!r}")
        for method in self.methods or ():
            if method not in METHODS:
                raise ConfigurationError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
        if len(set(self.drafts)) != len(self.drafts):
            raise ConfigurationError("a draft model is listed twice; list each draft once")
        _require_int("max depth", self.max_depth, 1, MAX_DEPTH)
        if self.concurrencies is not None:
            if not self.concurrencies:
                raise ConfigurationError("--concurrency must list at least one level")
            for concurrency in self.concurrencies:
                _require_int("concurrency", concurrency, 1)
        sampler = self.search_sampler
        if sampler.guided and not self.engine_adapter.times_steps:
            raise ConfigurationError(f"sampler {sampler.name} needs step-cost timings, which the {self.engine} adapter "
                                     "does not take; pass --sampler tpe")
        if self.seed is not None:
            _require_int("seed", self.seed, 0)
        if self.n_trials is not None:
            _require_int("n_trials", self.n_trials, 1)
        for name, seconds in (("timeout", self.timeout_s), ("trial timeout", self.trial_timeout_s)):
            if seconds is not None and not (_is_number(seconds) and math.isfinite(seconds) and seconds > 0):
                raise ConfigurationError(f"{name} must be a number of seconds > 0, got {seconds!r}")
        _require_int("heartbeat interval", self.heartbeat_interval_s, 1)
        if self.grace_period_s is not None:
            _require_int("grace period", self.grace_period_s, self.heartbeat_interval_s + 1)
        _require_int("max retry", self.max_retry, 0)
        _require_int("retry failed", self.retries, 0)
        if not (_is_number(self.confirm_seconds) and math.isfinite(self.confirm_seconds) and self.confirm_seconds > 0):
            raise ConfigurationError(f"confirm seconds must be a number > 0, got {self.confirm_seconds!r}")
        _require_int("max repetitions", self.max_repetitions, DEFAULT_MIN_REPETITIONS)
        self.protocol.validate()  # the precision
        self.objective_spec.validate()

    def _validate_models(self) -> None:
        if self.folder_engine:
            if self.target is None or not Path(self.target).is_dir():
                raise ConfigurationError(f"--engine {self.engine} needs --target MODEL_FOLDER (a Hugging Face model "
                                         f"folder); got {self.target!r}")
            for draft in self.model_drafts:
                if not Path(draft).is_dir():
                    raise ConfigurationError(f"draft folder {draft} does not exist; pass a Hugging Face model folder")
            return
        if self.target is not None:
            _require_model_file("target", self.target, "omit --target")
        for draft in self.drafts:
            if draft != BUILTIN_DRAFT:
                _require_model_file("draft", draft, "pass 'builtin'")


def _require_model_file(role: str, path: str, otherwise: str) -> None:
    """The embedded engine loads a model file; a folder is a Hugging Face checkpoint for the folder engines."""
    if Path(path).is_dir():
        raise ConfigurationError(f"{role} model {path} is a folder: the embedded engine takes a .safetensors file "
                                 "(a Hugging Face folder needs --engine trtllm or vllm)")
    if not Path(path).is_file():
        raise ConfigurationError(f"{role} model file {path} does not exist; pass a model file or {otherwise}")


def _require_int(name: str, value: object, low: int, high: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in {low}..{high}"
        raise ConfigurationError(f"{name} must be an integer {bounds}, got {value!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


