"""The plan of a model known by its config.json only: no tuning beforehand, the acceptance given
(:class:`~autotune.planning.options.GivenAcceptance`) or borrowed from another target's stored
profile (a proxy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.errors import NotFoundError
from autotune.hardware.catalog import accelerator_names, catalog_nvml_name, find_accelerator
from autotune.perfmodel.acceptance import AcceptanceCurve
from autotune.perfmodel.given_acceptance import given_curve, rates_from_length
from autotune.planning.inputs import (
    DEFAULT_ISL,
    DEFAULT_OSL,
    Deployment,
    compute_dtype,
    deployment_spec,
    read_config_model,
    stored_calibration,
)
from autotune.planning.options import GivenAcceptance, Scope
from autotune.planning.predict import Proposals, basis, covered_depth, label, predict
from autotune.planning.requests import BYTES_PER_TOKEN, Requests, workload_requests
from autotune.planning.result import DeploymentPlan
from autotune.planning.stored import proxy_curve
from autotune.workload import load_workload


def plan_from_config(db_url: str | None, *, hardware: str, config: str | Path, acceptance: GivenAcceptance,
                     draft_config: str | Path | None = None, scope: Scope | None = None,
                     deployment: Deployment | None = None) -> DeploymentPlan:
    """Predict the best configuration per concurrency of the model a config.json describes, with no
    tuning beforehand, from the ``acceptance`` given or borrowed; the proposer is the draft of
    ``draft_config``, else the config's MTP modules, else one that costs no forward pass (n-gram).
    Requests of ``--isl`` prompt and ``--osl`` output tokens (default 1024 each) unless the scope
    names a workload. Reads the database only for a proxy acceptance and for the calibration (a
    probe, a timed cost profile of the GPU model and engine)."""
    scope = scope or Scope()
    deployment = deployment or Deployment()
    acceptance.check()
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
    curve, item = _acceptance_curve(db_url, acceptance, key, scope)
    if acceptance.proxy is not None:
        warnings.append(f"acceptance is a proxy: {item['label']} measured for {acceptance.proxy} on {item['workload']} "
                        "(engine, dtype and proposer settings not recorded), not for this model")
    spec = deployment_spec(base, deployment, compute_dtype(target_shape, base, deployment.dtype),
                           stored_calibration(db_url, hardware, deployment.engine, base))
    requests = (workload_requests(load_workload(scope.workload), deployment, False, None) if scope.workload is not None
                else Requests([deployment.isl or DEFAULT_ISL], [deployment.osl or DEFAULT_OSL]))
    pricing = deployment.pricing(catalog_nvml_name(hardware), target.source,
                                 {draft.info.name: draft.source} if draft else {})
    proposals = Proposals(target.info.name, target_shape, draft_shapes, {key: curve},
                          {key: covered_depth(curve, scope.max_depth)})
    predicted = predict(spec, proposals, requests, scope.sizes, pricing)
    origin = {"key": hardware.strip().lower(), "origin": "catalog", "fingerprint": None}
    plan_basis = basis(spec, [item], predicted, deployment)
    plan_basis["workload"] = _workload_basis(requests, scope)
    name = f"isl {requests.prompts[0]} / osl {requests.lengths[0]}" if scope.workload is None else \
        load_workload(scope.workload).label
    workload_info = {"name": name, "label": name, "fingerprint": "", "requests": len(requests.prompts)}
    summary = f"acceptance {item['origin']} ({item.get('given') or 'from ' + acceptance.proxy}), {name}"
    return DeploymentPlan(spec, origin, target.info, {draft.info.name: draft.info} if draft else {}, workload_info,
                          predicted.rows, plan_basis, notes + predicted.notes, warnings + predicted.warnings, summary)


def _acceptance_curve(db_url: str | None, acceptance: GivenAcceptance, key: tuple[str, str | None],
                      scope: Scope) -> tuple[AcceptanceCurve, dict[str, Any]]:
    """The acceptance curve of the proposer ``key`` and the basis item that says where it comes from."""
    method = key[0]
    if acceptance.proxy is not None:
        return proxy_curve(db_url, acceptance.proxy, method, scope.workload)
    rates = list(acceptance.rates) if acceptance.rates is not None else rates_from_length(*acceptance.length)
    curve = given_curve(method, rates)
    how = (f"--acceptance {','.join(f'{r:g}' for r in rates)}" if acceptance.rates is not None else
           f"--acceptance-length {acceptance.length[0]:g} at depth {acceptance.length[1]}")
    item = {"proposer": method, "label": label(method, key[1], 0).removesuffix("@0"), "origin": "given",
            "given": how, "rates": [round(r, 4) for r in rates], "max_depth": curve.max_depth,
            "acceptance_length": [round(curve.omega(d), 4) for d in range(1, curve.max_depth + 1)]}
    return curve, item


def _workload_basis(requests: Requests, scope: Scope) -> dict[str, Any]:
    """Where the replayed requests' token counts come from, in words."""
    uniform = scope.workload is None  # --isl/--osl requests, not a workload's
    return {"requests": "one per row" if uniform else len(requests.prompts),
            "prompt_tokens": requests.prompts[0] if uniform else f"about {BYTES_PER_TOKEN} bytes per token",
            "output_tokens": requests.lengths[0] if uniform else "the requests' max_tokens"}
