"""What a plan is: the predicted best configuration per concurrency (:class:`PlanRow`) and the plan
around them (:class:`DeploymentPlan`), as words, JSON and a deployment profile for the exporters."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from autotune.errors import ConfigurationError
from autotune.hardware.catalog import AcceleratorSpec
from autotune.models import fit
from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo

PREDICTED = "PREDICTED"
# The share of one GPU's memory weights and caches may take (models.fit.usable_bytes), in words.
USABLE_MEMORY = f"{(1 - fit.MEMORY_MARGIN) * 100:.0f} %"


@dataclass(frozen=True)
class PlanRow:
    """The predicted best configuration at one concurrency (``fits``: in USABLE_MEMORY of the memory)."""

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
            raise ConfigurationError(f"nothing fits in {USABLE_MEMORY} of the {self.hardware.name}'s memory at the planned "
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
