"""``autotune plan``: what speculative decoding would do on hardware you do not have.

Acceptance is a property of (target, proposer, workload), not of the machine (DESIGN.md section
9): the acceptance profiles ``autotune tune`` stored on any machine carry over. Step costs do not:
here they come from NVIDIA's measured kernels for the GPU, engine and version where
aiconfigurator-core has them, part by part, else from a roofline of the device
(:mod:`autotune.planning_costs`, ``--step-costs``; :mod:`autotune.perfmodel.roofline`) — a catalog
GPU (``--hardware h200``) or a stored hardware profile (a CUDA one through its NVML name's datasheet
figures, a CPU one through its probe's measured bandwidth and FLOP/s). The performance model
(:class:`~autotune.perfmodel.model.PerformanceModel`) combines the two and replays the workload
at each concurrency. Every figure is a prediction and is labelled so; nothing is measured and
nothing is written to the database.

Two entry points: :func:`plan_deployment` for a target tuned on any machine (its stored acceptance),
and :func:`plan_from_config` for a model known by its config.json only (acceptance given, or another
target's stored profile as a proxy; :mod:`autotune.planning_inputs` reads the configs and checks
the deployment). Both take a :class:`~autotune.planning_inputs.Deployment` (tensor parallelism,
dtypes, engine, ``--isl/--osl``) and calibrate the roofline (:mod:`autotune.perfmodel.calibration`);
the plan says which calibration it used and warns when the assumed step overhead is more than
:data:`OVERHEAD_WARNING` of a decoding step, when acceptance is a proxy, and when the target does
not fit (naming the smallest tensor parallelism that does).

Per concurrency the plan picks the configuration with the most predicted tokens/s, preferring the
simpler one (none, n-gram, MTP, draft model; then the smaller depth) when it is within
:data:`SIMPLER_WITHIN` of it — closer than the roofline can tell apart — and checks memory
with the estimate and margin the preflight and the tuner use (:mod:`autotune.models.fit`): weights,
the caches of ``batch x (longest prompt + max_tokens + 1 + depth)`` positions and the last prompt
position's logits must fit in 90 % of one GPU's memory (weights and KV split over ``--tp`` GPUs).

The workload's requests are replayed as the steady-state stream a measurement runs
(:mod:`autotune.analysis.steady`: cycled to at least 4 requests per row, figures over the window
between ramp-up and drain): a plan for batch 256 is about a server kept busy at 256 rows, not about
the 16 requests of the built-in workload. With ``--isl/--osl`` every request has those lengths, so
the KV cache a step reads is that of real sequences at any concurrency.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.analysis.decision import SIMPLICITY
from autotune.analysis.steady import STREAM_FACTOR
from autotune.errors import ConfigurationError, NotFoundError
from autotune.hardware.catalog import (
    AcceleratorSpec,
    accelerator_for_gpu,
    accelerator_names,
    catalog_nvml_name,
    find_accelerator,
)
from autotune.models import fit
from autotune.models.footprint import ModelFootprint
from autotune.models.kind import draft_kind
from autotune.perfmodel.acceptance import AcceptanceCurve
from autotune.perfmodel.given_acceptance import given_curve, rates_from_length
from autotune.perfmodel.model import PRIOR_SIGMA, Z95, PerformanceModel, Prediction
from autotune.perfmodel.roofline import ModelShape, forward_pass
from autotune.perfmodel.step_costs import cost_profile
from autotune.planning_costs import ConfigSource, Priced, Pricing
from autotune.planning_inputs import (
    DEFAULT_ISL,
    DEFAULT_OSL,
    MAX_TP,
    Deployment,
    StoredCalibration,
    compute_dtype,
    deployment_spec,
    stored_calibration,
    stored_calibration_in,
    read_config_model,
)
from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo
from autotune.workload import Workload, load_workload

DEFAULT_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_CONCURRENCY = 4096
MAX_DEPTH = 16
SIMPLER_WITHIN = 0.02
# Warn when the assumed per-step overhead is more than this share of a decoding step (issue 22).
OVERHEAD_WARNING = 0.30
# Without the tokenizer at hand: ~4 bytes per token for BPE vocabularies on English and code.
BYTES_PER_TOKEN = 4
# A CPU runs PyTorch eagerly: each op pays the probe's measured launch overhead (the roofline's
# kernel latency; the embedded engine's layer is roofline.EMBEDDED_LAYER_KERNELS ops). Besides the
# roofline's pass-end kernels (embedding, final norm, head) a pass runs ~7 more ops (sampling,
# cache bookkeeping).
CPU_OPS_PER_PASS = 7
PREDICTED = "PREDICTED"


# -- the result ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    """The predicted best configuration at one concurrency (``fits``: in 90 % of the memory)."""

    concurrency: int
    label: str
    method: str
    draft: str | None
    depth: int
    predicted_tokens_per_s: float
    predicted_tokens_per_s_low: float
    predicted_tokens_per_s_high: float
    predicted_speedup: float
    predicted_baseline_tokens_per_s: float
    predicted_tpot_ms_p50: float | None
    predicted_acceptance_length: float
    memory_bytes: int
    memory_limit_bytes: int
    fits: bool
    leader: str | None = None  # the fastest, when a simpler one within SIMPLER_WITHIN was preferred
    alternatives: list[dict[str, Any]] = field(default_factory=list)  # best depth of each proposer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DeploymentPlan:
    """A what-if plan: the predicted best configuration per concurrency on ``hardware`` (see the
    module doc); ``basis`` says what the prediction rests on."""

    hardware: AcceleratorSpec
    hardware_origin: dict[str, Any]
    target: ModelInfo
    drafts: dict[str, ModelInfo]
    workload: dict[str, Any]
    rows: list[PlanRow]
    basis: dict[str, Any]
    notes: list[str]
    warnings: list[str] = field(default_factory=list)
    acceptance_summary: str = ""  # where the acceptance comes from, for the title

    @property
    def title(self) -> str:
        where = f"{self.hardware.tp}x " if self.hardware.tp > 1 else ""
        return f"{PREDICTED} — {self.cost_source} for {where}{self.hardware.name}, {self.acceptance_summary}; not measured"

    @property
    def cost_source(self) -> str:
        """What priced the steps, in words: ``roofline`` or ``measured kernels (DATA)``."""
        cost = self.basis["cost"]
        return f"measured kernels ({cost['data']})" if cost["source"] == "silicon" else "roofline"

    @property
    def recommended(self) -> PlanRow | None:
        """The row with the most predicted tokens/s among those that fit (None if none fits)."""
        fitting = [row for row in self.rows if row.fits]
        return max(fitting, key=lambda row: row.predicted_tokens_per_s) if fitting else None

    def basis_lines(self) -> list[str]:
        """The basis in words: which stored acceptance profiles, which hardware figures."""
        lines = []
        for item in self.basis["acceptance"]:
            lengths = " / ".join(f"{o:.2f}" for o in item["acceptance_length"])
            if item.get("origin") == "given":
                lines.append(f"acceptance of {item['label']}: given, {item['given']} (rates by position "
                             f"{', '.join(f'{r:.3f}' for r in item['rates'])}; acceptance length {lengths} at "
                             f"depths 1..{item['max_depth']})")
                continue
            proxy = f"PROXY from {item['proxy_model']}, " if item.get("origin") == "proxy" else ""
            lines.append(f"acceptance of {item['label']}: {proxy}measured on {item.get('workload', '?')}, "
                         f"{item['measurements']} measurement(s), {item['sequence_steps']:,} sequence-steps, "
                         f"depths 1..{item['max_depth']} (acceptance length {lengths})")
        cost = self.basis["cost"]
        tp = f", tp {cost['tp']} over {cost['interconnect_gbps']:,.0f} GB/s" if cost["tp"] > 1 else ""
        spread = f"-{cost['spread_slow']:.0%} / +{cost['spread_fast']:.0%} one sigma"
        if cost["source"] == "silicon":
            lines.append(f"step costs: measured kernels, {cost['data']}{tp} ({spread}); by part:")
            lines += [f"  {part}: {source}" for part, source in cost["parts"].items()]
        else:
            lines.append(f"step costs: predicted by a roofline ({cost['hardware']}: peaks {cost['memory_bw_gbps']:,.0f} "
                         f"GB/s, {cost['peak_tflops']:,.4g} TFLOP/s {cost['dtype']}{tp}; {spread})")
        lines.append(f"calibration: {self.basis['calibration']}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        recommended = self.recommended
        return {
            "predicted": True,
            "title": self.title,
            "hardware": {**self.hardware.to_dict(), **self.hardware_origin},
            "model": {"name": self.target.name, "fingerprint": self.target.fingerprint,
                      "num_params": self.target.num_params, "num_mtp_modules": self.target.num_mtp_modules},
            "drafts": {label: {"name": m.name, "fingerprint": m.fingerprint, "num_params": m.num_params}
                       for label, m in self.drafts.items()},
            "workload": dict(self.workload),
            "recommended": None if recommended is None else {
                "concurrency": recommended.concurrency, "label": recommended.label,
                "predicted_tokens_per_s": recommended.predicted_tokens_per_s},
            "per_concurrency": [row.to_dict() for row in self.rows],
            "basis": self.basis,
            "calibration": self.basis["calibration"],
            "acceptance_origin": [item.get("origin", "measured") for item in self.basis["acceptance"]],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }

    def to_profile(self) -> DeploymentProfile:
        """The plan as a deployment profile (``details["predicted"]``) for the exporters: the
        recommended configuration, and the per-concurrency table of the rows that fit."""
        chosen = self.recommended
        if chosen is None:
            raise ConfigurationError(f"nothing fits in 90 % of the {self.hardware.name}'s memory at the planned "
                                     "concurrency levels: there is no configuration to export")
        now = dt.datetime.now(dt.timezone.utc)
        study = StudyInfo(
            name=f"plan {self.hardware.name} {self.target.name}", optuna_study_name="", engine=self.basis["cost"]["source"],
            objective="throughput", workload_name=self.workload["label"],
            workload_fingerprint=self.workload["fingerprint"], status="predicted", created_at=now,
            search_space={"concurrencies": [row.concurrency for row in self.rows]},
        )
        hardware = HardwareInfo(
            fingerprint=str(self.hardware_origin.get("fingerprint") or f"catalog:{self.hardware_origin['key']}"),
            name=self.hardware.name, device_type=self.hardware.device_type, device_count=self.hardware.tp,
            memory_total_bytes=self.hardware.memory_bytes, spec=self.hardware.to_dict(),
        )
        table = []
        for row in self.rows:
            if not row.fits:
                continue
            draft = self.drafts[row.draft].fingerprint if row.draft else None
            table.append({
                "concurrency": row.concurrency, "label": row.label, "method": row.method, "draft": draft,
                "depth": row.depth, "tokens_per_s": row.predicted_tokens_per_s,
                "tokens_per_s_low": row.predicted_tokens_per_s_low, "tokens_per_s_high": row.predicted_tokens_per_s_high,
                "speedup": row.predicted_speedup, "baseline_tokens_per_s": row.predicted_baseline_tokens_per_s,
                "tpot_ms_p50": row.predicted_tpot_ms_p50, "predicted": True,
            })
        return DeploymentProfile(
            id=None, created_at=now, study=study, hardware=hardware, target=self.target, method=chosen.method,
            depth=chosen.depth, concurrency=chosen.concurrency, objective="throughput",
            draft=self.drafts[chosen.draft] if chosen.draft else None,
            tokens_per_s=chosen.predicted_tokens_per_s, tpot_ms_p50=chosen.predicted_tpot_ms_p50,
            speedup=chosen.predicted_speedup, per_concurrency=table,
            details={"predicted": True, "source": self.cost_source, "hardware": self.hardware.name,
                     "tensor_parallel_size": self.hardware.tp, "expert_parallel_size": self.basis["cost"]["ep"],
                     "draft": chosen.draft, "tokens_per_s_low": chosen.predicted_tokens_per_s_low,
                     "tokens_per_s_high": chosen.predicted_tokens_per_s_high, "basis": self.basis,
                     "acceptance": self.acceptance_summary},
            draft_models=tuple(self.drafts.values()),
        )


# -- the plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Stored:
    """What the plan reads from the database, as plain data."""

    spec: AcceleratorSpec
    origin: dict[str, Any]
    target: ModelInfo
    drafts: dict[str, ModelInfo]  # label -> model
    curves: dict[tuple[str, str | None], AcceptanceCurve]
    acceptance: list[dict[str, Any]]
    lengths: list[int] | None
    calibration: StoredCalibration | None  # a probe of this GPU model, a stored cost profile's fit


def plan_deployment(
    db_url: str | None,
    *,
    hardware: str,
    model: str,
    workload: str | Path | Workload | None = None,
    concurrencies: Sequence[int] | None = None,
    max_depth: int | None = None,
    deployment: Deployment | None = None,
    mix: Mapping[str, float] | None = None,
) -> DeploymentPlan:
    """Predict the best configuration per concurrency of target ``model`` on ``hardware`` (a catalog
    name or a stored hardware profile's name or fingerprint), from the acceptance profiles stored
    for ``workload`` (default: the built-in one). See the module doc. Reads the database only.
    ``mix``: request shares by category, the predictions carried over to it before choosing
    (:mod:`autotune.planning_mix`; needs a study on a workload with categories)."""
    sizes = _check_concurrencies(concurrencies)
    _check_max_depth(max_depth)
    deployment = deployment or Deployment()
    work = load_workload(workload)
    stored = _read_database(db_url, hardware, model, work, deployment.engine)
    adjust = None
    if mix is not None:
        from autotune.planning_mix import apply_mix, stored_factors

        factors, mix_notes = stored_factors(db_url, {key: curve.sources for key, curve in stored.curves.items()},
                                            mix, work.label)

        def adjust(predictions):  # noqa: ANN001, ANN202 - batch size -> configuration -> Prediction
            carried, borrowed = apply_mix(predictions, factors)
            return carried, mix_notes + borrowed
    target_shape = deployment.shape(_shape(stored.target, stored.spec), "target")
    draft_shapes = {label: deployment.shape(_shape(info, stored.spec), f"draft {label}")
                    for label, info in stored.drafts.items()}
    spec = deployment_spec(stored.spec, deployment, compute_dtype(target_shape, stored.spec, deployment.dtype)
                           if stored.spec.device_type == "cuda" else stored.spec.dtype, stored.calibration)
    gpu = catalog_nvml_name(hardware) if stored.origin["origin"] == "catalog" else stored.origin.get("gpu")
    pricing = _pricing(deployment, gpu, _config_source(stored.target, "target"),
                       {label: _config_source(info, "draft") for label, info in stored.drafts.items()})

    byte_level = "d_model" in stored.target.config
    if deployment.isl or deployment.osl:
        prompts, lengths = _uniform(work, deployment, byte_level, stored.lengths)
    else:
        prompts = [_prompt_tokens(request.prompt, byte_level) for request in work.requests]
        lengths = stored.lengths or [request.max_tokens for request in work.requests]
    depth_of = {key: _covered_depth(curve, max_depth) for key, curve in stored.curves.items()}
    notes: list[str] = []
    if max_depth is not None and any(depth < curve.max_depth for depth, curve in
                                     zip(depth_of.values(), stored.curves.values())):
        notes.append(f"depths capped at --max-depth {max_depth}")
    if not byte_level and not deployment.isl:
        notes.append(f"prompt tokens estimated at {BYTES_PER_TOKEN} bytes per token (the tokenizer is not loaded)")
    predicted = _predict(spec, stored.target.name, target_shape, draft_shapes, stored.curves, depth_of, prompts,
                         lengths, sizes, pricing, adjust)
    basis = _basis(spec, stored.acceptance, predicted, deployment)
    basis["workload"] = {"requests": len(prompts), "requests_per_row": STREAM_FACTOR,
                         "output_lengths": "--osl" if deployment.osl else
                         "measured (a stored run's)" if stored.lengths else "the requests' max_tokens",
                         "prompt_tokens": "--isl" if deployment.isl else "bytes + 1 (byte-level target)" if byte_level
                         else f"about {BYTES_PER_TOKEN} bytes per token"}
    workload_info = {"name": work.name, "label": work.label, "fingerprint": work.sha256, "requests": len(work.requests)}
    return DeploymentPlan(spec, stored.origin, stored.target, stored.drafts, workload_info, predicted.rows, basis,
                          notes + predicted.notes, predicted.warnings, f"acceptance measured on {work.label}"
                          + (" for the mix " + ",".join(f"{k}={v:g}" for k, v in mix.items()) if mix else ""))


def plan_from_config(
    db_url: str | None,
    *,
    hardware: str,
    config: str | Path,
    draft_config: str | Path | None = None,
    acceptance: Sequence[float] | None = None,
    acceptance_length: tuple[float, int] | None = None,
    acceptance_from: str | None = None,
    workload: str | Path | None = None,
    concurrencies: Sequence[int] | None = None,
    max_depth: int | None = None,
    deployment: Deployment | None = None,
) -> DeploymentPlan:
    """Predict the best configuration per concurrency of the model a config.json describes, with no
    tuning beforehand: acceptance per position (``acceptance``), as a length at a depth
    (``acceptance_length``, :mod:`autotune.perfmodel.given_acceptance`) or borrowed from the
    profile stored for another target (``acceptance_from``, a proxy); the proposer is the draft
    of ``draft_config``, else the config's MTP modules, else one that costs no forward pass
    (n-gram). Requests of ``--isl`` prompt and ``--osl`` output tokens (default 1024 each) unless a
    ``workload`` file is given. Reads the database only for ``acceptance_from`` and for the
    calibration (a probe, a timed cost profile of the GPU model and engine)."""
    sizes = _check_concurrencies(concurrencies)
    _check_max_depth(max_depth)
    deployment = deployment or Deployment()
    given = [acceptance is not None, acceptance_length is not None, acceptance_from is not None]
    if sum(given) != 1:
        raise ConfigurationError("give the acceptance one way: --acceptance a1,a2,..., --acceptance-length L or "
                                 "--acceptance-from MODEL (or plan a tuned target with --model)")
    base = find_accelerator(hardware)
    if base is None:
        raise NotFoundError(f"unknown hardware {hardware!r} for a plan from a config: use a catalog name "
                                 f"({', '.join(accelerator_names())})")
    target = read_config_model(config, "target")
    draft = read_config_model(draft_config, "draft") if draft_config is not None else None
    target_shape = deployment.shape(target.shape, "target")
    draft_shapes = {draft.info.name: deployment.shape(draft.shape, "draft")} if draft else {}
    method = "draft" if draft else "mtp" if target_shape.n_mtp else "ngram"
    key = (method, draft.info.name if draft else None)
    notes, warnings = [], []
    if method == "ngram":
        notes.append("no --draft-config and no MTP layers in the config: the acceptance is taken as a proposer that "
                     "costs no forward pass (n-gram / prompt lookup)")
    if acceptance_from is not None:
        curve, item = _proxy_curve(db_url, acceptance_from, method, workload)
        warnings.append(f"acceptance is a proxy: {item['label']} measured for {acceptance_from} on {item['workload']} "
                        "(engine, dtype and proposer settings not recorded), not for this model")
    else:
        rates = list(acceptance) if acceptance is not None else rates_from_length(*acceptance_length)
        curve = given_curve(method, rates)
        how = (f"--acceptance {','.join(f'{r:g}' for r in rates)}" if acceptance is not None else
               f"--acceptance-length {acceptance_length[0]:g} at depth {acceptance_length[1]}")
        item = {"proposer": method, "label": _label(method, key[1], 0).removesuffix("@0"), "origin": "given",
                "given": how, "rates": [round(r, 4) for r in rates], "max_depth": curve.max_depth,
                "acceptance_length": [round(curve.omega(d), 4) for d in range(1, curve.max_depth + 1)]}
    spec = deployment_spec(base, deployment, compute_dtype(target_shape, base, deployment.dtype),
                           stored_calibration(db_url, hardware, deployment.engine, base))
    if workload is not None:
        work = load_workload(workload)
        prompts, lengths = _uniform(work, deployment, False, None)
    else:
        isl, osl = deployment.isl or DEFAULT_ISL, deployment.osl or DEFAULT_OSL
        prompts, lengths = [isl], [osl]
    pricing = _pricing(deployment, catalog_nvml_name(hardware), target.source,
                       {draft.info.name: draft.source} if draft else {})
    predicted = _predict(spec, target.info.name, target_shape, draft_shapes, {key: curve},
                         {key: _covered_depth(curve, max_depth)}, prompts, lengths, sizes, pricing)
    origin = {"key": hardware.strip().lower(), "origin": "catalog", "fingerprint": None}
    basis = _basis(spec, [item], predicted, deployment)
    basis["workload"] = {"requests": "one per row" if workload is None else len(prompts),
                         "prompt_tokens": prompts[0] if workload is None else f"about {BYTES_PER_TOKEN} bytes per token",
                         "output_tokens": lengths[0] if workload is None else "the requests' max_tokens"}
    label = (f"isl {prompts[0]} / osl {lengths[0]}" if workload is None else load_workload(workload).label)
    workload_info = {"name": label, "label": label, "fingerprint": "", "requests": len(prompts)}
    summary = (f"acceptance {item['origin']} ({item.get('given') or 'from ' + acceptance_from}), {label}")
    return DeploymentPlan(spec, origin, target.info, {draft.info.name: draft.info} if draft else {}, workload_info,
                          predicted.rows, basis, notes + predicted.notes, warnings + predicted.warnings, summary)


# -- the prediction shared by both --------------------------------------------------------------------


@dataclass(frozen=True)
class _Predicted:
    rows: list[PlanRow]
    context: float
    prompt: int
    notes: list[str]
    warnings: list[str]
    priced: Priced


def _predict(spec: AcceleratorSpec, name: str, target: ModelShape, drafts: dict[str, ModelShape],
             curves: dict[tuple[str, str | None], AcceptanceCurve], depth_of: dict[tuple[str, str | None], int],
             prompts: list[int], lengths: list[int], sizes: list[int] | None, pricing: Pricing,
             adjust: Any = None) -> _Predicted:
    """The rows at ``sizes`` (default: the powers of two that fit), with the notes and warnings of
    the deployment, step costs priced as ``pricing`` says; ``adjust`` (predictions -> (predictions,
    notes)) changes the predictions before the choice (``--mix``)."""
    row_tokens = max(prompts) + max(lengths)
    target_footprint = target.footprint(name, spec.tp)
    draft_footprints = {label: shape.footprint(label, spec.tp) for label, shape in drafts.items()}

    def memory(method: str, draft: str | None, depth: int, rows: int) -> int:
        return _memory_bytes(target_footprint, draft_footprints.get(draft) if draft else None, method, depth, rows,
                             row_tokens)

    notes: list[str] = []
    warnings: list[str] = []
    limit = fit.usable_bytes(spec.memory_bytes)
    if memory("none", None, 0, 1) > limit:
        where = f"{spec.tp} GPUs" if spec.tp > 1 else "one GPU"
        warnings.append(f"the target does not fit in 90 % of the {spec.name}'s memory on {where} even at concurrency 1; "
                        + _smallest_tp(target, name, spec, row_tokens))
    if sizes is None:
        sizes = [b for b in DEFAULT_CONCURRENCIES if memory("none", None, 0, b) <= limit] or [1]
    context = sum(p + n / 2 for p, n in zip(prompts, lengths)) / len(prompts)
    predictions, priced = predict_configurations(spec, target, drafts, curves, depth_of, prompts, lengths, sizes,
                                                 pricing)
    if adjust is not None:
        predictions, adjusted = adjust(predictions)
        notes += adjusted
    rows = [_choose(concurrency, list(predicted.items()), memory, limit, priced)
            for concurrency, predicted in predictions.items()]
    step = {b: forward_pass(spec, target, b, 1, context) for b in sizes}
    share = {b: t.overhead_s / t.seconds for b, t in step.items()}
    worst = max(share, key=share.get)
    # A fitted overhead is not assumed; measured kernels carry their own latencies.
    if share[worst] > OVERHEAD_WARNING and spec.calibrated_from is None and priced.source == "roofline":
        warnings.append(f"the assumed step overhead ({spec.pass_overhead_us:.0f} us per step + "
                        f"{spec.kernel_latency_us:g} us per kernel, ~{target.kernels_per_layer:.0f} kernels per layer) "
                        f"is {share[worst]:.0%} of a decoding step at concurrency {worst}: the plan rests on that assumption "
                        f"more than on the {spec.name}'s figures")
    if spec.tp == 1 and spec.device_type == "cuda":
        notes.append("one GPU per replica: pass --tp N for tensor parallelism")
    return _Predicted(rows, context, max(prompts), priced.notes + notes, warnings, priced)


def predict_configurations(
    spec: AcceleratorSpec, target: ModelShape, drafts: dict[str, ModelShape],
    curves: dict[tuple[str, str | None], AcceptanceCurve], depth_of: dict[tuple[str, str | None], int],
    prompts: list[int], lengths: list[int], sizes: Sequence[int], pricing: Pricing | None = None,
) -> tuple[dict[int, dict[tuple[str, str | None, int], Prediction]], Priced]:
    """Concurrency -> every configuration's prediction (none, and each proposer at depths 1..its
    ``depth_of``): the step costs ``pricing`` gives (default: the roofline) replayed over the
    requests' steady-state stream; and what priced them. What a plan chooses from, and what
    docs/plan-validation.md checks."""
    deepest = max(depth_of.values(), default=0)
    context = sum(p + n / 2 for p, n in zip(prompts, lengths)) / len(prompts)
    priced = (pricing or Pricing(mode="roofline")).price(spec, target, drafts, context, max(prompts))
    cost = cost_profile(priced.pricer, sizes, range(1, max(deepest, 1) + 1), max(prompts),
                        {"none", *(method for method, _ in curves)}, priced.source, priced.spread)
    candidates = [("none", None, 0)] + [(method, draft, depth) for (method, draft), top in depth_of.items()
                                        for depth in range(1, top + 1)]
    performance = PerformanceModel(cost, curves, prompts, lengths)
    return {concurrency: {config: p for config in candidates if (p := performance.predict(*config, concurrency)) is not None}
            for concurrency in sizes}, priced


def _pricing(deployment: Deployment, gpu: str | None, target: ConfigSource | None,
             drafts: dict[str, ConfigSource | None]) -> Pricing:
    """How the deployment's steps are priced (:mod:`autotune.planning_costs`) on the GPU NVML calls ``gpu``."""
    return Pricing(mode=deployment.step_costs, gpu=gpu, engine=deployment.engine,
                   engine_version=deployment.engine_version, ep=deployment.ep, dtype=deployment.dtype,
                   kv_dtype=deployment.kv_dtype, target=target,
                   drafts={label: source for label, source in drafts.items() if source is not None})


