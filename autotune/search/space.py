"""The search space, and the only code that asks Optuna for parameter values.

Optuna parameters (conditional, so no value is drawn that does not matter)::

    method          categorical: the applicable speculative methods (mtp, draft, ngram)
    draft           categorical: the draft labels                    only when method == draft
    <method>_depth  int in 1..max_depth                              one per method
    batch_size      categorical: the concurrency levels (OPTUNA_CONCURRENCY_KEY)

Method none is in the space but never sampled: it is measured at every concurrency as the
baseline, so drawing it could only repeat a baseline. Baseline trials are enqueued with the user
attribute ``autotune_baseline`` and have the single parameter ``batch_size``; they share it with
the sampled trials, so the sampler learns how throughput grows with the batch from them too.

Each speculative method has a depth parameter of its own, so TPE models "the best depth for MTP"
apart from "the best depth for a draft model" (they differ: a draft model's cost grows with depth,
MTP's hardly does).

**Beyond --max-depth.** The model-guided search may measure up to ``BEYOND_DEPTHS`` depths past
``max_depth`` where its prediction says they could win (:mod:`autotune.search.guide`). Such a
trial is enqueued with the user attribute ``autotune_beyond`` and its depth parameter is
suggested over ``1..MAX_DEPTH``; every other trial keeps ``1..max_depth``, and the space's record
(the study's identity, which a resumed study must match) is unchanged, so studies stored before
resume as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from autotune.engines.base import BUILTIN_DRAFT, MAX_DEPTH, METHODS, EngineConfig
from autotune.errors import ConfigurationError

BASELINE_METHOD = "none"
BASELINE_ATTR = "autotune_baseline"
BEYOND_ATTR = "autotune_beyond"
BEYOND_DEPTHS = 2  # how far past --max-depth the model-guided search may measure
# The Optuna parameter that holds a trial's concurrency. It keeps the name it had before the axis
# was called concurrency (issue 38): Optuna stores parameters by name in its own tables, and a study
# made before must resume with its trials and its sampler's history read back as they are.
OPTUNA_CONCURRENCY_KEY = "batch_size"


@dataclass(frozen=True)
class Candidate:
    """One point of the space: a configuration at a concurrency (``draft`` is a draft label)."""

    method: str
    depth: int
    concurrency: int
    draft: str | None = None

    @property
    def config_label(self) -> str:
        """``none``, ``mtp@2``, ``draft@3``, or ``draft:<label>@3`` for a draft other than the built-in."""
        if self.method == BASELINE_METHOD:
            return self.method
        name = self.method if self.draft in (None, BUILTIN_DRAFT) else f"{self.method}:{self.draft}"
        return f"{name}@{self.depth}"

    @property
    def label(self) -> str:
        return f"{self.config_label} c{self.concurrency}"

    def engine_config(self, draft_paths: Mapping[str, str]) -> EngineConfig:
        """The engine's configuration; ``draft_paths`` maps draft labels to what the engine loads."""
        draft = draft_paths[self.draft] if self.method == "draft" else None
        # Depth 0 of a speculative method is only ever the confirmation's off-state point (confirm.py).
        off_state = self.method != BASELINE_METHOD and self.depth == 0
        return EngineConfig(self.method, self.depth, draft, off_state=off_state)


