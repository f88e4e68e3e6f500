"""``autotune measure``: measure one configuration with the measurement protocol, paired with the
baseline, optionally verifying its outputs against the baseline's.

With no options it runs the built-in target with the built-in draft model at depth
``DEFAULT_DEPTH`` (method draft) on the built-in workload at concurrency 1, greedy: the setup where
speculation is expected to pay off on a CPU, so the first command a user runs shows it working.
The configuration and the autoregressive baseline (method none) at the same concurrency are measured
in interleaved rounds (:mod:`autotune.engines.protocol`) until their 95 % intervals are within the
precision asked for, so every figure comes with its interval and the speedup is paired.
``verify`` compares the greedy outputs of the two token for token; a divergence is reported with
the target's logit margin between the two tokens (near 0: a float near-tie, not a bug).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.analysis.intervals import Estimate
from autotune.engines.base import Engine, EngineConfig, Measurement, validate_run_options
from autotune.engines.protocol import ProtocolOptions, ProtocolResult, RepeatedMeasurement, measure_repeatedly
from autotune.engines.base import RunShape
from autotune.errors import ConfigurationError
from autotune.workload import Workload, load_workload

DEFAULT_METHOD = "draft"
DEFAULT_DEPTH = 4


@dataclass(frozen=True)
class Divergence:
    """Where a speculative output first differs from the baseline output.

    ``expected``/``got`` are None where one output ended (EOS or length) before the other.
    ``logit_margin`` = target logit(expected) - logit(got) at that position, None when unknown.
    """

    request_index: int
    token_index: int
    expected: int | None
    got: int | None
    logit_margin: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_index": self.request_index,
            "token_index": self.token_index,
            "expected": self.expected,
            "got": self.got,
            "logit_margin": self.logit_margin,
        }


@dataclass
class MeasureReport:
    """A configuration's repeated measurement, the baseline's from the same rounds (absent for
    method none, which is its own baseline) and, with verify, the comparison of their outputs."""

    config: EngineConfig
    protocol: ProtocolResult
    outputs_match: bool | None = None
    first_divergence: Divergence | None = None

    @property
    def repeated(self) -> RepeatedMeasurement:
        return self.protocol.of(self.config)

    @property
    def measurement(self) -> Measurement:
        """The configuration's central figures (means over the kept rounds)."""
        return self.repeated.measurement

    @property
    def baseline(self) -> Measurement | None:
        """The baseline's central figures, None when the configuration is the baseline."""
        if self.config.method == "none" or self.protocol.baseline is None:
            return None
        return self.protocol.baseline.measurement

    @property
    def speedup(self) -> Estimate | None:
        """Paired tokens/s ratio over the baseline with its 95 % interval (None for method none)."""
        return self.repeated.speedup

    def to_dict(self) -> dict[str, Any]:
        repeated = self.repeated
        base = self.protocol.baseline if self.baseline is not None else None
        return {
            "config": {"method": self.config.method, "depth": self.config.depth, "draft": self.config.draft_model},
            "concurrency": self.protocol.concurrency,
            "repetitions": repeated.repetitions,
            "estimates": {name: e.to_dict() for name, e in repeated.estimates.items()},
            "speedup": None if self.speedup is None else self.speedup.to_dict(),
            "capped": self.protocol.capped,
            "rounds_discarded": self.protocol.rounds_discarded,
            "faults": list(self.protocol.faults),
            "noise": repeated.noise,
            "noisy": repeated.noisy,
            "samples": repeated.samples,
            "measurement": self.measurement.to_dict(),
            "baseline": None if base is None else {
                "repetitions": base.repetitions,
                "estimates": {name: e.to_dict() for name, e in base.estimates.items()},
                "samples": base.samples,
                "measurement": base.measurement.to_dict(),
            },
            "protocol": self.protocol.options.to_dict(),
            "elapsed_s": self.protocol.elapsed_s,
            "outputs_match": self.outputs_match,
            "first_divergence": None if self.first_divergence is None else self.first_divergence.to_dict(),
        }