def _config_source(model: ModelInfo, role: str) -> ConfigSource | None:
    """A stored model as the measured kernel data builds it: None for a built-in one (no config.json)."""
    if "d_model" in model.config:
        return None
    return ConfigSource(model.name, model.config, None, "target" if role == "target" else draft_kind(model.config))


def _smallest_tp(target: ModelShape, name: str, spec: AcceleratorSpec, row_tokens: int) -> str:
    """Words naming the smallest tensor-parallel degree (dividing the heads) at which concurrency 1 fits."""
    limit = fit.usable_bytes(spec.memory_bytes)
    for tp in range(spec.tp + 1, MAX_TP + 1):
        if target.heads % tp == 0 and _memory_bytes(target.footprint(name, tp), None, "none", 0, 1, row_tokens) <= limit:
            return f"the smallest tensor parallelism that fits is --tp {tp}"
    return f"no tensor parallelism up to {MAX_TP} GPUs fits"


def _basis(spec: AcceleratorSpec, acceptance: list[dict[str, Any]], predicted: _Predicted,
           deployment: Deployment) -> dict[str, Any]:
    priced = predicted.priced
    return {
        "acceptance": acceptance,
        "cost": {"source": priced.source, "data": priced.data, "parts": priced.parts, "hardware": spec.name,
                 "memory_bw_gbps": spec.memory_bw_gbps,
                 "peak_tflops": spec.peak_tflops, "dtype": spec.dtype, "tp": spec.tp, "ep": deployment.ep,
                 "interconnect_gbps": spec.interconnect_gbps, "pass_overhead_us": spec.pass_overhead_us,
                 "kernel_latency_us": spec.kernel_latency_us, "bandwidth_fraction": spec.bandwidth_fraction,
                 "gemm_fraction": spec.gemm_fraction, "spread": priced.spread,
                 "spread_slow": priced.slow, "spread_fast": priced.fast, "figures": spec.source,
                 "context_tokens": round(predicted.context, 1), "prompt_tokens": predicted.prompt},
        # Measured kernels keep only the engine's step overhead of the calibration (module doc of
        # autotune.perfmodel.silicon_cost): the shares of the peaks and the kernel floor are the roofline's.
        "calibration": spec.calibration if priced.source == "roofline" else
        f"{spec.overhead_origin}, added to the measured kernels per step",
        "calibrated_from": spec.calibrated_from,
        "model_sigma": PRIOR_SIGMA,
        "memory_headroom": fit.MEMORY_MARGIN,
    }


