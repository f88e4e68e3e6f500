"""What a plan reads from the database, as plain data: a tuned target's stored acceptance profiles
and drafts, the hardware (a catalog GPU, or a stored hardware profile: a CUDA one through its NVML
name's datasheet figures, a CPU one through its probe's measured bandwidth and FLOP/s), the
calibration stored for it, and another target's profile as a proxy for an untuned model's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from autotune.errors import ConfigurationError, NotFoundError
from autotune.hardware.catalog import (
    AcceleratorSpec,
    accelerator_for_gpu,
    accelerator_names,
    catalog_nvml_name,
    find_accelerator,
)
from autotune.perfmodel.acceptance import AcceptanceCurve
from autotune.planning.inputs import StoredCalibration, stored_calibration_in
from autotune.planning.predict import Proposer, covered_depth
from autotune.profiles.data import ModelInfo
from autotune.workload import Workload, load_workload

# A CPU runs PyTorch eagerly: each op pays the probe's measured launch overhead (the roofline's
# kernel latency; the embedded engine's layer is roofline.EMBEDDED_LAYER_KERNELS ops). Besides the
# roofline's pass-end kernels (embedding, final norm, head) a pass runs ~7 more ops (sampling,
# cache bookkeeping).
CPU_OPS_PER_PASS = 7


@dataclass(frozen=True)
class Stored:
    """What the plan of a tuned target reads from the database."""

    spec: AcceleratorSpec
    origin: dict[str, Any]
    target: ModelInfo
    drafts: dict[str, ModelInfo]  # label -> model
    curves: dict[Proposer, AcceptanceCurve]
    acceptance: list[dict[str, Any]]
    lengths: list[int] | None
    calibration: StoredCalibration | None  # a probe of this GPU model, a stored cost profile's fit


def read_database(db_url: str | None, hardware: str, model: str, work: Workload, engine: str) -> Stored:
    """What the plan of target ``model`` on ``hardware`` for ``work`` served by ``engine`` reads
    (a ConfigurationError when no acceptance of it on that workload is stored)."""
    from autotune.profiles.records import model_info
    from autotune.store import open_database, performance, plan_queries

    with open_database(db_url) as database, database.session() as session:
        spec, origin, calibration = _hardware(session, hardware, engine)
        target = plan_queries.find_target(session, model, work.sha256)
        records = performance.acceptance_profiles(session, target_model_id=target.id, workload_fingerprint=work.sha256)
        if not records:
            raise ConfigurationError(_no_acceptance(session, target, work))
        drafts_by_id, by_fingerprint = plan_queries.proposer_drafts(session, records)
        names = [m.name for m in by_fingerprint.values()]
        curves: dict[Proposer, AcceptanceCurve] = {}
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
                key: Proposer = ("draft", label)
            else:
                key = (record.proposer, None)
            curves[key] = curve
            sources += list(curve.sources)
            acceptance.append({
                "proposer": record.proposer, "origin": "measured", "label": key[0] if key[1] is None else f"draft:{key[1]}",
                "workload": record.workload_name, "workload_fingerprint": record.workload_fingerprint,
                "max_depth": curve.max_depth, "sequence_steps": curve.steps, "measurements": len(curve.sources),
                "acceptance_length": [round(curve.omega(d), 4) for d in range(1, covered_depth(curve, None) + 1)],
                "updated_at": str(record.updated_at),
            })
        if not curves:
            raise ConfigurationError(_no_acceptance(session, target, work))
        lengths = plan_queries.measured_request_tokens(session, sources, len(work.requests))
        target_info = model_info(target)
    return Stored(spec, origin, target_info, drafts, curves, acceptance, lengths, calibration)


def _hardware(session: Any, hardware: str, engine: str) -> tuple[AcceleratorSpec, dict[str, Any],
                                                                 StoredCalibration | None]:
    """The spec of ``hardware`` (a catalog name, else a stored profile), where it comes from, and
    the calibration stored for its GPU model and ``engine``."""
    catalog = find_accelerator(hardware)
    if catalog is not None:
        origin = {"key": hardware.strip().lower(), "origin": "catalog", "fingerprint": None}
        return catalog, origin, stored_calibration_in(session, catalog_nvml_name(hardware) or "", engine, catalog)
    spec, origin, probe = _stored_hardware(session, hardware)
    gpu = origin.get("gpu")
    return spec, origin, replace(stored_calibration_in(session, gpu, engine, spec), probe=probe) if gpu else None


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


def proxy_curve(db_url: str | None, model: str, method: str,
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
        top = covered_depth(curve, None)
        if top < 1:
            raise ConfigurationError(f"--acceptance-from {model}: the stored {method} profile covers no depth")
        curve = AcceptanceCurve(method, curve.positions[:top], curve.sources)
        item = {"proposer": method, "label": method, "origin": "proxy", "proxy_model": stored.name,
                "workload": record.workload_name, "workload_fingerprint": record.workload_fingerprint,
                "max_depth": top, "sequence_steps": curve.steps, "measurements": len(curve.sources),
                "acceptance_length": [round(curve.omega(d), 4) for d in range(1, top + 1)]}
    return curve, item