def first_divergence(expected: list[list[int]], got: list[list[int]]) -> Divergence | None:
    """First (request, token) where two runs' outputs differ; None when they are identical."""
    if len(expected) != len(got):
        raise ValueError(f"runs have {len(expected)} and {len(got)} requests")
    for request_index, (want, have) in enumerate(zip(expected, got)):
        for token_index in range(max(len(want), len(have))):
            a = want[token_index] if token_index < len(want) else None
            b = have[token_index] if token_index < len(have) else None
            if a != b:
                return Divergence(request_index, token_index, a, b)
    return None


@dataclass(frozen=True)
class MeasureRequest:
    """One configuration to measure against the baseline, on which models and device.

    ``depth`` None means ``DEFAULT_DEPTH`` for a speculative method and 0 for none; ``draft``
    None means the built-in draft for method draft; ``workload`` a JSONL path, a Workload, or None
    for the built-in workload; ``temperature`` overrides the requests' own; ``verify`` compares the
    greedy outputs with the baseline's; ``target`` None is the built-in target; ``device`` is the
    embedded engine's torch device.
    """

    method: str = DEFAULT_METHOD
    depth: int | None = None
    concurrency: int = 1
    draft: str | Path | None = None
    workload: str | Path | Workload | None = None
    temperature: float | None = None
    verify: bool = False
    device: str = "cpu"
    seed: int = 0
    target: str | Path | None = None