def _uniform(work: Workload, deployment: Deployment, byte_level: bool,
             measured: list[int] | None) -> tuple[list[int], list[int]]:
    """The workload's prompts and output lengths, each replaced by ``--isl`` / ``--osl`` when given."""
    prompts = [deployment.isl or _prompt_tokens(request.prompt, byte_level) for request in work.requests]
    lengths = [deployment.osl or n for n in (measured or [request.max_tokens for request in work.requests])]
    return prompts, lengths


def _proxy_curve(db_url: str | None, model: str, method: str,
                 workload: str | Path | None) -> tuple[AcceptanceCurve, dict[str, Any]]:
    """The stored acceptance curve of target ``model`` for the proposer ``method`` (the only draft
    model's, for draft), to stand in for an untuned model's."""
    from autotune.store import open_database, performance, plan_queries

    work = load_workload(workload)
    with open_database(db_url) as database, database.session() as session:
        stored = plan_queries.find_target(session, model, work.sha256)
        records = [r for r in performance.acceptance_profiles(session, target_model_id=stored.id,
                                                              workload_fingerprint=work.sha256)
                   if r.proposer.split(":")[0] == method]
        if len(records) != 1:
            raise ConfigurationError(f"--acceptance-from {model}: {len(records)} stored {method} acceptance profile(s) "
                                     f"on workload {work.label}; need exactly one")
        record = records[0]
        curve = AcceptanceCurve.from_positions(method, record.positions, record.sources)
        top = _covered_depth(curve, None)
        if top < 1:
            raise ConfigurationError(f"--acceptance-from {model}: the stored {method} profile covers no depth")
        curve = AcceptanceCurve(method, curve.positions[:top], curve.sources)
        item = {"proposer": method, "label": method, "origin": "proxy", "proxy_model": stored.name,
                "workload": record.workload_name, "workload_fingerprint": record.workload_fingerprint,
                "max_depth": top, "sequence_steps": curve.steps, "measurements": len(curve.sources),
                "acceptance_length": [round(curve.omega(d), 4) for d in range(1, top + 1)]}
    return curve, item


