"""Data types of a hardware probe: what the machine is (spec) and what it measured (metrics).

A :class:`HardwareProfile` is plain data: the probe builds it, the store persists ``to_dict()``
as JSON, the tuner reads memory size and bandwidth from it.

Fingerprint decision: the fingerprint hashes the hardware's *identity* (GPU model, memory size
and compute capability per device plus the device count; or CPU model, logical cores, RAM and
architecture), never measured values nor serial numbers/UUIDs.  Two identical nodes of a team
therefore share one fingerprint, and so share their tuning results, while any change of model,
count or memory size gives a new one.  Memory sizes enter rounded to GiB so that a driver
update that reserves a few MiB more does not orphan stored results.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# Bump when a measurement changes meaning (sizes, formula, timing method): profiles measured
# with different methods are not comparable.
PROBE_METHOD_VERSION = 1

GIB = 1 << 30

# Metrics that measure memory bandwidth, by device type: GPUs time a device-to-device copy,
# CPUs a large RAM-to-RAM copy.  Both count bytes read + bytes written.
BANDWIDTH_METRICS = ("copy_bw_gbps", "memory_bw_gbps")


def fingerprint_of(identity: dict[str, Any]) -> str:
    """Return the first 16 hex chars of the sha256 of ``identity`` as canonical JSON."""
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def round_gib(num_bytes: int) -> int:
    """Bytes rounded to whole GiB (for identities and readable names)."""
    return round(num_bytes / GIB)


def _require(d: dict[str, Any], key: str, what: str) -> Any:
    if key not in d:
        raise ValueError(f"{what} dict lacks the key {key!r}")
    return d[key]


@dataclass(frozen=True)
class Metric:
    """One measured quantity next to its theoretical peak (``None`` where unknown)."""

    name: str
    unit: str
    measured: float | None
    peak: float | None = None

    def __post_init__(self) -> None:
        for label, value in (("measured", self.measured), ("peak", self.peak)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"metric {self.name}: {label} must be a finite number >= 0, got {value!r}")

    @property
    def ratio(self) -> float | None:
        """measured / peak, or ``None`` when either is unknown (or the peak is zero)."""
        if self.measured is None or not self.peak:
            return None
        return self.measured / self.peak

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``ratio`` is included for readers and ignored by :meth:`from_dict`."""
        return {"name": self.name, "unit": self.unit, "measured": self.measured, "peak": self.peak,
                "ratio": self.ratio}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Metric:
        return cls(name=_require(d, "name", "metric"), unit=_require(d, "unit", "metric"),
                   measured=_require(d, "measured", "metric"), peak=d.get("peak"))


@dataclass(frozen=True)
class DeviceInfo:
    """Static facts about one GPU as NVML reports them (``None`` where NVML does not support a query)."""

    index: int
    name: str
    memory_total_bytes: int
    memory_free_bytes: int | None
    compute_capability: str | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    mem_bus_width_bits: int | None
    peak_bw_gbps: float | None
    uuid: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceInfo:
        for key in ("index", "name", "memory_total_bytes"):
            _require(d, key, "device")
        return cls(**{f.name: d.get(f.name) for f in fields(cls)})


@dataclass(frozen=True)
class HardwareProfile:
    """The result of one probe: identity, static spec and measured metrics of a machine.

    ``spec`` holds JSON-ready static facts.  Keys the properties below rely on: CUDA profiles
    have ``devices`` (list of :meth:`DeviceInfo.to_dict`) and ``benchmarked_device`` (index into
    it); CPU profiles have ``ram_total_bytes``.
    """

    fingerprint: str
    name: str
    device_type: str  # "cuda" | "cpu"
    device_count: int
    spec: dict[str, Any] = field(hash=False)
    metrics: tuple[Metric, ...]
    method_version: int = PROBE_METHOD_VERSION
    quick: bool = False
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        if self.device_type not in ("cuda", "cpu"):
            raise ValueError(f"device_type must be 'cuda' or 'cpu', got {self.device_type!r}")

    def metric(self, name: str) -> Metric | None:
        """The metric called ``name``, or ``None`` if this profile did not measure it."""
        return next((m for m in self.metrics if m.name == name), None)

    @property
    def memory_total_bytes(self) -> int:
        """Memory one model replica can use: the benchmarked GPU's memory, or the machine's RAM."""
        if self.device_type == "cuda":
            device = self.spec["devices"][self.spec.get("benchmarked_device", 0)]
            return int(device["memory_total_bytes"])
        return int(self.spec["ram_total_bytes"])

    @property
    def _bandwidth_metric(self) -> Metric | None:
        measured = [m for m in map(self.metric, BANDWIDTH_METRICS) if m is not None and m.measured is not None]
        return max(measured, key=lambda m: m.measured, default=None)

    @property
    def memory_bw_gbps(self) -> float | None:
        """Best measured memory bandwidth in GB/s (the roofline's BW), ``None`` if not measured."""
        best = self._bandwidth_metric
        return best.measured if best else None

    @property
    def peak_memory_bw_gbps(self) -> float | None:
        """Theoretical memory bandwidth in GB/s, ``None`` where unknown (typical for CPUs)."""
        best = self._bandwidth_metric
        return best.peak if best else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form; :meth:`from_dict` restores an equal profile."""
        return {
            "fingerprint": self.fingerprint,
            "name": self.name,
            "device_type": self.device_type,
            "device_count": self.device_count,
            "spec": self.spec,
            "metrics": [m.to_dict() for m in self.metrics],
            "method_version": self.method_version,
            "quick": self.quick,
            "duration_s": self.duration_s,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HardwareProfile:
        """Rebuild a profile from :meth:`to_dict` output; raises ``ValueError`` on a malformed dict."""
        return cls(
            fingerprint=_require(d, "fingerprint", "hardware profile"),
            name=_require(d, "name", "hardware profile"),
            device_type=_require(d, "device_type", "hardware profile"),
            device_count=_require(d, "device_count", "hardware profile"),
            spec=_require(d, "spec", "hardware profile"),
            metrics=tuple(Metric.from_dict(m) for m in _require(d, "metrics", "hardware profile")),
            method_version=_require(d, "method_version", "hardware profile"),
            quick=d.get("quick", False),
            duration_s=d.get("duration_s", 0.0),
        )
