"""The math both planners share: every configuration's predicted tokens/s per concurrency, the
choice among them, the memory each needs and the basis a plan states (pure: no database, no files).

Per concurrency the plan picks the configuration with the most predicted tokens/s, preferring the
simpler one (none, n-gram, MTP, draft model; then the smaller depth) when it is within
:data:`SIMPLER_WITHIN` of it — closer than the roofline can tell apart — and checks memory with the
estimate and margin the preflight and the tuner use (:mod:`autotune.models.fit`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.analysis.decision import SIMPLICITY
from autotune.hardware.catalog import AcceleratorSpec
from autotune.models import fit
from autotune.models.footprint import ModelFootprint
from autotune.perfmodel.acceptance import AcceptanceCurve
from autotune.perfmodel.model import PRIOR_SIGMA, Z95, PerformanceModel, Prediction
from autotune.perfmodel.roofline import ModelShape, forward_pass
from autotune.perfmodel.step_costs import cost_profile
from autotune.planning.costs import Priced, Pricing
from autotune.planning.inputs import MAX_TP, Deployment
from autotune.planning.requests import Requests
from autotune.planning.result import USABLE_MEMORY, PlanRow

DEFAULT_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SIMPLER_WITHIN = 0.02
# Warn when the assumed per-step overhead is more than this share of a decoding step (issue 22).
OVERHEAD_WARNING = 0.30

Proposer = tuple[str, "str | None"]  # (method, draft label)
Config = tuple[str, "str | None", int]  # (method, draft label, depth)
Predictions = dict[int, dict[Config, Prediction]]  # concurrency -> configuration -> prediction
# Changes the predictions before the choice, with notes saying how (``--mix``).
Adjust = Callable[[Predictions], tuple[Predictions, list[str]]]


@dataclass(frozen=True)
class Proposals:
    """What a plan predicts: the target (its name and shape), the drafts' shapes by label, and per
    proposer its acceptance curve and the deepest depth to consider."""

    name: str
    target: ModelShape
    drafts: dict[str, ModelShape]
    curves: dict[Proposer, AcceptanceCurve]
    depth_of: dict[Proposer, int]


@dataclass(frozen=True)
class Predicted:
    """A plan's rows with the notes and warnings of the deployment, and what they rest on."""

    rows: list[PlanRow]
    context: float
    prompt: int
    notes: list[str]
    warnings: list[str]
    priced: Priced


def predict(spec: AcceleratorSpec, proposals: Proposals, requests: Requests, sizes: list[int] | None,
            pricing: Pricing, adjust: Adjust | None = None) -> Predicted:
    """The rows at ``sizes`` (default: the powers of two that fit), with the notes and warnings of
    the deployment, step costs priced as ``pricing`` says; ``adjust`` changes the predictions
    before the choice."""
    target = proposals.target
    target_footprint = target.footprint(proposals.name, spec.tp)
    draft_footprints = {label: shape.footprint(label, spec.tp) for label, shape in proposals.drafts.items()}

    def memory(method: str, draft: str | None, depth: int, rows: int) -> int:
        return memory_bytes(target_footprint, draft_footprints.get(draft) if draft else None, method, depth, rows,
                            requests.row_tokens)

    notes: list[str] = []
    warnings: list[str] = []
    limit = fit.usable_bytes(spec.memory_bytes)
    if memory("none", None, 0, 1) > limit:
        where = f"{spec.tp} GPUs" if spec.tp > 1 else "one GPU"
        warnings.append(f"the target does not fit in {USABLE_MEMORY} of the {spec.name}'s memory on {where} even at "
                        "concurrency 1; " + _smallest_tp(target, proposals.name, spec, requests.row_tokens))
    if sizes is None:
        sizes = [b for b in DEFAULT_CONCURRENCIES if memory("none", None, 0, b) <= limit] or [1]
    predictions, priced = predict_configurations(spec, proposals, requests, sizes, pricing)
    if adjust is not None:
        predictions, adjusted = adjust(predictions)
        notes += adjusted
    rows = [_choose(concurrency, list(predicted.items()), memory, limit, priced)
            for concurrency, predicted in predictions.items()]
    warnings += _overhead_warning(spec, target, sizes, requests.context, priced)
    if spec.tp == 1 and spec.device_type == "cuda":
        notes.append("one GPU per replica: pass --tp N for tensor parallelism")
    return Predicted(rows, requests.context, max(requests.prompts), priced.notes + notes, warnings, priced)