def _choose(concurrency: int, predicted: list[tuple[tuple[str, str | None, int], Prediction]], memory: Any,
            limit: int, priced: Priced) -> PlanRow:
    """The plan's row at ``concurrency``: the fastest configuration that fits (any, when none fits),
    or a simpler one within SIMPLER_WITHIN of it."""
    sized = [(config, p, memory(*config, concurrency)) for config, p in predicted]
    fitting = [item for item in sized if item[2] <= limit] or sized
    leader = max(fitting, key=lambda item: item[1].tokens_per_s)
    close = [item for item in fitting if item[1].tokens_per_s >= (1 - SIMPLER_WITHIN) * leader[1].tokens_per_s]
    (method, draft, depth), prediction, need = min(close, key=lambda item: (SIMPLICITY.get(item[0][0], 9), item[0][2],
                                                                          -item[1].tokens_per_s))
    baseline = next(p for config, p in predicted if config[0] == "none")
    best_of: dict[tuple[str, str | None], tuple[tuple[str, str | None, int], Prediction, int]] = {}
    for item in sized:
        key = item[0][:2]
        if key not in best_of or item[1].tokens_per_s > best_of[key][1].tokens_per_s:
            best_of[key] = item
    alternatives = [{"label": _label(*config), "method": config[0], "draft": config[1], "depth": config[2],
                     "predicted_tokens_per_s": p.tokens_per_s, "predicted_speedup": p.tokens_per_s / baseline.tokens_per_s,
                     "predicted_acceptance_length": p.omega, "fits": need <= limit}
                    for config, p, need in sorted(best_of.values(), key=lambda item: -item[1].tokens_per_s)]
    label = _label(method, draft, depth)
    low, high = plan_interval(prediction, priced)
    return PlanRow(
        concurrency=concurrency, label=label, method=method, draft=draft, depth=depth,
        predicted_tokens_per_s=prediction.tokens_per_s, predicted_tokens_per_s_low=low,
        predicted_tokens_per_s_high=high,
        predicted_speedup=prediction.tokens_per_s / baseline.tokens_per_s,
        predicted_baseline_tokens_per_s=baseline.tokens_per_s,
        predicted_tpot_ms_p50=prediction.latency_ms.get("tpot_ms_p50"), predicted_acceptance_length=prediction.omega,
        memory_bytes=int(need), memory_limit_bytes=limit, fits=need <= limit,
        leader=None if leader[0] == (method, draft, depth) else _label(*leader[0]), alternatives=alternatives,
    )


