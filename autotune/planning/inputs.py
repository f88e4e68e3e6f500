"""What ``autotune plan`` reads before it predicts: model configs, deployment options, calibration.

* A target (``--config``) or draft (``--draft-config``) config.json, or a folder holding one: a
  causal LM (an ``architectures`` entry ending in ``ForCausalLM`` or ``LMHeadModel``; a draft may be
  an EAGLE-3 head) with the sizes the roofline needs.
* :class:`Deployment`: tensor parallelism, the weights' and the KV cache's dtype, the serving
  engine and the sequence lengths, checked against the model and the device.
* The device's spec for that deployment: the dtype's tensor-core peak, ``tp`` GPUs, and the
  calibration of :mod:`autotune.perfmodel.calibration`: a stored probe's bandwidth when the database
  has one of the same GPU model, and (``--calibration auto``, the default, or ``stored``) the step
  overhead fitted to a stored real-engine cost profile of the same GPU model and engine
  (:mod:`autotune.perfmodel.step_fit`); ``--calibration assumed`` keeps the named constants.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autotune.errors import ConfigurationError
from autotune.hardware.catalog import DTYPE_BYTES, AcceleratorSpec, catalog_nvml_name
from autotune.models.folder import config_param
from autotune.models.kind import EAGLE3, draft_kind
from autotune.models.layers import unsupported_layers
from autotune.perfmodel.calibration import DEFAULT_ENGINE, ENGINE_STEP_OVERHEAD_US, calibrate
from autotune.perfmodel.cost import CostPoint
from autotune.perfmodel.roofline import ModelShape
from autotune.perfmodel.step_fit import StepFit, fit_step_costs
from autotune.planning.costs import STEP_COSTS, ConfigSource, Pricing
from autotune.profiles.data import ModelInfo

DTYPES = ("bf16", "fp8", "fp4")
# --calibration: a stored cost profile's fit when there is one (auto), required (stored), or the
# named constants whatever is stored (assumed).
CALIBRATIONS = ("auto", "stored", "assumed")
MAX_TP = 64
MAX_SEQUENCE = 1 << 20
DEFAULT_ISL = 1024
DEFAULT_OSL = 1024
# The sizes a Hugging Face config must give (MoE configs give moe_intermediate_size besides).
REQUIRED_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size")


@dataclass(frozen=True)
class Deployment:
    """How the model is served: ``tp`` GPUs per replica (``ep`` of them split a MoE's experts, the
    rest split each expert), the dtypes (None: the checkpoint's), the engine whose step overhead
    applies and its version (None: the measured data's current one), the prompt and output lengths
    (None: the workload's), where the calibration comes from (one of :data:`CALIBRATIONS`, module
    doc) and which source prices the steps (:data:`autotune.planning.costs.STEP_COSTS`)."""

    tp: int = 1
    dtype: str | None = None
    kv_dtype: str | None = None
    engine: str = DEFAULT_ENGINE
    isl: int | None = None
    osl: int | None = None
    calibration: str = "auto"
    ep: int = 1
    engine_version: str | None = None
    step_costs: str = "auto"

    def __post_init__(self) -> None:
        if not 1 <= self.tp <= MAX_TP:
            raise ConfigurationError(f"--tp must be between 1 and {MAX_TP}, got {self.tp}")
        if self.step_costs not in STEP_COSTS:
            raise ConfigurationError(f"--step-costs must be one of {', '.join(STEP_COSTS)}, got {self.step_costs!r}")
        if self.engine_version is not None and self.step_costs == "roofline":
            raise ConfigurationError("--engine-version picks the measured kernel data: it needs --step-costs auto "
                                     "or silicon")
        if self.ep < 1 or self.tp % self.ep:
            raise ConfigurationError(f"--ep must divide --tp {self.tp} (experts split over ep of the tp GPUs), "
                                     f"got {self.ep}")
        for flag, value in (("--dtype", self.dtype), ("--kv-dtype", self.kv_dtype)):
            if value is not None and value not in DTYPES:
                raise ConfigurationError(f"{flag} must be one of {', '.join(DTYPES)}, got {value!r}")
        if self.engine not in ENGINE_STEP_OVERHEAD_US:
            raise ConfigurationError(f"--engine must be one of {', '.join(ENGINE_STEP_OVERHEAD_US)}, got {self.engine!r}")
        if self.calibration not in CALIBRATIONS:
            raise ConfigurationError(f"--calibration must be one of {', '.join(CALIBRATIONS)}, got {self.calibration!r}")
        for flag, value in (("--isl", self.isl), ("--osl", self.osl)):
            if value is not None and not 1 <= value <= MAX_SEQUENCE:
                raise ConfigurationError(f"{flag} must be between 1 and {MAX_SEQUENCE}, got {value}")

    def pricing(self, gpu: str | None, target: ConfigSource | None, drafts: dict[str, ConfigSource | None]) -> Pricing:
        """How this deployment's steps are priced (:mod:`autotune.planning.costs`) on the GPU NVML
        calls ``gpu``, for the models the measured kernel data can build (None: one it cannot)."""
        return Pricing(mode=self.step_costs, gpu=gpu, engine=self.engine, engine_version=self.engine_version,
                       ep=self.ep, dtype=self.dtype, kv_dtype=self.kv_dtype, target=target,
                       drafts={label: source for label, source in drafts.items() if source is not None})

    def shape(self, shape: ModelShape, role: str) -> ModelShape:
        """``shape`` in the deployment's dtypes; ``--tp`` must divide its attention heads."""
        if shape.heads % self.tp:
            raise ConfigurationError(f"--tp {self.tp} does not divide the {role}'s {shape.heads} attention heads")
        return replace(shape, bytes_per_param=DTYPE_BYTES[self.dtype] if self.dtype else shape.bytes_per_param,
                       kv_bytes=DTYPE_BYTES[self.kv_dtype] if self.kv_dtype else shape.kv_bytes)


def compute_dtype(shape: ModelShape, spec: AcceleratorSpec, asked: str | None) -> str:
    """The tensor-core dtype the GEMMs run in: the asked one, else the checkpoint's weights' (an
    FP8 or FP4 checkpoint on a GPU with such tensor cores), else bf16 (weight-only quantisation
    computes in 16 bits)."""
    if asked is not None:
        peak = {"bf16": spec.bf16_tflops, "fp8": spec.fp8_tflops, "fp4": spec.fp4_tflops}[asked]
        if not peak:
            raise ConfigurationError(f"the {spec.name} has no {asked.upper()} tensor cores: use --dtype "
                                     f"{'fp8 or bf16' if spec.fp8_tflops else 'bf16'}")
        return asked
    if shape.bytes_per_param <= DTYPE_BYTES["fp4"] and spec.fp4_tflops:
        return "fp4"
    if shape.bytes_per_param <= DTYPE_BYTES["fp8"] and spec.fp8_tflops:
        return "fp8"
    return "bf16"


@dataclass(frozen=True)
class StoredCalibration:
    """What the database holds for calibrating a GPU model: a probe's bandwidth fraction and its
    label, a stored cost profile's fit, and the GPU's name (for messages)."""

    gpu: str
    probe: tuple[float, str] | None = None
    fit: StepFit | None = None


def deployment_spec(spec: AcceleratorSpec, deployment: Deployment, dtype: str,
                    stored: StoredCalibration | None) -> AcceleratorSpec:
    """The device as the deployment uses it (module doc). A CPU's figures are its probe's
    measurements already: no calibration, no tensor parallelism."""
    if spec.device_type != "cuda":
        if deployment.tp != 1 or deployment.dtype:
            raise ConfigurationError(f"{spec.name} is a CPU: --tp and --dtype plan GPUs only")
        return replace(spec, calibration="the probe's measured bandwidth, FLOP/s and launch overhead")
    stored = stored or StoredCalibration(spec.name)
    fraction, label = stored.probe if stored.probe else (None, None)
    fit, no_fit = stored.fit, None
    if deployment.calibration == "assumed":
        fit, no_fit = None, "--calibration assumed"
    elif fit is None:
        no_fit = f"no timed cost profile of the {stored.gpu} with {deployment.engine} is stored"
        if deployment.calibration == "stored":
            raise ConfigurationError(f"--calibration stored: {no_fit}; tune on that GPU with --engine "
                                     f"{deployment.engine} first, or use --calibration auto")
    return calibrate(replace(spec, dtype=dtype, tp=deployment.tp), deployment.engine, fraction, label, fit, no_fit)


def stored_calibration(db_url: str | None, hardware: str, engine: str, spec: AcceleratorSpec) -> StoredCalibration | None:
    """The stored probe and cost-profile fit of the GPU model the catalog calls ``hardware`` (``spec``
    its catalog entry), when a database exists (a plan from a config must not create one)."""
    from autotune.store import open_database
    from autotune.store.database import resolve_database_url

    nvml_name = catalog_nvml_name(hardware)
    url = resolve_database_url(db_url)
    if nvml_name is None or (url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file()):
        return None
    with open_database(url) as database, database.session() as session:
        return stored_calibration_in(session, nvml_name, engine, spec)


def stored_calibration_in(session: Any, nvml_name: str, engine: str, spec: AcceleratorSpec) -> StoredCalibration:
    """:func:`stored_calibration` in an open session: the newest probe of a GPU called
    ``nvml_name``, and the fit of the newest timed cost profile of ``engine`` on one that a fit
    can read (its target's config gives a shape and a baseline point is memory-bound)."""
    from autotune.profiles.records import model_info
    from autotune.store import plan_queries

    probe = plan_queries.probed_bandwidth_fraction(session, nvml_name)
    fraction, label = probe if probe else (None, None)
    for record in plan_queries.timed_cost_profiles(session, nvml_name, engine):
        model = model_info(record.target_model)
        try:
            shape = ModelShape.from_config(model.config, params=model.num_params, n_mtp=model.num_mtp_modules)
            points = [CostPoint.from_dict(point) for point in record.points]
        except (KeyError, TypeError, ValueError):
            continue  # a config or points this version cannot read: the next profile
        tuned = calibrate(replace(spec, dtype=compute_dtype(shape, spec, None)), engine, fraction, label)
        fit = fit_step_costs(tuned, shape, points, f"the timed cost profile {record.id} of {model.name} on "
                                                   f"{record.hardware.name}")
        if fit is not None:
            return StoredCalibration(nvml_name, probe, fit)
    return StoredCalibration(nvml_name, probe)


# -- configs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigModel:
    """A model known by its config.json only: its record for the plan, its shape, and its
    hf_quant_config.json beside it (None without one)."""

    info: ModelInfo
    shape: ModelShape
    kind: str  # "target", or a draft's kind (models.kind)
    quant: dict[str, Any] | None = None

    @property
    def source(self) -> ConfigSource:
        """The model as the measured kernel data builds it (:mod:`autotune.planning.costs`)."""
        return ConfigSource(self.info.name, self.info.config, self.quant, self.kind)


def read_config_model(path: str | Path, role: str) -> ConfigModel:
    """The config at ``path`` (a config.json, or a folder with one) as a plan's ``role`` (module doc)."""
    file = Path(path)
    file = file / "config.json" if file.is_dir() else file
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{role} config {file} cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{role} config {file} is not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ConfigurationError(f"{role} config {file} must hold a JSON object")
    architectures = [str(a) for a in config.get("architectures") or config_param(config, "architectures") or []]
    kind = "target" if role == "target" else draft_kind(config)
    # A multimodal wrapper (Llama-4, Gemma-3/4, Qwen-VL, Mistral-3) generates with its language model:
    # that is what is planned (the encoders run at prefill only and are not counted).
    if not any("ForCausalLM" in a or a.endswith("LMHeadModel") or a.endswith("ForConditionalGeneration")
               for a in architectures):
        raise ConfigurationError(f"{role} config {file} is not a causal language model (architectures: "
                                 f"{', '.join(architectures) or 'none'})")
    other = unsupported_layers(config)
    if other:
        raise ConfigurationError(f"{role} config {file} declares {other}: a plan prices attention + MLP layers only")
    required = REQUIRED_FIELDS if kind != EAGLE3 else REQUIRED_FIELDS[:3]  # a head: one layer, maybe no vocab
    missing = [name for name in required if not config_param(config, name)]
    if missing:
        raise ConfigurationError(f"{role} config {file} lacks {', '.join(missing)}")
    try:
        # An EAGLE-3 head's own output head covers its draft vocabulary only (draft_vocab_size).
        head_vocab = config.get("draft_vocab_size") if kind == EAGLE3 else None
        quant = _hf_quant_config(file, role)
        shape = ModelShape.from_config({**config, "vocab_size": head_vocab} if head_vocab else config, quant=quant)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"{role} config {file}: {exc}") from None
    name = file.parent.name if file.name == "config.json" else file.stem
    info = ModelInfo(fingerprint=hashlib.sha256(file.read_bytes()).hexdigest(), name=name, role=role.split()[0],
                     source=str(file), num_params=shape.total_params, num_mtp_modules=shape.n_mtp,
                     vocab_size=shape.vocab, config=config)
    return ConfigModel(info, shape, kind, quant)


def _hf_quant_config(file: Path, role: str) -> dict[str, Any] | None:
    """The hf_quant_config.json beside ``file`` (ModelOpt's export: ``hf_quant_config.json`` in the
    folder of a config.json, ``NAME_hf_quant_config.json`` beside a ``NAME_config.json``), or None."""
    sibling = (file.parent / "hf_quant_config.json" if file.name == "config.json" else
               file.with_name(file.name.removesuffix("config.json") + "hf_quant_config.json")
               if file.name.endswith("_config.json") else None)
    if sibling is None or not sibling.is_file():
        return None
    try:
        found = json.loads(sibling.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{role} quantisation config {sibling} cannot be read ({exc})") from None
    return found if isinstance(found, dict) else None
