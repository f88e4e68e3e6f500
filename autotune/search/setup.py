"""Everything a study needs that can be worked out before writing anything: the hardware profile,
the workload, the models (fingerprints and footprints), the memory budget, the search space, the
study name and the identity a resumed study must match."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from autotune.engines.embedded.footprint import cache_positions
from autotune.engines.registry import engine_adapter
from autotune.engines.worker import EngineSpec
from autotune.errors import ConfigurationError
from autotune.models.kind import speculative_kind_of
from autotune.search.artifacts import ModelArtifact, StudyModels, embedded_models, folder_models
from autotune.search.memory import MemoryBudget, default_concurrencies, memory_budget
from autotune.search.objective import Objective
from autotune.search.options import TuneOptions
from autotune.search.samplers import Sampler
from autotune.search.space import BASELINE_METHOD, Candidate, SearchSpace
from autotune.workload import Workload, load_workload


@dataclass(frozen=True)
class StudySetup:
    name: str
    engine: str
    hardware: Any  # HardwareProfile (typed loosely: the hardware package imports torch)
    workload: Workload
    target: ModelArtifact
    drafts: dict[str, ModelArtifact]  # by label
    excluded_drafts: dict[str, str]  # label -> why the preflight left it out (TensorRT-LLM)
    memory: MemoryBudget
    space: SearchSpace
    objective: Objective
    n_trials: int
    sampler: Sampler
    seed: int | None

    @property
    def engine_spec(self) -> EngineSpec:
        """How the tuner's worker builds the engine, for every concurrency of the study on this hardware."""
        device = "cuda" if self.hardware.device_type == "cuda" else "cpu"
        adapter = engine_adapter(self.engine)
        folders = tuple(model.folder for model in (self.target, *self.drafts.values()) if model.folder is not None)
        return adapter.study_spec(self.target.engine_arg, max_batch_size=max(self.space.concurrencies), device=device,
                                  models=folders)  # read once, by the preflight

    @property
    def draft_engine_args(self) -> dict[str, str]:
        return {label: draft.engine_arg for label, draft in self.drafts.items()}

    def off_floor(self, candidate: Candidate) -> int:
        """The smallest draft length the study's engine serves ``candidate``'s speculative kind at
        where none leads (its adapter's ``off_rule``: 1 for TensorRT-LLM's one-model MTP / EAGLE-3);
        0 for an engine that serves nothing."""
        rule = engine_adapter(self.engine).off_rule
        if rule is None:
            return 0
        draft = self.drafts.get(candidate.draft) if candidate.method == "draft" else None
        return rule.floor(speculative_kind_of(candidate.method, draft.folder.config if draft and draft.folder else None))

    def zero_to_measure(self, candidate: Candidate) -> bool:
        """Whether the study's engine serves ``candidate``'s kind at K = 0 where none leads and that
        K = 0 must be measured to be written (its adapter's ``off_rule``: vLLM, whose drafter still
        runs at K = 0)."""
        rule = engine_adapter(self.engine).off_rule
        return rule is not None and rule.zero_needs_measurement and self.off_floor(candidate) == 0

    def depth_refusal(self, method: str, depth: int) -> str | None:
        """Why the study's engine refuses ``method`` at ``depth`` for its target, known before any
        build (:meth:`EngineAdapter.depth_refusal`), or None."""
        return engine_adapter(self.engine).depth_refusal(method, depth, self.target.folder)

    def infeasibility(self, candidate: Candidate) -> str | None:
        """Why ``candidate`` cannot run here, or None: a depth its engine refuses for the target
        (known before building, :meth:`EngineAdapter.depth_refusal`), or memory."""
        return self.depth_refusal(candidate.method, candidate.depth) or self.memory.infeasibility(
            candidate.method, candidate.depth, candidate.concurrency, candidate.draft)

    @property
    def planned_only(self) -> bool:
        """True when the study runs planned candidates only: an exhaustive sampler, or nothing to sample."""
        return self.sampler.exhaustive or not self.space.sampled_methods

    def planned(self) -> list[Candidate]:
        """Candidates the study runs before (an exhaustive sampler: instead of) sampling: baselines first."""
        return self.sampler.planned(self.space, self.seed)

    def identity(self) -> dict[str, Any]:
        """What a study of this name must have been created with to be continued by this run."""
        return {
            "engine": self.engine,
            "hardware": self.hardware.fingerprint,
            "target": self.target.fingerprint,
            "workload": self.workload.sha256,
            "objective": self.objective.kind,
            "slo": self.objective.slo.to_dict(),
            "search_space": self.search_space_record(),
        }

    def search_space_record(self) -> dict[str, Any]:
        """The space as stored with the study: drafts by label and content fingerprint."""
        record = self.space.to_dict()
        record["drafts"] = [{"label": label, "fingerprint": self.drafts[label].fingerprint} for label in self.space.drafts]
        if self.excluded_drafts:
            record["excluded_drafts"] = dict(sorted(self.excluded_drafts.items()))
        return record

    @property
    def identity_digest(self) -> str:
        return _digest(self.identity())

    @property
    def identity_digests(self) -> tuple[str, str]:
        """:attr:`identity_digest`, and the digest the same study was given before issue 38 named the
        space's ``batch_sizes`` ``concurrencies``: an Optuna study made then carries that one."""
        identity = self.identity()
        legacy = {("batch_sizes" if k == "concurrencies" else k): v for k, v in identity["search_space"].items()}
        return _digest(identity), _digest({**identity, "search_space": legacy})