def plan_interval(prediction: Prediction, priced: Priced) -> tuple[float, float]:
    """The 95 % interval of tokens/s with the step-cost source's spread, wider on the slow side
    (:mod:`autotune.perfmodel.calibration`, :mod:`autotune.perfmodel.silicon_cost`), in place of
    the cost profile's symmetric one."""
    rest = sum(sigma ** 2 for name, sigma in prediction.sigmas.items() if name != "cost")
    value = prediction.tokens_per_s
    return (value * math.exp(-Z95 * math.sqrt(rest + priced.slow ** 2)),
            value * math.exp(Z95 * math.sqrt(rest + priced.fast ** 2)))


def _check_max_depth(max_depth: int | None) -> None:
    if max_depth is not None and not 1 <= max_depth <= MAX_DEPTH:
        raise ConfigurationError(f"--max-depth must be between 1 and {MAX_DEPTH}, got {max_depth}")


def _label(method: str, draft: str | None, depth: int) -> str:
    if method == "none":
        return "none"
    return f"draft:{draft}@{depth}" if method == "draft" else f"{method}@{depth}"


def _check_concurrencies(concurrencies: Sequence[int] | None) -> list[int] | None:
    if concurrencies is None:
        return None
    sizes = sorted(set(concurrencies))
    if not sizes or any(not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= MAX_CONCURRENCY for b in sizes):
        raise ConfigurationError(f"--concurrency takes integers between 1 and {MAX_CONCURRENCY}, got "
                                 f"{', '.join(map(str, concurrencies)) or 'none'}")
    return sizes