def measure_configuration(
    request: MeasureRequest = MeasureRequest(),
    *,
    engine: Engine | str | None = None,
    protocol: ProtocolOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> MeasureReport:
    """Measure ``request`` with ``engine``: an engine object, or the name of one (``embedded``, the
    default, ``trtllm`` or ``vllm``: the request's ``target`` and ``draft`` are then Hugging Face
    model folders, the target required, and the run happens in a worker process).

    ``protocol`` says how precisely to measure (default: ±5 % at 95 %, 3 to 10 rounds). Invalid
    options, and a configuration that cannot fit on the device (the check ``tune`` applies: memory at
    this concurrency, the models' context windows), raise ConfigurationError before any model is loaded.
    """
    depth = request.depth
    if depth is None:
        depth = 0 if request.method == "none" else DEFAULT_DEPTH
    config = EngineConfig(request.method, depth, None if request.draft is None else str(request.draft))
    config.validate()
    temperature = request.temperature
    validate_run_options(request.concurrency, temperature)
    protocol = protocol or ProtocolOptions()
    protocol.validate()
    loaded_workload = load_workload(request.workload)
    if request.verify:
        sampled = temperature > 0 if temperature is not None else any(r.temperature > 0 for r in loaded_workload.requests)
        if sampled:
            raise ConfigurationError(
                "verify compares greedy outputs token for token, but this run samples (temperature > 0); "
                "pass temperature 0"
            )
    run = _Run(config, loaded_workload, request.concurrency, temperature, request.seed, request.verify, protocol,
               progress)
    if engine is not None and not isinstance(engine, str):
        return run.on(engine)
    named = _named_engine(engine or "embedded", request.target, request.device, run)
    try:
        return run.on(named)
    finally:
        named.close()  # ours to release: a TensorRT-LLM engine holds a worker process


@dataclass(frozen=True)
class _Run:
    """What to measure, ready to run on an engine."""

    config: EngineConfig
    workload: Workload
    concurrency: int
    temperature: float | None
    seed: int
    verify: bool
    protocol: ProtocolOptions
    progress: Callable[[str], None] | None

    def on(self, engine: Engine) -> MeasureReport:
        in_worker = getattr(engine, "measure_repeatedly", None)  # engines that run in a worker process
        if in_worker is not None:
            result = in_worker([EngineConfig("none"), self.config], self.workload, self.concurrency, self.temperature,
                               self.seed, self.protocol, notice=self.progress)
        else:
            shape = RunShape(self.workload, self.concurrency, self.temperature, self.seed)
            result = measure_repeatedly(engine, [self.config], shape, self.protocol, baseline=True,
                                        progress=self.progress)
        report = MeasureReport(self.config, result)
        if not self.verify or report.baseline is None:
            return MeasureReport(self.config, result, True if self.verify else None)
        baseline, measurement = report.baseline, report.measurement
        divergence = first_divergence(baseline.outputs or [], measurement.outputs or [])
        if divergence is not None and divergence.expected is not None and divergence.got is not None:
            divergence = _with_margin(engine, self.workload, baseline, divergence)
        return MeasureReport(self.config, result, divergence is None, divergence)


def _named_engine(name: str, target: str | Path | None, device: str, run: _Run) -> Engine:
    """The engine called ``name`` (registry), built for ``target``; ConfigurationError before
    anything loads when the name is unknown, TensorRT-LLM / vLLM is missing, its target is not given
    or ``run`` cannot fit on the device."""
    from autotune.engines.registry import check_engine, create_engine, engine_adapter  # torch only when measuring

    check_engine(name)
    if engine_adapter(name).runs_model_folders:
        if target is None:
            raise ConfigurationError(f"--engine {name} needs --target MODEL_FOLDER (a Hugging Face model folder)")
        _require_fit(run, name, target, _folder_engine_device())
        return create_engine(name, target=target)
    _require_fit(run, name, target, device)
    return create_engine(name, target=target, device=device)


def _require_fit(run: _Run, engine: str, target: str | Path | None, device: str) -> None:
    """Refuse ``run`` with the memory and context-length check ``tune`` applies to every candidate
    (:class:`autotune.search.memory.MemoryBudget`), from the model files alone: an oversized batch
    would otherwise fail inside the allocator, after the models were loaded."""
    from autotune.engines.registry import engine_adapter
    from autotune.search.memory import memory_budget

    config = run.config
    folders = engine_adapter(engine).runs_model_folders
    draft = config.draft_model
    drafts = {} if draft is None else {draft: _footprint(draft, "draft", folders)}
    budget = memory_budget(_device_bytes(device), _footprint(target, "target", folders), drafts, run.workload,
                       whole_prompt_logits=not folders)
    budget.require_fit(config.method, config.depth, run.concurrency, draft)


def _footprint(model: str | Path | None, role: str, folder: bool) -> Any:
    """The ModelFootprint of a Hugging Face folder (``folder``) or of an embedded model file
    (None / ``"builtin"``: the built-in one), read without loading any weights."""
    if folder:
        from autotune.models.folder import read_model
        from autotune.models.footprint import folder_footprint

        return folder_footprint(read_model(model, role))
    from autotune.engines.embedded.footprint import model_path, read_footprint

    return read_footprint(model_path(model, role))


def _folder_engine_device() -> str:
    """Where TensorRT-LLM or vLLM will run: the GPU when torch sees one, else the CPU (vLLM's CPU
    build), as tune's hardware probe decides."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _device_bytes(device: str) -> int:
    """Memory of the torch ``device``: the GPU's, or the machine's RAM for the CPU (as tune's
    HardwareProfile.memory_total_bytes); ConfigurationError / EngineError for a device that is not here."""
    import torch

    from autotune.engines.embedded.engine import resolve_device

    resolved = resolve_device(device)
    if resolved.type == "cuda":
        count = torch.cuda.device_count()
        if (resolved.index or 0) >= count:  # torch would fail with an assertion, not a message
            raise ConfigurationError(f"device {device} does not exist: this machine has {count} CUDA device(s), "
                                     f"cuda:0 to cuda:{count - 1}; pass one of them with --device")
        return torch.cuda.get_device_properties(resolved).total_memory
    from autotune.hardware.cpu import read_cpu_spec

    return int(read_cpu_spec()["ram_total_bytes"])


def _with_margin(engine: Engine, workload: Workload, baseline: Measurement, divergence: Divergence) -> Divergence:
    """``divergence`` with the target's logit margin, when the engine can compute it."""
    margin_of = getattr(engine, "target_logit_margin", None)
    if margin_of is None:
        return divergence
    request = workload.requests[divergence.request_index]
    prefix = (baseline.outputs or [])[divergence.request_index][: divergence.token_index]
    margin = margin_of(request, prefix, divergence.expected, divergence.got)
    return Divergence(divergence.request_index, divergence.token_index, divergence.expected, divergence.got, margin)