def _digest(identity: dict[str, Any]) -> str:
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def set_up_study(options: TuneOptions) -> StudySetup:
    """Validate ``options`` and work out the study (probing the hardware unless given)."""
    options.validate()
    workload = load_workload(options.workload)
    if options.folder_engine:
        hardware = _hardware(options)
        drafts = options.model_drafts if _wants_drafts(options) else ()
        models = folder_models(options, drafts, hardware, cache_positions(workload, 0))
    else:
        models = embedded_models(options.target, options.drafts, _wants_drafts(options))
        hardware = _hardware(options)
    target = models.target
    memory = memory_budget(hardware.memory_total_bytes, target.footprint,
                         {label: draft.footprint for label, draft in models.drafts.items()}, workload,
                         whole_prompt_logits=not options.folder_engine)
    if options.concurrencies:
        memory.require_baseline_fits(options.concurrencies, "--concurrency")
    concurrencies = options.concurrencies or default_concurrencies(memory, hardware.device_type)
    space = SearchSpace.build(_methods(options, models), tuple(models.drafts), options.max_depth, concurrencies,
                              target.footprint.n_mtp > 0)
    sampler = options.search_sampler
    n_trials = options.n_trials or sampler.default_trials(space)
    if n_trials < sum(1 for c in sampler.planned(space, options.seed) if c.method == BASELINE_METHOD):
        raise ConfigurationError(
            f"n_trials {n_trials} is below the {len(space.concurrencies)} baseline trials (method none at concurrency levels "
            f"{', '.join(map(str, space.concurrencies))}); raise --trials or pass fewer --concurrency"
        )
    name = options.study_name or f"{hardware.fingerprint[:8]}-{target.name}-{workload.label}"
    return StudySetup(
        name=name.strip(), engine=options.engine, hardware=hardware, workload=workload, target=target,
        drafts={label: models.drafts[label] for label in space.drafts}, excluded_drafts=models.excluded_drafts,
        memory=memory, space=space, objective=options.objective_spec, n_trials=n_trials, sampler=sampler,
        seed=options.seed,
    )


def _wants_drafts(options: TuneOptions) -> bool:
    return options.methods is None or "draft" in options.methods


def _methods(options: TuneOptions, models: StudyModels) -> tuple[str, ...] | None:
    """The methods to search: as asked, except that when the preflight left out every draft the
    user gave, method draft is dropped rather than failing the study (the reasons are recorded)."""
    if options.methods is None or models.drafts or not models.excluded_drafts:
        return options.methods
    kept = tuple(m for m in options.methods if m != "draft")
    if not kept:
        raise ConfigurationError("every draft failed the preflight: " + "; ".join(
            f"{label}: {reason}" for label, reason in models.excluded_drafts.items()))
    return kept


def _hardware(options: TuneOptions) -> Any:
    """The given hardware profile, or a quick probe; an engine that needs CUDA needs a GPU in it."""
    if options.hardware is not None:
        hardware = options.hardware
    else:
        from autotune.hardware import probe_hardware

        hardware = probe_hardware(quick=True)
    if engine_adapter(options.engine).needs_cuda and hardware.device_type != "cuda":
        raise ConfigurationError(f"--engine {options.engine} needs an NVIDIA GPU, and this machine has none; "
                                 "tune with the embedded engine here")
    return hardware