def parse_concurrencies(text: str | None) -> tuple[int, ...] | None:
    """``"1,8,64"`` -> (1, 8, 64); a ConfigurationError for anything else."""
    if text is None:
        return None
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ConfigurationError(f"--concurrency must be comma-separated integers, got {text!r}") from None
    _check_concurrencies(sizes)
    return sizes


def _covered_depth(curve: AcceptanceCurve, max_depth: int | None) -> int:
    top = max((d for d in range(1, curve.max_depth + 1) if curve.covers(d)), default=0)
    return min(top, max_depth) if max_depth is not None else top


def _prompt_tokens(prompt: str, byte_level: bool) -> int:
    size = len(prompt.encode("utf-8"))
    return size + 1 if byte_level else math.ceil(size / BYTES_PER_TOKEN) + 1  # + BOS


def _shape(model: ModelInfo, spec: AcceleratorSpec) -> ModelShape:
    try:
        shape = ModelShape.from_config(model.config, params=model.num_params, n_mtp=model.num_mtp_modules)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the sizes of {model.role} {model.name} from its stored config ({exc})") from None
    # A CPU computes in fp32 (the embedded engine's dtype, and the probe's measured FLOP/s).
    return shape.with_dtype(spec.dtype_bytes) if spec.dtype == "fp32" else shape