@dataclass(frozen=True)
class SearchSpace:
    """Methods (baseline first), draft labels, depth range and concurrency levels of a study."""

    methods: tuple[str, ...]
    drafts: tuple[str, ...]
    max_depth: int
    concurrencies: tuple[int, ...]

    @classmethod
    def build(
        cls,
        methods: tuple[str, ...] | None,
        drafts: tuple[str, ...],
        max_depth: int,
        concurrencies: tuple[int, ...],
        target_has_mtp: bool,
    ) -> SearchSpace:
        """The space for these options; ``methods=None`` means every method this target supports."""
        if methods is None:
            methods = tuple(m for m in METHODS if (m != "mtp" or target_has_mtp) and (m != "draft" or drafts))
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            raise ConfigurationError(f"unknown method {unknown[0]!r}; choose from {', '.join(METHODS)}")
        if "mtp" in methods and not target_has_mtp:
            raise ConfigurationError("method mtp needs a target with MTP modules and this target has none; drop mtp")
        if "draft" in methods and not drafts:
            raise ConfigurationError("method draft needs at least one draft model; pass --draft builtin or a path")
        if not 1 <= max_depth <= MAX_DEPTH:
            raise ConfigurationError(f"max depth must be in 1..{MAX_DEPTH}, got {max_depth}")
        ordered = tuple(m for m in METHODS if m in methods or m == BASELINE_METHOD)
        return cls(ordered, tuple(drafts) if "draft" in ordered else (), max_depth, tuple(sorted(set(concurrencies))))

    # -- Optuna -----------------------------------------------------------------------------------

    @property
    def sampled_methods(self) -> tuple[str, ...]:
        """The methods a sampler chooses from (every method but the baseline)."""
        return tuple(m for m in self.methods if m != BASELINE_METHOD)

    def suggest(self, trial: optuna.Trial) -> Candidate:
        """Draw (or read back, for an enqueued trial) the trial's candidate."""
        if trial.user_attrs.get(BASELINE_ATTR):
            return Candidate(BASELINE_METHOD, 0, trial.suggest_categorical(OPTUNA_CONCURRENCY_KEY, self.concurrencies))
        method = trial.suggest_categorical("method", self.sampled_methods)
        draft = trial.suggest_categorical("draft", self.drafts) if method == "draft" else None
        depth = trial.suggest_int(f"{method}_depth", 1, MAX_DEPTH if trial.user_attrs.get(BEYOND_ATTR) else self.max_depth)
        concurrency = trial.suggest_categorical(OPTUNA_CONCURRENCY_KEY, self.concurrencies)
        return Candidate(method, depth, concurrency, draft)

    @staticmethod
    def params(candidate: Candidate) -> dict[str, Any]:
        """The Optuna parameters of ``candidate`` (for enqueueing it)."""
        if candidate.method == BASELINE_METHOD:
            return {OPTUNA_CONCURRENCY_KEY: candidate.concurrency}
        params: dict[str, Any] = {"method": candidate.method}
        if candidate.method == "draft":
            params["draft"] = candidate.draft
        params[f"{candidate.method}_depth"] = candidate.depth
        params[OPTUNA_CONCURRENCY_KEY] = candidate.concurrency
        return params

    def user_attrs(self, candidate: Candidate) -> dict[str, Any]:
        """The user attributes an enqueued ``candidate`` needs (the baseline mark, the mark of a depth
        beyond ``max_depth``)."""
        if candidate.method == BASELINE_METHOD:
            return {BASELINE_ATTR: True}
        return {BEYOND_ATTR: True} if candidate.depth > self.max_depth else {}

    @staticmethod
    def candidate_of(params: Mapping[str, Any]) -> Candidate:
        """Inverse of :meth:`params`."""
        method = params.get("method", BASELINE_METHOD)
        depth = 0 if method == BASELINE_METHOD else params[f"{method}_depth"]
        return Candidate(method, depth, params[OPTUNA_CONCURRENCY_KEY], params.get("draft"))

    # -- enumeration ------------------------------------------------------------------------------

    def beyond_depths(self) -> range:
        """The depths past ``max_depth`` the model-guided search may measure (none past MAX_DEPTH)."""
        return range(self.max_depth + 1, min(self.max_depth + BEYOND_DEPTHS, MAX_DEPTH) + 1)

    def beyond(self) -> list[Candidate]:
        """The points at :meth:`beyond_depths`: every proposer at every concurrency."""
        return [Candidate(method, depth, concurrency, draft) for method, draft in self.proposers()
                for depth in self.beyond_depths() for concurrency in self.concurrencies]

    def baselines(self) -> list[Candidate]:
        """Method none at every concurrency: what every trial's speedup is measured against."""
        return [Candidate(BASELINE_METHOD, 0, b) for b in self.concurrencies]

    def proposers(self) -> list[tuple[str, str | None]]:
        """(method, draft label) of every proposer: each sampled method, method draft once per draft."""
        return [(method, draft) for method in self.sampled_methods
                for draft in (self.drafts if method == "draft" else (None,))]

    def candidates(self) -> list[Candidate]:
        """Every point of the space, baselines first."""
        speculative = [
            Candidate(method, depth, concurrency, draft)
            for method, draft in self.proposers()
            for depth in range(1, self.max_depth + 1)
            for concurrency in self.concurrencies
        ]
        return self.baselines() + speculative

    def to_dict(self) -> dict[str, Any]:
        return {
            "methods": list(self.methods),
            "drafts": list(self.drafts),
            "max_depth": self.max_depth,
            "concurrencies": list(self.concurrencies),
        }