def _overhead_warning(spec: AcceleratorSpec, target: ModelShape, sizes: list[int], context: float,
                      priced: Priced) -> list[str]:
    """A warning when the assumed step overhead is more than OVERHEAD_WARNING of a decoding step."""
    step = {b: forward_pass(spec, target, b, 1, context) for b in sizes}
    share = {b: t.overhead_s / t.seconds for b, t in step.items()}
    worst = max(share, key=share.get)
    # A fitted overhead is not assumed; measured kernels carry their own latencies.
    if share[worst] <= OVERHEAD_WARNING or spec.calibrated_from is not None or priced.source != "roofline":
        return []
    return [f"the assumed step overhead ({spec.pass_overhead_us:.0f} us per step + "
            f"{spec.kernel_latency_us:g} us per kernel, ~{target.kernels_per_layer:.0f} kernels per layer) "
            f"is {share[worst]:.0%} of a decoding step at concurrency {worst}: the plan rests on that assumption "
            f"more than on the {spec.name}'s figures"]


def predict_configurations(spec: AcceleratorSpec, proposals: Proposals, requests: Requests, sizes: Sequence[int],
                           pricing: Pricing | None = None) -> tuple[Predictions, Priced]:
    """Concurrency -> every configuration's prediction (none, and each proposer at depths 1..its
    ``depth_of``): the step costs ``pricing`` gives (default: the roofline) replayed over the
    requests' steady-state stream; and what priced them. What a plan chooses from, and what
    docs/plan-validation.md checks."""
    deepest = max(proposals.depth_of.values(), default=0)
    prompt = max(requests.prompts)
    priced = (pricing or Pricing(mode="roofline")).price(spec, proposals.target, proposals.drafts, requests.context,
                                                          prompt)
    cost = cost_profile(priced.pricer, sizes, range(1, max(deepest, 1) + 1), prompt,
                        {"none", *(method for method, _ in proposals.curves)}, priced.source, priced.spread)
    candidates = [("none", None, 0)] + [(method, draft, depth) for (method, draft), top in proposals.depth_of.items()
                                        for depth in range(1, top + 1)]
    performance = PerformanceModel(cost, proposals.curves, requests.prompts, requests.lengths)
    return {concurrency: {config: p for config in candidates if (p := performance.predict(*config, concurrency)) is not None}
            for concurrency in sizes}, priced


def _choose(concurrency: int, predicted: list[tuple[Config, Prediction]], memory: Callable[..., int], limit: int,
            priced: Priced) -> PlanRow:
    """The plan's row at ``concurrency``: the fastest configuration that fits (any, when none fits),
    or a simpler one within SIMPLER_WITHIN of it."""
    sized = [(config, p, memory(*config, concurrency)) for config, p in predicted]
    fitting = [item for item in sized if item[2] <= limit] or sized
    leader = max(fitting, key=lambda item: item[1].tokens_per_s)
    close = [item for item in fitting if item[1].tokens_per_s >= (1 - SIMPLER_WITHIN) * leader[1].tokens_per_s]
    (method, draft, depth), prediction, need = min(close, key=lambda item: (SIMPLICITY.get(item[0][0], 9), item[0][2],
                                                                          -item[1].tokens_per_s))
    baseline = next(p for config, p in predicted if config[0] == "none")
    low, high = plan_interval(prediction, priced)
    return PlanRow(
        concurrency=concurrency, label=label(method, draft, depth), method=method, draft=draft, depth=depth,
        predicted_tokens_per_s=prediction.tokens_per_s, predicted_tokens_per_s_low=low,
        predicted_tokens_per_s_high=high,
        predicted_speedup=prediction.tokens_per_s / baseline.tokens_per_s,
        predicted_baseline_tokens_per_s=baseline.tokens_per_s,
        predicted_tpot_ms_p50=prediction.latency_ms.get("tpot_ms_p50"), predicted_acceptance_length=prediction.omega,
        memory_bytes=int(need), memory_limit_bytes=limit, fits=need <= limit,
        leader=None if leader[0] == (method, draft, depth) else label(*leader[0]),
        alternatives=_alternatives(sized, baseline, limit),
    )


