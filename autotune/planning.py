"""``autotune plan``: what speculative decoding would do on hardware you do not have.

Acceptance is a property of (target, proposer, workload), not of the machine (DESIGN.md section
9): the acceptance profiles ``autotune tune`` stored on any machine carry over. Step costs do not:
here they come from a roofline of the device (:mod:`autotune.perfmodel.roofline`) — a catalog GPU
(``--hardware h200``) or a stored hardware profile (a CUDA one through its NVML name's datasheet
figures, a CPU one through its probe's measured bandwidth and FLOP/s). The performance model
(:class:`~autotune.perfmodel.model.PerformanceModel`) combines the two and replays the workload
at each batch size. Every figure is a prediction and is labelled so; nothing is measured and
nothing is written to the database.

Per batch size the plan picks the configuration with the most predicted tokens/s, preferring the
simpler one (none, n-gram, MTP, draft model; then the smaller depth) when it is within
:data:`SIMPLER_WITHIN` of it — closer than the roofline can tell apart — and checks memory
with the estimate and margin the preflight and the tuner use (:mod:`autotune.models.fit`): weights,
the caches of ``batch x (longest prompt + max_tokens + 1 + depth)`` positions and the last prompt
position's logits must fit in 90 % of the device's memory.

The workload's requests are replayed in copies so that each batch size sees at least
:data:`REQUESTS_PER_ROW` requests per row: a plan for batch 256 is about a server kept busy at 256
rows, not about the 16 requests of the built-in workload.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autotune.analysis.decision import SIMPLICITY
from autotune.errors import ConfigurationError
from autotune.hardware.catalog import AcceleratorSpec, accelerator_for_gpu, accelerator_names, find_accelerator
from autotune.models import fit
from autotune.models.footprint import ModelFootprint
from autotune.perfmodel.acceptance import AcceptanceCurve
from autotune.perfmodel.model import PRIOR_SIGMA, PerformanceModel, Prediction
from autotune.perfmodel.roofline import ROOFLINE_SPREAD, ModelShape, roofline_cost
from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo
from autotune.workload import Workload, load_workload

DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_BATCH_SIZE = 4096
MAX_DEPTH = 16
SIMPLER_WITHIN = 0.02
REQUESTS_PER_ROW = 8
# Without the tokenizer at hand: ~4 bytes per token for BPE vocabularies on English and code.
BYTES_PER_TOKEN = 4
# A CPU runs PyTorch eagerly: each op pays the probe's measured launch overhead. The embedded
# engine's decoder layer is ~14 ops (norms, projections, RoPE, attention, MLP, residuals), and a
# pass ~10 more (embedding, final norm, head, sampling, cache bookkeeping).
CPU_OPS_PER_LAYER = 14
CPU_OPS_PER_PASS = 10
PREDICTED = "PREDICTED"


# -- the result ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    """The predicted best configuration at one batch size (``fits``: in 90 % of the memory)."""

    batch_size: int
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
    """A what-if plan: the predicted best configuration per batch size on ``hardware`` (see the
    module doc); ``basis`` says what the prediction rests on."""

    hardware: AcceleratorSpec
    hardware_origin: dict[str, Any]
    target: ModelInfo
    drafts: dict[str, ModelInfo]
    workload: dict[str, Any]
    rows: list[PlanRow]
    basis: dict[str, Any]
    notes: list[str]

    @property
    def title(self) -> str:
        return (f"{PREDICTED} — roofline for {self.hardware.name}, acceptance measured on {self.workload['label']}; "
                "not measured")

    @property
    def recommended(self) -> PlanRow | None:
        """The row with the most predicted tokens/s among those that fit (None if none fits)."""
        fitting = [row for row in self.rows if row.fits]
        return max(fitting, key=lambda row: row.predicted_tokens_per_s) if fitting else None

    def basis_lines(self) -> list[str]:
        """The basis in words: which stored acceptance profiles, which hardware figures."""
        lines = []
        for item in self.basis["acceptance"]:
            lines.append(f"acceptance of {item['label']}: measured, {item['measurements']} measurement(s), "
                         f"{item['sequence_steps']:,} sequence-steps, depths 1..{item['max_depth']} "
                         f"(acceptance length {' / '.join(f'{o:.2f}' for o in item['acceptance_length'])})")
        cost = self.basis["cost"]
        lines.append(f"step costs: predicted by a roofline ({cost['hardware']}: {cost['memory_bw_gbps']:,.0f} GB/s, "
                     f"{cost['peak_tflops']:,.4g} TFLOP/s {cost['dtype']}, overhead {cost['pass_overhead_us']:.3g} us "
                     f"per pass + {cost['layer_overhead_us']:.3g} us per layer; ±{cost['spread']:.0%} one sigma)")
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
                "batch_size": recommended.batch_size, "label": recommended.label,
                "predicted_tokens_per_s": recommended.predicted_tokens_per_s},
            "per_batch_size": [row.to_dict() for row in self.rows],
            "basis": self.basis,
            "notes": list(self.notes),
        }

    def to_profile(self) -> DeploymentProfile:
        """The plan as a deployment profile (``details["predicted"]``) for the exporters: the
        recommended configuration, and the per-batch-size table of the rows that fit."""
        chosen = self.recommended
        if chosen is None:
            raise ConfigurationError(f"nothing fits in 90 % of the {self.hardware.name}'s memory at the planned batch "
                                     "sizes: there is no configuration to export")
        now = dt.datetime.now(dt.timezone.utc)
        study = StudyInfo(
            name=f"plan {self.hardware.name} {self.target.name}", optuna_study_name="", engine="roofline",
            objective="throughput", workload_name=self.workload["label"],
            workload_fingerprint=self.workload["fingerprint"], status="predicted", created_at=now,
            search_space={"batch_sizes": [row.batch_size for row in self.rows]},
        )
        hardware = HardwareInfo(
            fingerprint=str(self.hardware_origin.get("fingerprint") or f"catalog:{self.hardware_origin['key']}"),
            name=self.hardware.name, device_type=self.hardware.device_type, device_count=1,
            memory_total_bytes=self.hardware.memory_bytes, spec=self.hardware.to_dict(),
        )
        table = []
        for row in self.rows:
            if not row.fits:
                continue
            draft = self.drafts[row.draft].fingerprint if row.draft else None
            table.append({
                "batch_size": row.batch_size, "label": row.label, "method": row.method, "draft": draft,
                "depth": row.depth, "tokens_per_s": row.predicted_tokens_per_s,
                "tokens_per_s_low": row.predicted_tokens_per_s_low, "tokens_per_s_high": row.predicted_tokens_per_s_high,
                "speedup": row.predicted_speedup, "baseline_tokens_per_s": row.predicted_baseline_tokens_per_s,
                "tpot_ms_p50": row.predicted_tpot_ms_p50, "predicted": True,
            })
        return DeploymentProfile(
            id=None, created_at=now, study=study, hardware=hardware, target=self.target, method=chosen.method,
            depth=chosen.depth, batch_size=chosen.batch_size, objective="throughput",
            draft=self.drafts[chosen.draft] if chosen.draft else None,
            tokens_per_s=chosen.predicted_tokens_per_s, tpot_ms_p50=chosen.predicted_tpot_ms_p50,
            speedup=chosen.predicted_speedup, per_batch_size=table,
            details={"predicted": True, "source": "roofline", "hardware": self.hardware.name,
                     "draft": chosen.draft, "tokens_per_s_low": chosen.predicted_tokens_per_s_low,
                     "tokens_per_s_high": chosen.predicted_tokens_per_s_high, "basis": self.basis},
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


def plan_deployment(
    db_url: str | None,
    *,
    hardware: str,
    model: str,
    workload: str | Path | Workload | None = None,
    batch_sizes: Sequence[int] | None = None,
    max_depth: int | None = None,
) -> DeploymentPlan:
    """Predict the best configuration per batch size of target ``model`` on ``hardware`` (a catalog
    name or a stored hardware profile's name or fingerprint), from the acceptance profiles stored
    for ``workload`` (default: the built-in one). See the module doc. Reads the database only."""
    sizes = _check_batch_sizes(batch_sizes)
    if max_depth is not None and not 1 <= max_depth <= MAX_DEPTH:
        raise ConfigurationError(f"--max-depth must be between 1 and {MAX_DEPTH}, got {max_depth}")
    work = load_workload(workload)
    stored = _read_database(db_url, hardware, model, work)
    spec = stored.spec
    target_shape = _shape(stored.target, spec)
    draft_shapes = {label: _shape(info, spec) for label, info in stored.drafts.items()}

    byte_level = "d_model" in stored.target.config
    prompts = [_prompt_tokens(request.prompt, byte_level) for request in work.requests]
    lengths = stored.lengths or [request.max_tokens for request in work.requests]
    row_tokens = max(prompts) + max(request.max_tokens for request in work.requests)
    depth_of = {key: _covered_depth(curve, max_depth) for key, curve in stored.curves.items()}
    deepest = max(depth_of.values(), default=0)
    notes: list[str] = []

    target_footprint = target_shape.footprint(stored.target.name)
    draft_footprints = {label: shape.footprint(label) for label, shape in draft_shapes.items()}

    def memory(method: str, draft: str | None, depth: int, rows: int) -> int:
        return _memory_bytes(target_footprint, draft_footprints.get(draft) if draft else None, method, depth, rows,
                             row_tokens)

    limit = fit.usable_bytes(spec.memory_bytes)
    if sizes is None:
        sizes = [b for b in DEFAULT_BATCH_SIZES if memory("none", None, 0, b) <= limit] or [1]
        if memory("none", None, 0, 1) > limit:
            notes.append(f"the target does not fit in 90 % of the {spec.name}'s memory even at batch size 1 "
                         "(one device, no tensor parallelism)")
    context = sum(p + n / 2 for p, n in zip(prompts, lengths)) / len(prompts)
    cost = roofline_cost(spec, target_shape, draft_shapes, sizes, range(1, max(deepest, 1) + 1), context, max(prompts),
                         methods={"none", *(method for method, _ in stored.curves)})

    rows = []
    for batch_size in sizes:
        copies = max(1, math.ceil(REQUESTS_PER_ROW * batch_size / len(prompts)))
        performance = PerformanceModel(cost, stored.curves, prompts * copies, lengths * copies)
        candidates = [("none", None, 0)] + [(method, draft, depth) for (method, draft), top in depth_of.items()
                                            for depth in range(1, top + 1)]
        predicted = [(config, p) for config in candidates if (p := performance.predict(*config, batch_size)) is not None]
        rows.append(_choose(batch_size, predicted, memory, limit))
    if max_depth is not None and any(depth < curve.max_depth for depth, curve in
                                     zip(depth_of.values(), stored.curves.values())):
        notes.append(f"depths capped at --max-depth {max_depth}")
    notes.append("one device, one model replica: no tensor or pipeline parallelism is modelled")
    if not byte_level:
        notes.append(f"prompt tokens estimated at {BYTES_PER_TOKEN} bytes per token (the tokenizer is not loaded)")

    basis = {
        "acceptance": stored.acceptance,
        "cost": {"source": "roofline", "hardware": spec.name, "memory_bw_gbps": spec.memory_bw_gbps,
                 "peak_tflops": spec.peak_tflops, "dtype": spec.dtype, "pass_overhead_us": spec.pass_overhead_us,
                 "layer_overhead_us": spec.layer_overhead_us, "spread": ROOFLINE_SPREAD, "figures": spec.source,
                 "context_tokens": round(context, 1), "prompt_tokens": max(prompts)},
        "workload": {"requests": len(prompts), "requests_per_row": REQUESTS_PER_ROW,
                     "output_lengths": "measured (a stored run's)" if stored.lengths else "the requests' max_tokens",
                     "prompt_tokens": "bytes + 1 (byte-level target)" if byte_level
                     else f"about {BYTES_PER_TOKEN} bytes per token"},
        "model_sigma": PRIOR_SIGMA,
        "memory_headroom": fit.MEMORY_MARGIN,
    }
    workload_info = {"name": work.name, "label": work.label, "fingerprint": work.sha256, "requests": len(work.requests)}
    return DeploymentPlan(spec, stored.origin, stored.target, stored.drafts, workload_info, rows, basis, notes)


def _choose(batch_size: int, predicted: list[tuple[tuple[str, str | None, int], Prediction]], memory: Any,
            limit: int) -> PlanRow:
    """The plan's row at ``batch_size``: the fastest configuration that fits (any, when none fits),
    or a simpler one within SIMPLER_WITHIN of it."""
    sized = [(config, p, memory(*config, batch_size)) for config, p in predicted]
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
    return PlanRow(
        batch_size=batch_size, label=label, method=method, draft=draft, depth=depth,
        predicted_tokens_per_s=prediction.tokens_per_s, predicted_tokens_per_s_low=prediction.low,
        predicted_tokens_per_s_high=prediction.high,
        predicted_speedup=prediction.tokens_per_s / baseline.tokens_per_s,
        predicted_baseline_tokens_per_s=baseline.tokens_per_s,
        predicted_tpot_ms_p50=prediction.latency_ms.get("tpot_ms_p50"), predicted_acceptance_length=prediction.omega,
        memory_bytes=int(need), memory_limit_bytes=limit, fits=need <= limit,
        leader=None if leader[0] == (method, draft, depth) else _label(*leader[0]), alternatives=alternatives,
    )


def _label(method: str, draft: str | None, depth: int) -> str:
    if method == "none":
        return "none"
    return f"draft:{draft}@{depth}" if method == "draft" else f"{method}@{depth}"


def _check_batch_sizes(batch_sizes: Sequence[int] | None) -> list[int] | None:
    if batch_sizes is None:
        return None
    sizes = sorted(set(batch_sizes))
    if not sizes or any(not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= MAX_BATCH_SIZE for b in sizes):
        raise ConfigurationError(f"--batch-sizes must be integers between 1 and {MAX_BATCH_SIZE}, got "
                                 f"{', '.join(map(str, batch_sizes)) or 'none'}")
    return sizes


def parse_batch_sizes(text: str | None) -> tuple[int, ...] | None:
    """``"1,8,64"`` -> (1, 8, 64); a ConfigurationError for anything else."""
    if text is None:
        return None
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ConfigurationError(f"--batch-sizes must be comma-separated integers, got {text!r}") from None
    _check_batch_sizes(sizes)
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


def _read_database(db_url: str | None, hardware: str, model: str, work: Workload) -> _Stored:
    from autotune.profiles.records import model_info
    from autotune.store import open_database, performance, plan_queries

    catalog = find_accelerator(hardware)
    with open_database(db_url) as database, database.session() as session:
        if catalog is not None:
            spec, origin = catalog, {"key": hardware.strip().lower(), "origin": "catalog", "fingerprint": None}
        else:
            spec, origin = _stored_hardware(session, hardware)
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
                "proposer": record.proposer, "label": key[0] if key[1] is None else f"draft:{key[1]}",
                "workload": record.workload_name, "workload_fingerprint": record.workload_fingerprint,
                "max_depth": curve.max_depth, "sequence_steps": curve.steps, "measurements": len(curve.sources),
                "acceptance_length": [round(curve.omega(d), 4) for d in range(1, _covered_depth(curve, None) + 1)],
                "updated_at": str(record.updated_at),
            })
        if not curves:
            raise ConfigurationError(_no_acceptance(session, target, work))
        lengths = plan_queries.measured_request_tokens(session, sources, len(work.requests))
        target_info = model_info(target)
    return _Stored(spec, origin, target_info, drafts, curves, acceptance, lengths)


def _no_acceptance(session: Any, target: Any, work: Workload) -> str:
    from autotune.store import plan_queries

    others = plan_queries.acceptance_workload_names(session, target.id)
    where = f" (stored for workload(s) {', '.join(others)}: pass that workload's file with --workload)" if others else ""
    return (f"no acceptance profile of {target.name} on workload {work.label} is stored{where}; run `autotune tune` "
            f"with that target and workload on any machine first (acceptance does not depend on the hardware)")


def _stored_hardware(session: Any, key: str) -> tuple[AcceleratorSpec, dict[str, Any]]:
    """The roofline figures of a stored hardware profile (module doc)."""
    from autotune.store import plan_queries

    found = plan_queries.hardware_with_probe(session, key)
    if found is None:
        raise ConfigurationError(f"unknown hardware {key!r}: use a catalog name ({', '.join(accelerator_names())}) "
                                 "or a stored hardware profile's name or fingerprint "
                                 f"(stored: {plan_queries.stored_hardware_names(session)})")
    record, probe = found
    metrics = {m.get("name"): m.get("measured") for m in (probe.metrics if probe else [])}
    origin = {"key": key, "origin": "stored hardware profile", "fingerprint": record.fingerprint,
              "stored_name": record.name, "probe_id": probe.id if probe else None}
    if record.device_type == "cuda":
        devices = (record.spec or {}).get("devices") or []
        device = devices[(record.spec or {}).get("benchmarked_device", 0)] if devices else {}
        spec = accelerator_for_gpu(str(device.get("name", "")), record.memory_total_bytes)
        if spec is not None:
            return AcceleratorSpec(**{**asdict(spec), "name": record.name,
                                      "source": f"{spec.source}; memory of the stored profile {record.fingerprint}"}), origin
        bandwidth, tflops = metrics.get("copy_bw_gbps"), metrics.get("matmul_bf16_tflops")
        if not bandwidth or not tflops:
            raise ConfigurationError(f"hardware {record.name} ({record.fingerprint}) is a GPU the catalog does not know "
                                     "and its stored probe lacks measured bandwidth or bf16 FLOP/s; run `autotune probe` "
                                     "on it")
        return AcceleratorSpec(record.name, record.memory_total_bytes, float(bandwidth), float(tflops), float(tflops),
                               source=f"probe {probe.id} of {record.fingerprint}: measured copy bandwidth and bf16 "
                                      "matmul"), origin
    bandwidth, gflops, launch_us = (metrics.get(name) for name in ("memory_bw_gbps", "matmul_fp32_gflops",
                                                                    "launch_overhead_us"))
    if not bandwidth or not gflops:
        raise ConfigurationError(f"hardware {record.name} ({record.fingerprint}) has no stored probe with measured "
                                 "memory bandwidth and FLOP/s; run `autotune probe` on it")
    launch = float(launch_us or 0.0)
    return AcceleratorSpec(
        record.name, record.memory_total_bytes, float(bandwidth), None, None, fp32_tflops=float(gflops) / 1000,
        dtype="fp32", pass_overhead_us=CPU_OPS_PER_PASS * launch, layer_overhead_us=CPU_OPS_PER_LAYER * launch,
        device_type="cpu",
        source=f"probe {probe.id} of {record.fingerprint}: measured memory bandwidth, fp32 matmul and op launch "
               f"overhead ({CPU_OPS_PER_PASS} ops per pass, {CPU_OPS_PER_LAYER} per layer)",
    ), origin


def write_plan_export(plan: DeploymentPlan, fmt: str, output: str | Path | None = None, force: bool = False) -> Path:
    """Write ``plan`` as a serving config (``autotune export``'s formats; the header says it is a
    prediction) to ``output``, by default ``profiles/plan__<hardware>__<model>__<config>-bs<b><suffix>``."""
    from autotune.serving import DEFAULT_EXPORT_DIR, SUFFIXES, check_format, export_profile, slugify
    from autotune.profiles.files import write_atomic

    check_format(fmt)
    profile = plan.to_profile()
    text = export_profile(profile, fmt)
    if output is None:
        config = profile.method if profile.method == "none" else f"{profile.method}-d{profile.depth}"
        stem = "__".join(["plan", slugify(profile.hardware.name), slugify(profile.target.name),
                          f"{config}-bs{profile.batch_size}"])
        output = DEFAULT_EXPORT_DIR / f"{stem}{SUFFIXES[fmt]}"
    path = Path(output)
    return write_atomic(path, text, force=force, executable=path.suffix == ".sh")
