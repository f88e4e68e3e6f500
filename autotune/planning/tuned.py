"""The plan of a target tuned on any machine: its stored acceptance profiles (and drafts), priced on
the hardware asked for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.analysis.steady import STREAM_FACTOR
from autotune.errors import ConfigurationError
from autotune.hardware.catalog import AcceleratorSpec, catalog_nvml_name
from autotune.models.kind import draft_kind
from autotune.perfmodel.roofline import ModelShape
from autotune.planning.costs import ConfigSource
from autotune.planning.inputs import Deployment, compute_dtype, deployment_spec
from autotune.planning.options import Scope
from autotune.planning.predict import Adjust, Proposals, basis, covered_depth, predict
from autotune.planning.requests import BYTES_PER_TOKEN, workload_requests
from autotune.planning.result import DeploymentPlan
from autotune.planning.stored import Stored, read_database
from autotune.profiles.data import ModelInfo
from autotune.workload import Workload, load_workload


def plan_deployment(db_url: str | None, *, hardware: str, model: str, scope: Scope | None = None,
                    deployment: Deployment | None = None, mix: Mapping[str, float] | None = None) -> DeploymentPlan:
    """Predict the best configuration per concurrency of target ``model`` on ``hardware`` (a catalog
    name or a stored hardware profile's name or fingerprint), from the acceptance profiles stored
    for the scope's workload (default: the built-in one). Reads the database only. ``mix``: request
    shares by category, the predictions carried over to it before choosing
    (:mod:`autotune.planning.mix`; needs a study on a workload with categories)."""
    scope = scope or Scope()
    deployment = deployment or Deployment()
    work = load_workload(scope.workload)
    stored = read_database(db_url, hardware, model, work, deployment.engine)
    adjust = _mix_adjust(db_url, stored, mix, work) if mix is not None else None
    target_shape = deployment.shape(_shape(stored.target, stored.spec), "target")
    draft_shapes = {label: deployment.shape(_shape(info, stored.spec), f"draft {label}")
                    for label, info in stored.drafts.items()}
    spec = deployment_spec(stored.spec, deployment, compute_dtype(target_shape, stored.spec, deployment.dtype)
                           if stored.spec.device_type == "cuda" else stored.spec.dtype, stored.calibration)
    gpu = catalog_nvml_name(hardware) if stored.origin["origin"] == "catalog" else stored.origin.get("gpu")
    pricing = deployment.pricing(gpu, _config_source(stored.target, "target"),
                                 {label: _config_source(info, "draft") for label, info in stored.drafts.items()})
    byte_level = "d_model" in stored.target.config
    requests = workload_requests(work, deployment, byte_level, stored.lengths)
    depth_of = {key: covered_depth(curve, scope.max_depth) for key, curve in stored.curves.items()}
    notes: list[str] = []
    if scope.max_depth is not None and any(depth < curve.max_depth for depth, curve in
                                           zip(depth_of.values(), stored.curves.values())):
        notes.append(f"depths capped at --max-depth {scope.max_depth}")
    if not byte_level and not deployment.isl:
        notes.append(f"prompt tokens estimated at {BYTES_PER_TOKEN} bytes per token (the tokenizer is not loaded)")
    proposals = Proposals(stored.target.name, target_shape, draft_shapes, stored.curves, depth_of)
    predicted = predict(spec, proposals, requests, scope.sizes, pricing, adjust)
    plan_basis = basis(spec, stored.acceptance, predicted, deployment)
    plan_basis["workload"] = _workload_basis(deployment, stored, byte_level, len(requests.prompts))
    workload_info = {"name": work.name, "label": work.label, "fingerprint": work.sha256, "requests": len(work.requests)}
    return DeploymentPlan(spec, stored.origin, stored.target, stored.drafts, workload_info, predicted.rows, plan_basis,
                          notes + predicted.notes, predicted.warnings, f"acceptance measured on {work.label}"
                          + (" for the mix " + ",".join(f"{k}={v:g}" for k, v in mix.items()) if mix else ""))


def _mix_adjust(db_url: str | None, stored: Stored, mix: Mapping[str, float], work: Workload) -> Adjust:
    """The predictions carried over to ``mix`` (:mod:`autotune.planning.mix`), with its notes."""
    from autotune.planning.mix import apply_mix, stored_factors

    factors, mix_notes = stored_factors(db_url, {key: curve.sources for key, curve in stored.curves.items()},
                                        mix, work.label)

    def adjust(predictions):  # noqa: ANN001, ANN202 - batch size -> configuration -> Prediction
        carried, borrowed = apply_mix(predictions, factors)
        return carried, mix_notes + borrowed

    return adjust


def _workload_basis(deployment: Deployment, stored: Stored, byte_level: bool, requests: int) -> dict[str, Any]:
    """Where the replayed requests' token counts come from, in words."""
    return {"requests": requests, "requests_per_row": STREAM_FACTOR,
            "output_lengths": "--osl" if deployment.osl else
            "measured (a stored run's)" if stored.lengths else "the requests' max_tokens",
            "prompt_tokens": "--isl" if deployment.isl else "bytes + 1 (byte-level target)" if byte_level
            else f"about {BYTES_PER_TOKEN} bytes per token"}


def _shape(model: ModelInfo, spec: AcceleratorSpec) -> ModelShape:
    """The sizes of a stored model, from its stored config."""
    try:
        shape = ModelShape.from_config(model.config, params=model.num_params, n_mtp=model.num_mtp_modules)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the sizes of {model.role} {model.name} from its stored config ({exc})") from None
    # A CPU computes in fp32 (the embedded engine's dtype, and the probe's measured FLOP/s).
    return shape.with_dtype(spec.dtype_bytes) if spec.dtype == "fp32" else shape


def _config_source(model: ModelInfo, role: str) -> ConfigSource | None:
    """A stored model as the measured kernel data builds it: None for a built-in one (no config.json)."""
    if "d_model" in model.config:
        return None
    return ConfigSource(model.name, model.config, None, "target" if role == "target" else draft_kind(model.config))
