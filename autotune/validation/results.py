"""A validation's result: per server and concurrency level the figures with their intervals, the
schedule's paired ratios to the other servers, the tuned-vs-served gap, and the JSON shape ``autotune validate --json``, ``profiles show --json`` and the
store share (:meth:`ValidationResult.to_dict` / :meth:`ValidationResult.from_dict`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from autotune.analysis.intervals import Estimate
from autotune.profiles.data import parse_iso, utc_iso
from autotune.validation.figures import Comparison


@dataclass(frozen=True)
class PointResult:
    """One server at one concurrency level: ``figures`` (name -> Estimate over ``runs`` runs) and the
    per-run values they came from (``run_values``: RunFigures dicts with ``acceptance_rate``)."""

    concurrency: int
    runs: int
    figures: dict[str, Estimate]
    run_values: list[dict[str, Any]] = field(default_factory=list)

    def figure(self, name: str) -> Estimate | None:
        return self.figures.get(name)

    def to_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "runs": self.runs,
                "figures": {name: value.to_dict() for name, value in self.figures.items()},
                "run_values": [dict(values) for values in self.run_values]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PointResult:
        return cls(int(data["concurrency"]), int(data["runs"]),
                   {name: Estimate.from_dict(value) for name, value in data.get("figures", {}).items()},
                   [dict(values) for values in data.get("run_values", [])])


@dataclass(frozen=True)
class ServerResult:
    """One of the three servers (:data:`autotune.validation.variants.SERVERS`): what it served
    (``label``), seconds until /health answered, and its points by ascending concurrency."""

    name: str
    label: str
    start_s: float | None
    points: list[PointResult]

    def point(self, concurrency: int) -> PointResult | None:
        return next((p for p in self.points if p.concurrency == concurrency), None)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "start_s": self.start_s,
                "points": [p.to_dict() for p in self.points]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerResult:
        return cls(str(data["name"]), str(data["label"]), data.get("start_s"),
                   [PointResult.from_dict(p) for p in data.get("points", [])])


@dataclass(frozen=True)
class ValidationResult:
    """What ``autotune validate`` measured for profile ``profile_id``: the ``servers`` side by side,
    the study's figure per concurrency (``tuned_tokens_per_s``, None where the study did not measure
    that concurrency) and ``gaps`` (the schedule server's tok/s over it, minus 1); ``comparisons``: the
    schedule against each other server per concurrency, paired over the rounds; ``servers_at_once``:
    how many servers were up together (all of them, or 1: each started for its turn of a round).
    ``id`` is the stored row's (None before storing). Validations stored before the rounds were
    paired have no comparisons."""

    profile_id: int
    engine: str
    engine_version: str
    concurrency: list[int]
    runs: int
    workload: str
    slo: dict[str, Any]
    servers: list[ServerResult]
    tuned_tokens_per_s: dict[int, float | None]
    gaps: dict[int, Estimate | None]
    created_at: dt.datetime
    id: int | None = None
    comparisons: list[Comparison] = field(default_factory=list)
    servers_at_once: int | None = None

    def server(self, name: str) -> ServerResult | None:
        return next((s for s in self.servers if s.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "profile_id": self.profile_id, "created_at": utc_iso(self.created_at),
            "engine": self.engine, "engine_version": self.engine_version, "concurrency": list(self.concurrency),
            "runs": self.runs, "workload": self.workload, "slo": dict(self.slo),
            "servers": [s.to_dict() for s in self.servers],
            "tuned_tokens_per_s": {str(c): v for c, v in self.tuned_tokens_per_s.items()},
            "gaps": {str(c): (g.to_dict() if g is not None else None) for c, g in self.gaps.items()},
            "comparisons": [c.to_dict() for c in self.comparisons], "servers_at_once": self.servers_at_once,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValidationResult:
        return cls(
            profile_id=int(data["profile_id"]), engine=str(data["engine"]),
            engine_version=str(data["engine_version"]), concurrency=[int(c) for c in data["concurrency"]],
            runs=int(data["runs"]), workload=str(data["workload"]), slo=dict(data.get("slo") or {}),
            servers=[ServerResult.from_dict(s) for s in data["servers"]],
            tuned_tokens_per_s={int(c): v for c, v in data.get("tuned_tokens_per_s", {}).items()},
            gaps={int(c): (Estimate.from_dict(g) if g is not None else None) for c, g in data.get("gaps", {}).items()},
            created_at=parse_iso(data["created_at"], "validation.created_at"), id=data.get("id"),
            comparisons=[Comparison.from_dict(c) for c in data.get("comparisons") or []],
            servers_at_once=data.get("servers_at_once"))