def _alternatives(sized: list[tuple[Config, Prediction, int]], baseline: Prediction, limit: int) -> list[dict[str, Any]]:
    """The best depth of each proposer, fastest first."""
    best_of: dict[Proposer, tuple[Config, Prediction, int]] = {}
    for item in sized:
        key = item[0][:2]
        if key not in best_of or item[1].tokens_per_s > best_of[key][1].tokens_per_s:
            best_of[key] = item
    return [{"label": label(*config), "method": config[0], "draft": config[1], "depth": config[2],
             "predicted_tokens_per_s": p.tokens_per_s, "predicted_speedup": p.tokens_per_s / baseline.tokens_per_s,
             "predicted_acceptance_length": p.omega, "fits": need <= limit}
            for config, p, need in sorted(best_of.values(), key=lambda item: -item[1].tokens_per_s)]


def plan_interval(prediction: Prediction, priced: Priced) -> tuple[float, float]:
    """The 95 % interval of tokens/s with the step-cost source's spread, wider on the slow side
    (:mod:`autotune.perfmodel.calibration`, :mod:`autotune.perfmodel.silicon_cost`), in place of
    the cost profile's symmetric one."""
    rest = sum(sigma ** 2 for name, sigma in prediction.sigmas.items() if name != "cost")
    value = prediction.tokens_per_s
    return (value * math.exp(-Z95 * math.sqrt(rest + priced.slow ** 2)),
            value * math.exp(Z95 * math.sqrt(rest + priced.fast ** 2)))


def label(method: str, draft: str | None, depth: int) -> str:
    """A configuration in words: ``none``, ``METHOD@DEPTH`` or ``draft:LABEL@DEPTH``."""
    if method == "none":
        return "none"
    return f"draft:{draft}@{depth}" if method == "draft" else f"{method}@{depth}"


def covered_depth(curve: AcceptanceCurve, max_depth: int | None) -> int:
    """The deepest depth ``curve`` covers, at most ``max_depth``."""
    top = max((d for d in range(1, curve.max_depth + 1) if curve.covers(d)), default=0)
    return min(top, max_depth) if max_depth is not None else top


def memory_bytes(target: ModelFootprint, draft: ModelFootprint | None, method: str, depth: int, rows: int,
                 row_tokens: int) -> int:
    """The tuner's estimate (:mod:`autotune.models.fit`) for ``rows`` sequences of ``row_tokens``
    tokens: the engines a plan is for keep the logits of the last prompt position only."""
    per_sequence = fit.bytes_per_sequence(method, depth, row_tokens + 1, 1, target, draft)
    return fit.weight_bytes(method, target, draft) + rows * per_sequence


def _smallest_tp(target: ModelShape, name: str, spec: AcceleratorSpec, row_tokens: int) -> str:
    """Words naming the smallest tensor-parallel degree (dividing the heads) at which concurrency 1 fits."""
    limit = fit.usable_bytes(spec.memory_bytes)
    for tp in range(spec.tp + 1, MAX_TP + 1):
        if target.heads % tp == 0 and memory_bytes(target.footprint(name, tp), None, "none", 0, 1, row_tokens) <= limit:
            return f"the smallest tensor parallelism that fits is --tp {tp}"
    return f"no tensor parallelism up to {MAX_TP} GPUs fits"


def basis(spec: AcceleratorSpec, acceptance: list[dict[str, Any]], predicted: Predicted,
          deployment: Deployment) -> dict[str, Any]:
    """What the prediction rests on, as the plan states it (without the workload's part)."""
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