def _memory_bytes(target: ModelFootprint, draft: ModelFootprint | None, method: str, depth: int, rows: int,
                  row_tokens: int) -> int:
    """The tuner's estimate (:mod:`autotune.models.fit`) for ``rows`` sequences of ``row_tokens``
    tokens: the engines a plan is for keep the logits of the last prompt position only."""
    per_sequence = fit.bytes_per_sequence(method, depth, row_tokens + 1, 1, target, draft)
    return fit.weight_bytes(method, target, draft) + rows * per_sequence


# -- the database -------------------------------------------------------------------------------------


def _read_database(db_url: str | None, hardware: str, model: str, work: Workload, engine: str) -> _Stored:
    from autotune.profiles.records import model_info
    from autotune.store import open_database, performance, plan_queries

    catalog = find_accelerator(hardware)
    with open_database(db_url) as database, database.session() as session:
        if catalog is not None:
            spec, origin = catalog, {"key": hardware.strip().lower(), "origin": "catalog", "fingerprint": None}
            calibration = stored_calibration_in(session, catalog_nvml_name(hardware) or "", engine, catalog)
        else:
            spec, origin, probe = _stored_hardware(session, hardware)
            gpu = origin.get("gpu")
            calibration = replace(stored_calibration_in(session, gpu, engine, spec), probe=probe) if gpu else None
        target = plan_queries.find_target(session, model, work.sha256)
        records = performance.acceptance_profiles(session, target_model_id=target.id, workload_fingerprint=work.sha256)
        if not records:
            raise ConfigurationError(_no_acceptance(session, target, work))
        drafts_by_id, by_fingerprint = plan_queries.proposer_drafts(session, records)
        names = [m.name for m in by_fingerprint.values()]
        curves: dict[tuple[str, str | None], AcceptanceCurve] = {}
        drafts: dict[str, ModelInfo] = {}
        acceptance = []
        sources: list[int] = []
        for record in sorted(records, key=lambda r: r.proposer):
            curve = AcceptanceCurve.from_positions(record.proposer, record.positions, record.sources)
            if not curve.covers(1):
                continue
            if record.proposer.startswith(plan_queries.DRAFT_PREFIX):
                row = (drafts_by_id.get(record.draft_model_id)
                       or by_fingerprint.get(record.proposer.removeprefix(plan_queries.DRAFT_PREFIX)))
                if row is None:
                    continue
                label = row.name if names.count(row.name) == 1 else f"{row.name}-{row.fingerprint[:8]}"
                drafts[label] = model_info(row)
                key: tuple[str, str | None] = ("draft", label)
            else:
                key = (record.proposer, None)
            curves[key] = curve
            sources += list(curve.sources)
            acceptance.append({
                "proposer": record.proposer, "origin": "measured", "label": key[0] if key[1] is None else f"draft:{key[1]}",
                "workload": record.workload_name, "workload_fingerprint": record.workload_fingerprint,
                "max_depth": curve.max_depth, "sequence_steps": curve.steps, "measurements": len(curve.sources),
                "acceptance_length": [round(curve.omega(d), 4) for d in range(1, _covered_depth(curve, None) + 1)],
                "updated_at": str(record.updated_at),
            })
        if not curves:
            raise ConfigurationError(_no_acceptance(session, target, work))
        lengths = plan_queries.measured_request_tokens(session, sources, len(work.requests))
        target_info = model_info(target)
    return _Stored(spec, origin, target_info, drafts, curves, acceptance, lengths, calibration)


