"""Everything a study needs that can be worked out before writing anything: the hardware profile,
the workload, the models (fingerprints and footprints), the memory plan, the search space, the
study name and the identity a resumed study must match."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.engines.base import BUILTIN_DRAFT
from autotune.engines.embedded.builtin import BUILTIN_DRAFT_NAME, BUILTIN_TARGET_NAME, model_fingerprint
from autotune.engines.embedded.footprint import (
    ModelFootprint,
    cache_positions,
    longest_prompt_tokens,
    model_path,
    read_footprint,
)
from autotune.engines.worker import EngineSpec
from autotune.errors import ConfigurationError
from autotune.search.memory import MemoryPlan, default_batch_sizes
from autotune.search.objective import Objective
from autotune.search.options import DEFAULT_N_TRIALS, TuneOptions
from autotune.search.space import Candidate, SearchSpace
from autotune.workload import Workload, load_workload

ENGINE_FACTORIES = {"embedded": "autotune.engines.embedded.engine:EmbeddedEngine"}


@dataclass(frozen=True)
class ModelArtifact:
    """A target or draft model: ``label`` names it in the search space (``builtin`` or the file's
    stem), ``engine_arg`` is what the engine is given to load it."""

    role: str
    label: str
    name: str
    source: str
    engine_arg: str | None
    fingerprint: str
    footprint: ModelFootprint

    def record_fields(self) -> dict[str, Any]:
        """The columns of its model-artifact row."""
        return {
            "fingerprint": self.fingerprint, "name": self.name, "role": self.role, "source": self.source,
            "num_params": self.footprint.n_params, "num_mtp_modules": self.footprint.n_mtp,
            "vocab_size": self.footprint.vocab_size, "config": self.footprint.config,
        }


@dataclass(frozen=True)
class StudyPlan:
    name: str
    engine: str
    hardware: Any  # HardwareProfile (typed loosely: the hardware package imports torch)
    workload: Workload
    target: ModelArtifact
    drafts: dict[str, ModelArtifact]  # by label
    memory: MemoryPlan
    space: SearchSpace
    objective: Objective
    n_trials: int
    exhaustive: bool  # grid: try every candidate once, in a seeded order, then stop
    seed: int | None

    @property
    def engine_spec(self) -> EngineSpec:
        device = "cuda" if self.hardware.device_type == "cuda" else "cpu"
        return EngineSpec(ENGINE_FACTORIES[self.engine], {"target": self.target.engine_arg, "device": device})

    @property
    def draft_engine_args(self) -> dict[str, str]:
        return {label: draft.engine_arg for label, draft in self.drafts.items()}

    def infeasibility(self, candidate: Candidate) -> str | None:
        """Why ``candidate`` cannot run on this hardware, or None."""
        return self.memory.infeasibility(candidate.method, candidate.depth, candidate.batch_size, candidate.draft)

    @property
    def planned_only(self) -> bool:
        """True when the study runs planned candidates only: the grid, or nothing to sample."""
        return self.exhaustive or not self.space.sampled_methods

    def planned(self) -> list[Candidate]:
        """Candidates the study runs before (grid: instead of) sampling: baselines first."""
        if not self.exhaustive:
            return self.space.baselines()
        rest = self.space.candidates()[len(self.space.batch_sizes):]
        random.Random(self.seed).shuffle(rest)
        return self.space.baselines() + rest

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
        return record

    @property
    def identity_digest(self) -> str:
        canonical = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def plan_study(options: TuneOptions) -> StudyPlan:
    """Validate ``options`` and work out the study (probing the hardware unless given)."""
    options.validate()
    workload = load_workload(options.workload)
    target = _artifact("target", options.target)
    drafts = _drafts(options, target)
    hardware = options.hardware if options.hardware is not None else _probe()
    memory = MemoryPlan(
        device_bytes=hardware.memory_total_bytes,
        target=target.footprint,
        drafts={label: draft.footprint for label, draft in drafts.items()},
        sequence_positions=cache_positions(workload, 0),
        prompt_tokens=longest_prompt_tokens(workload),
    )
    batch_sizes = options.batch_sizes or default_batch_sizes(memory, hardware.device_type, len(workload.requests))
    space = SearchSpace.build(options.methods, tuple(drafts), options.max_depth, batch_sizes, target.footprint.n_mtp > 0)
    exhaustive = options.sampler == "grid"
    n_trials = options.n_trials or (len(space.candidates()) if exhaustive else DEFAULT_N_TRIALS)
    if n_trials < len(space.batch_sizes):
        raise ConfigurationError(
            f"n_trials {n_trials} is below the {len(space.batch_sizes)} baseline trials (method none at batch sizes "
            f"{', '.join(map(str, space.batch_sizes))}); raise --n-trials or pass fewer --batch-sizes"
        )
    name = options.study_name or f"{hardware.fingerprint[:8]}-{target.name}-{workload.label}"
    return StudyPlan(
        name=name.strip(), engine=options.engine, hardware=hardware, workload=workload, target=target,
        drafts={label: drafts[label] for label in space.drafts}, memory=memory, space=space,
        objective=options.objective_spec, n_trials=n_trials, exhaustive=exhaustive, seed=options.seed,
    )


def _artifact(role: str, given: str | None) -> ModelArtifact:
    builtin = given is None or (role == "draft" and given == BUILTIN_DRAFT)
    path = model_path(given, role)
    if builtin:
        name = BUILTIN_TARGET_NAME if role == "target" else BUILTIN_DRAFT_NAME
        label, source = BUILTIN_DRAFT if role == "draft" else name, f"builtin:{name}"
    else:
        name = label = Path(given).stem
        source = str(Path(given).resolve())
    engine_arg = (None if role == "target" else BUILTIN_DRAFT) if builtin else source
    return ModelArtifact(role, label, name, source, engine_arg, model_fingerprint(path), read_footprint(path))


def _drafts(options: TuneOptions, target: ModelArtifact) -> dict[str, ModelArtifact]:
    if options.methods is not None and "draft" not in options.methods:
        return {}
    drafts: dict[str, ModelArtifact] = {}
    for given in options.drafts:
        draft = _artifact("draft", given)
        if draft.label in drafts:
            raise ConfigurationError(f"two drafts are named {draft.label!r} (file stem); rename one of them")
        if draft.footprint.vocab_size != target.footprint.vocab_size:
            raise ConfigurationError(
                f"draft {draft.label} has a vocabulary of {draft.footprint.vocab_size} tokens and the target "
                f"{target.footprint.vocab_size}; a draft must share the target's tokenizer"
            )
        drafts[draft.label] = draft
    return drafts


def _probe() -> Any:
    from autotune.hardware import probe_hardware

    return probe_hardware(quick=True)
