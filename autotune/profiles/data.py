"""Deployment profiles as plain data: what a study recommends, where, for which model, and why.

These dataclasses are what the query functions return, what the exporters read and what the JSON
export writes (``to_dict``) and re-imports (``from_dict``). They hold no database handles: ids are
informative only, everything else is identified by content (hardware and model fingerprints, study
name, phase and trial number), which is what makes a profile portable between databases.

Figures carry their uncertainty: a trial's ``intervals`` (figure name -> Estimate dict) and
``repetitions`` (n), as the store keeps them; ``estimate(name)`` reads one as an
:class:`~autotune.analysis.intervals.Estimate` (one run, n = 1, no interval, where none was stored).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from autotune.analysis.intervals import Estimate
from autotune.errors import ConfigurationError
from autotune.store.results import PHASES, TrialFigures, TrialRow

METHODS = ("none", "mtp", "draft", "ngram")
# The headline figures a profile listing shows with their intervals (DeploymentProfile.summary).
PROFILE_FIGURES = ("tokens_per_s", "tpot_ms_p50", "speedup")


def utc_iso(value: dt.datetime | None) -> str | None:
    """An ISO-8601 UTC timestamp; naive values (SQLite returns those) are taken as UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc).isoformat()


def parse_iso(value: str | None, what: str) -> dt.datetime | None:
    """Inverse of :func:`utc_iso`; a ConfigurationError names ``what`` when the text is no timestamp."""
    if value is None:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{what} must be an ISO-8601 timestamp, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def _from_fields(cls: type, data: Any, what: str, converters: dict[str, Any] | None = None) -> Any:
    """Build dataclass ``cls`` from ``data``: every field without a default is required."""
    if not isinstance(data, dict):
        raise ConfigurationError(f"{what} must be a JSON object, got {type(data).__name__}")
    converters = converters or {}
    values = {}
    for f in fields(cls):
        if f.name in data:
            convert = converters.get(f.name)
            values[f.name] = convert(data[f.name]) if convert else data[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ConfigurationError(f"{what} lacks the key {f.name!r}")
    return cls(**values)


@dataclass(frozen=True)
class HardwareInfo:
    """The machine kind a profile was measured on."""

    fingerprint: str
    name: str
    device_type: str
    device_count: int
    memory_total_bytes: int
    spec: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> HardwareInfo:
        return _from_fields(cls, data, "hardware")


@dataclass(frozen=True)
class ModelInfo:
    """A target or draft model, identified by the fingerprint of its weights and config."""

    fingerprint: str
    name: str
    role: str  # "target" | "draft"
    source: str  # a path, or "builtin:<name>" for the models shipped with autotune
    num_params: int | None = None
    num_mtp_modules: int = 0
    vocab_size: int | None = None
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def is_builtin(self) -> bool:
        """A model shipped inside autotune (no checkpoint a serving engine could load)."""
        return self.source.startswith("builtin:")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> ModelInfo:
        return _from_fields(cls, data, "model")


@dataclass(frozen=True)
class StudyInfo:
    """The search a profile came from: engine, objective, workload and search space."""

    name: str
    optuna_study_name: str
    engine: str
    objective: str
    workload_name: str
    workload_fingerprint: str
    status: str
    created_at: dt.datetime
    finished_at: dt.datetime | None = None
    search_space: dict[str, Any] = field(default_factory=dict)
    slo: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = utc_iso(self.created_at)
        data["finished_at"] = utc_iso(self.finished_at)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> StudyInfo:
        return _from_fields(cls, data, "study", {
            "created_at": lambda v: parse_iso(v, "study.created_at"),
            "finished_at": lambda v: parse_iso(v, "study.finished_at"),
        })


def _phase(value: Any, what: str) -> str:
    if value not in PHASES:
        raise ConfigurationError(f"{what} must be one of {', '.join(PHASES)}, got {value!r}")
    return value


def _repetitions(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"{what} must be an integer >= 1, got {value!r}")
    return value


def _intervals(value: Any, what: str) -> dict[str, Any]:
    """Figure name -> Estimate dict; None (how a row without intervals may be written) reads as {}."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, dict) and "value" in v for v in value.values()):
        raise ConfigurationError(f"{what} must map figure names to {{\"value\", \"low\", \"high\", \"n\"}} objects")
    return {name: dict(estimate) for name, estimate in value.items()}


def _prediction(value: Any, what: str) -> dict[str, Any] | None:
    """The performance model's prediction: an object kept as written, or null (none was made)."""
    if value is not None and not isinstance(value, dict):
        raise ConfigurationError(f"{what} must be a JSON object or null, got {type(value).__name__}")
    return None if value is None else dict(value)


# A trial's keys in a profile document, in the order written: its figures, its configuration, and
# its draft model by fingerprint under "draft" (the tuner's label stays in "extra", as stored).
TRIAL_DOCUMENT_FIGURES = tuple(f.name for f in fields(TrialFigures))
TRIAL_DOCUMENT_CONFIG = ("trial_number", "method", "depth", "concurrency", "state", "draft", "reason")
TRIAL_REQUIRED = ("trial_number", "method", "depth", "concurrency", "state")


def trial_document(row: TrialRow) -> dict[str, Any]:
    """The profile document's form of a trial (:func:`trial_from_document` reads it back)."""
    data = asdict(row)
    document = {name: data[name] for name in TRIAL_DOCUMENT_FIGURES}
    document["created_at"] = utc_iso(row.created_at)
    document.update({name: data[name] for name in TRIAL_DOCUMENT_CONFIG})
    document["draft"] = row.draft_fingerprint
    return document


def trial_from_document(data: Any) -> TrialRow:
    """A trial of a profile document; ConfigurationError naming the first bad or missing key.

    Rows exported before phases existed read as screening passes (n = 1, no interval); rows
    exported before predictions existed (no ``prediction`` key) read as not predicted (None).
    """
    if not isinstance(data, dict):
        raise ConfigurationError(f"measurement must be a JSON object, got {type(data).__name__}")
    missing = next((name for name in TRIAL_REQUIRED if name not in data), None)
    if missing is not None:
        raise ConfigurationError(f"measurement lacks the key {missing!r}")
    converters = {
        "created_at": lambda v: parse_iso(v, "measurement.created_at"),
        "phase": lambda v: _phase(v, "measurement.phase"),
        "repetitions": lambda v: _repetitions(v, "measurement.repetitions"),
        "intervals": lambda v: _intervals(v, "measurement.intervals"),
        "prediction": lambda v: _prediction(v, "measurement.prediction"),
    }
    values = {
        name: converters[name](data[name]) if name in converters else data[name]
        for name in (*TRIAL_DOCUMENT_FIGURES, *TRIAL_DOCUMENT_CONFIG) if name in data and name != "draft"
    }
    extra = values.get("extra")
    label = extra.get("draft") if isinstance(extra, dict) else None
    return TrialRow(**values, draft=label, draft_fingerprint=data.get("draft"))


@dataclass(frozen=True)
class DeploymentProfile:
    """The configuration a study recommends on one machine kind for one target model.

    ``per_concurrency`` is the study's table of the recommendation at each measured concurrency
    (:class:`autotune.analysis.decision.ConcurrencyBest` as dicts: ``{"concurrency", "method",
    "depth", "tokens_per_s", "speedup", "speedup_low", "speedup_high", "repetitions", "tied", ...}``,
    depth 0 where speculation does not clear 1.0x); ``chosen_trial`` and ``chosen_phase`` identify
    the trial the profile was taken from. ``repetitions`` and ``intervals`` (figure name ->
    Estimate dict) are that trial's: n = 1 and no interval for a screening pass (and for profiles
    exported before intervals existed). ``measurements`` (all trials of the study) and
    ``draft_models`` (every draft they used) are loaded for show, export and report, and empty in
    listings.
    """

    id: int | None
    created_at: dt.datetime
    study: StudyInfo
    hardware: HardwareInfo
    target: ModelInfo
    method: str
    depth: int
    concurrency: int
    objective: str
    draft: ModelInfo | None = None
    tokens_per_s: float | None = None
    tpot_ms_p50: float | None = None
    speedup: float | None = None
    repetitions: int = 1
    intervals: dict[str, Any] = field(default_factory=dict)
    per_concurrency: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    chosen_trial: int | None = None
    chosen_phase: str = "screening"
    measurements: tuple[TrialRow, ...] = ()
    draft_models: tuple[ModelInfo, ...] = ()

    def label(self) -> str:
        return self.method if self.method == "none" else f"{self.method}@{self.depth}"

    def estimate(self, name: str) -> Estimate | None:
        """The profile's figure ``name`` (tokens_per_s, tpot_ms_p50, speedup) with its 95 %
        interval; one run (n = 1, no interval) where none was stored; None when not measured.
        The baseline's speedup is exactly 1."""
        if name == "speedup" and self.method == "none" and self.speedup is not None:
            return Estimate(1.0, 1.0, 1.0, self.repetitions)
        if name in self.intervals:
            return Estimate.from_dict(self.intervals[name])
        value = getattr(self, name, None)
        return None if value is None else Estimate(float(value), None, None, 1)

    @property
    def confirmed(self) -> bool:
        """Its figures come from the confirmation phase (repeated, paired), not one screening pass."""
        return self.chosen_phase == "confirmation" or bool(self.details.get("confirmed"))

    @property
    def tied_with(self) -> list[str]:
        """The configurations the paired comparison could not separate from the fastest one at the
        profile's concurrency (itself included), as the tuner stored them; [] when none were."""
        return [str(label) for label in self.details.get("tied_with") or []]

    @property
    def tied_others(self) -> list[str]:
        """:attr:`tied_with` without the recommended configuration itself, which the tuner stored under
        its row's label (``draft:<name>@K`` for a draft other than the built-in one, where
        :meth:`label` says ``draft@K``)."""
        own = {self.label(), str(self.details.get("label", "")).rsplit(" c", 1)[0]}
        return [label for label in self.tied_with if label not in own]

    def chosen_measurement(self) -> TrialRow | None:
        """The trial the profile was taken from, among the loaded measurements."""
        if self.chosen_trial is None:
            return None
        return next((m for m in self.measurements if m.key == (self.chosen_phase, self.chosen_trial)), None)

    def summary(self) -> dict[str, Any]:
        """The one-line view used by listings (``profiles list --json``)."""
        return {
            "id": self.id,
            "created_at": utc_iso(self.created_at),
            "study": self.study.name,
            "hardware": self.hardware.name,
            "hardware_fingerprint": self.hardware.fingerprint,
            "model": self.target.name,
            "model_fingerprint": self.target.fingerprint,
            "method": self.method,
            "depth": self.depth,
            "draft": self.draft.name if self.draft else None,
            "concurrency": self.concurrency,
            "objective": self.objective,
            "tokens_per_s": self.tokens_per_s,
            "tpot_ms_p50": self.tpot_ms_p50,
            "speedup": self.speedup,
            "repetitions": self.repetitions,
            "confirmed": self.confirmed,
            "intervals": {name: dict(self.intervals[name]) for name in PROFILE_FIGURES if name in self.intervals},
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, nested; the JSON export and :meth:`from_dict` use this shape."""
        return {
            "id": self.id,
            "created_at": utc_iso(self.created_at),
            "method": self.method,
            "depth": self.depth,
            "concurrency": self.concurrency,
            "objective": self.objective,
            "tokens_per_s": self.tokens_per_s,
            "tpot_ms_p50": self.tpot_ms_p50,
            "speedup": self.speedup,
            "repetitions": self.repetitions,
            "intervals": {name: dict(value) for name, value in self.intervals.items()},
            "chosen_trial": self.chosen_trial,
            "chosen_phase": self.chosen_phase,
            "per_concurrency": [dict(row) for row in self.per_concurrency],
            "details": dict(self.details),
            "study": self.study.to_dict(),
            "hardware": self.hardware.to_dict(),
            "target": self.target.to_dict(),
            "draft": self.draft.to_dict() if self.draft else None,
            "draft_models": [m.to_dict() for m in self.draft_models],
            "measurements": [trial_document(m) for m in self.measurements],
        }

    @classmethod
    def from_dict(cls, data: Any) -> DeploymentProfile:
        """Inverse of :meth:`to_dict`; raises ConfigurationError naming the first bad or missing key.

        Documents written before phases and intervals existed lack ``repetitions``, ``intervals``
        and ``chosen_phase``: their figures read as one screening run (n = 1, no interval).
        """
        if isinstance(data, dict) and "chosen_phase" not in data and isinstance(data.get("details"), dict):
            data = {**data, "chosen_phase": data["details"].get("phase", "screening")}
        profile = _from_fields(cls, data, "profile", {
            "created_at": lambda v: parse_iso(v, "profile.created_at"),
            "repetitions": lambda v: _repetitions(v, "profile.repetitions"),
            "intervals": lambda v: _intervals(v, "profile.intervals"),
            "chosen_phase": lambda v: _phase(v, "profile.chosen_phase"),
            "study": StudyInfo.from_dict,
            "hardware": HardwareInfo.from_dict,
            "target": ModelInfo.from_dict,
            "draft": lambda v: None if v is None else ModelInfo.from_dict(v),
            "draft_models": lambda v: tuple(ModelInfo.from_dict(m) for m in _list(v, "draft_models")),
            "measurements": lambda v: tuple(trial_from_document(m) for m in _list(v, "measurements")),
            "per_concurrency": lambda v: [dict(row) for row in _list(v, "per_concurrency")],
        })
        profile.validate()
        return profile

    def validate(self) -> None:
        """ConfigurationError unless method, depth and concurrency form a runnable configuration."""
        if self.method not in METHODS:
            raise ConfigurationError(f"profile method {self.method!r} is not one of {', '.join(METHODS)}")
        if not isinstance(self.depth, int) or self.depth < 0 or (self.method != "none") != (self.depth > 0):
            raise ConfigurationError(
                f"profile depth {self.depth!r} does not fit method {self.method} (none: 0, others: >= 1)"
            )
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ConfigurationError(f"profile concurrency must be an integer >= 1, got {self.concurrency!r}")
        if self.method == "draft" and self.draft is None:
            raise ConfigurationError("a profile with method draft must name its draft model")

    def model_by_fingerprint(self, fingerprint: str | None) -> ModelInfo | None:
        """The draft model with ``fingerprint`` among the profile's drafts (None for None)."""
        if fingerprint is None:
            return None
        candidates = ([self.draft] if self.draft else []) + list(self.draft_models)
        return next((m for m in candidates if m.fingerprint == fingerprint), None)


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigurationError(f"profile {what} must be a JSON list, got {type(value).__name__}")
    return value