def _no_acceptance(session: Any, target: Any, work: Workload) -> str:
    from autotune.store import plan_queries

    others = plan_queries.acceptance_workload_names(session, target.id)
    where = f" (stored for workload(s) {', '.join(others)}: pass that workload's file with --workload)" if others else ""
    return (f"no acceptance profile of {target.name} on workload {work.label} is stored{where}; run `autotune tune` "
            f"with that target and workload on any machine first (acceptance does not depend on the hardware)")


def _stored_hardware(session: Any, key: str) -> tuple[AcceleratorSpec, dict[str, Any], tuple[float, str] | None]:
    """The roofline figures of a stored hardware profile (module doc), and for a GPU its probe's
    measured share of the peak bandwidth (None without one)."""
    from autotune.store import plan_queries

    found = plan_queries.hardware_with_probe(session, key)
    if found is None:
        raise NotFoundError(f"unknown hardware {key!r}: use a catalog name ({', '.join(accelerator_names())}) "
                                 "or a stored hardware profile's name or fingerprint "
                                 f"(stored: {plan_queries.stored_hardware_names(session)})")
    record, probe = found
    metrics = {m.get("name"): m.get("measured") for m in (probe.metrics if probe else [])}
    origin = {"key": key, "origin": "stored hardware profile", "fingerprint": record.fingerprint,
              "stored_name": record.name, "probe_id": probe.id if probe else None,
              "gpu": plan_queries.gpu_name(record)}
    peaks = {m.get("name"): m.get("peak") for m in (probe.metrics if probe else [])}
    measured = (metrics["copy_bw_gbps"] / peaks["copy_bw_gbps"], f"probe {probe.id} of {record.name}") \
        if metrics.get("copy_bw_gbps") and peaks.get("copy_bw_gbps") else None
    if record.device_type == "cuda":
        devices = (record.spec or {}).get("devices") or []
        device = devices[(record.spec or {}).get("benchmarked_device", 0)] if devices else {}
        spec = accelerator_for_gpu(str(device.get("name", "")), record.memory_total_bytes)
        if spec is not None:
            return AcceleratorSpec(**{**asdict(spec), "name": record.name,
                                      "source": f"{spec.source}; memory of the stored profile {record.fingerprint}"}), \
                origin, measured
        bandwidth, tflops = metrics.get("copy_bw_gbps"), metrics.get("matmul_bf16_tflops")
        if not bandwidth or not tflops:
            raise ConfigurationError(f"hardware {record.name} ({record.fingerprint}) is a GPU the catalog does not know "
                                     "and its stored probe lacks measured bandwidth or bf16 FLOP/s; run `autotune probe` "
                                     "on it")
        # The measured figures are the peaks here: a fraction of 1.0 keeps them.
        return AcceleratorSpec(record.name, record.memory_total_bytes, float(bandwidth), float(tflops), float(tflops),
                               source=f"probe {probe.id} of {record.fingerprint}: measured copy bandwidth and bf16 "
                                      "matmul"), origin, (1.0, f"probe {probe.id} of {record.name}")
    bandwidth, gflops, launch_us = (metrics.get(name) for name in ("memory_bw_gbps", "matmul_fp32_gflops",
                                                                    "launch_overhead_us"))
    if not bandwidth or not gflops:
        raise ConfigurationError(f"hardware {record.name} ({record.fingerprint}) has no stored probe with measured "
                                 "memory bandwidth and FLOP/s; run `autotune probe` on it")
    launch = float(launch_us or 0.0)
    return AcceleratorSpec(
        record.name, record.memory_total_bytes, float(bandwidth), None, None, fp32_tflops=float(gflops) / 1000,
        dtype="fp32", pass_overhead_us=CPU_OPS_PER_PASS * launch, kernel_latency_us=launch,
        device_type="cpu",
        source=f"probe {probe.id} of {record.fingerprint}: measured memory bandwidth, fp32 matmul and op launch "
               f"overhead (per op, {CPU_OPS_PER_PASS} ops per pass besides the layers')",
    ), origin, None


def write_plan_export(plan: DeploymentPlan, fmt: str, output: str | Path | None = None, force: bool = False) -> Path:
    """Write ``plan`` as a serving config (``autotune export``'s formats; the header says it is a
    prediction) to ``output``, by default ``profiles/plan__<hardware>__<model>__<config>-c<c><suffix>``."""
    from autotune.serving import DEFAULT_EXPORT_DIR, SUFFIXES, check_format, export_profile, slugify
    from autotune.profiles.files import write_atomic

    check_format(fmt)
    profile = plan.to_profile()
    text = export_profile(profile, fmt)
    if output is None:
        config = profile.method if profile.method == "none" else f"{profile.method}-d{profile.depth}"
        stem = "__".join(["plan", slugify(profile.hardware.name), slugify(profile.target.name),
                          f"{config}-c{profile.concurrency}"])
        output = DEFAULT_EXPORT_DIR / f"{stem}{SUFFIXES[fmt]}"
    path = Path(output)
    return write_atomic(path, text, force=force, executable=path.suffix == ".sh")
