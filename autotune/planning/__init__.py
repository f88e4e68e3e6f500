"""``autotune plan``: what speculative decoding would do on hardware you do not have.

Acceptance is a property of (target, proposer, workload), not of the machine (DESIGN.md section
9): the acceptance profiles ``autotune tune`` stored on any machine carry over. Step costs do not:
here they come from NVIDIA's measured kernels for the GPU, engine and version where
aiconfigurator-core has them, part by part, else from a roofline of the device
(:mod:`autotune.planning.costs`, ``--step-costs``; :mod:`autotune.perfmodel.roofline`) — a catalog
GPU (``--hardware h200``) or a stored hardware profile (a CUDA one through its NVML name's datasheet
figures, a CPU one through its probe's measured bandwidth and FLOP/s). The performance model
(:class:`~autotune.perfmodel.model.PerformanceModel`) combines the two and replays the workload
at each concurrency. Every figure is a prediction and is labelled so; nothing is measured and
nothing is written to the database.

Two entry points: :func:`plan_deployment` for a target tuned on any machine (its stored acceptance),
and :func:`plan_from_config` for a model known by its config.json only (acceptance given, or another
target's stored profile as a proxy; :mod:`autotune.planning.inputs` reads the configs and checks
the deployment). Both take a :class:`~autotune.planning.inputs.Deployment` (tensor parallelism,
dtypes, engine, ``--isl/--osl``) and calibrate the roofline (:mod:`autotune.perfmodel.calibration`);
the plan says which calibration it used and warns when the assumed step overhead is more than
:data:`~autotune.planning.predict.OVERHEAD_WARNING` of a decoding step, when acceptance is a
proxy, and when the target does not fit (naming the smallest tensor parallelism that does).

Per concurrency the plan picks the configuration with the most predicted tokens/s, preferring the
simpler one when it is within :data:`~autotune.planning.predict.SIMPLER_WITHIN` of it, and checks
memory with the estimate and margin the preflight and the tuner use (:mod:`autotune.models.fit`):
weights, the caches of ``batch x (longest prompt + max_tokens + 1 + depth)`` positions and the last
prompt position's logits must fit in :data:`~autotune.planning.result.USABLE_MEMORY` of one GPU's
memory (weights and KV split over ``--tp`` GPUs).

The workload's requests are replayed as the steady-state stream a measurement runs
(:mod:`autotune.analysis.steady`: cycled to at least 4 requests per row, figures over the window
between ramp-up and drain): a plan for batch 256 is about a server kept busy at 256 rows, not about
the 16 requests of the built-in workload. With ``--isl/--osl`` every request has those lengths, so
the KV cache a step reads is that of real sequences at any concurrency.

The modules, by layer: :mod:`~autotune.planning.options` (what is asked),
:mod:`~autotune.planning.inputs` (configs, deployment, calibration), :mod:`~autotune.planning.stored` (the database),
:mod:`~autotune.planning.requests` and :mod:`~autotune.planning.predict` (the math),
:mod:`~autotune.planning.costs` (step-cost sources), :mod:`~autotune.planning.mix` (``--mix``),
:mod:`~autotune.planning.tuned` and :mod:`~autotune.planning.from_config` (the two entry points),
:mod:`~autotune.planning.result` (the plan) and :mod:`~autotune.planning.files` (its export).
"""

from autotune.planning.files import write_plan_export
from autotune.planning.from_config import plan_from_config
from autotune.planning.options import (
    MAX_CONCURRENCY,
    MAX_DEPTH,
    GivenAcceptance,
    PlanOptions,
    Scope,
    parse_concurrencies,
)
from autotune.planning.predict import SIMPLER_WITHIN, plan_interval, predict_configurations
from autotune.planning.result import DeploymentPlan, PlanRow
from autotune.planning.tuned import plan_deployment

__all__ = [
    "MAX_CONCURRENCY", "MAX_DEPTH", "SIMPLER_WITHIN", "DeploymentPlan", "GivenAcceptance", "PlanOptions", "PlanRow",
    "Scope", "parse_concurrencies", "plan_deployment", "plan_from_config", "plan_interval", "predict_configurations",
    "write_plan_export",
]
