"""The search samplers behind ``--sampler``: one interface, a registry by name.

A sampler decides how a study picks its screening trials. ``model`` asks the performance model's
guide (:mod:`autotune.search.guide`) for every point; ``grid`` plans every point of the space; in
both every trial is enqueued, so Optuna's own sampler never runs. ``tpe`` and ``random`` leave the
points after the baselines to Optuna's TPE and random samplers.
"""

from __future__ import annotations

import random
from typing import ClassVar

import optuna

from autotune.errors import ConfigurationError
from autotune.search.space import Candidate, SearchSpace

# A third of the 100-point default space: with the built-in models and workload, the screening and
# the confirmation of a plain `autotune tune` fit in 10 minutes on a 2-core CPU.
DEFAULT_N_TRIALS = 36
TPE_STARTUP_TRIALS = 10
# Names refused with the reason. Optuna's GPSampler models only the parameters every trial shares;
# in this space (baselines have no depth, each method has its own depth parameter) that is
# concurrency alone, so it would draw method and depth at random while claiming to model them.
REMOVED_SAMPLERS = {"gp": "it modelled concurrency only and drew method and depth at random in this space"}


class Sampler:
    """How a study proposes its screening trials (the defaults: Optuna samples after the baselines)."""

    name: ClassVar[str]
    # Proposals come from the performance model's guide, which needs the engine's step-cost timings.
    guided: ClassVar[bool] = False
    # Every point is planned: the study runs them all once, then stops.
    exhaustive: ClassVar[bool] = False

    def optuna_sampler(self, seed: int | None) -> optuna.samplers.BaseSampler:
        """The Optuna sampler the study is opened with. Where every trial is enqueued it never
        runs, so it is the cheapest one."""
        return optuna.samplers.RandomSampler(seed=seed)

    def default_trials(self, space: SearchSpace) -> int:
        """The study-wide number of trials when ``--trials`` is not given."""
        return DEFAULT_N_TRIALS

    def planned(self, space: SearchSpace, seed: int | None) -> list[Candidate]:
        """Candidates the study runs before sampling (the baselines: every speedup needs one)."""
        return space.baselines()


class ModelGuidedSampler(Sampler):
    """Calibrate a performance model, then measure only what it cannot rule out."""

    name = "model"
    guided = True

    def planned(self, space: SearchSpace, seed: int | None) -> list[Candidate]:
        """Nothing, where there is speculation to search: the baselines are points of the guide like any
        other, screened only when they could lead a concurrency (:mod:`autotune.search.guide`). A screened
        baseline serves as an incumbent only, and the objective is tokens/s, not speedup; every speedup
        comes from the confirmation, which measures each concurrency's baseline paired with its finalists,
        so a baseline pass the guide can rule out is a configuration (and an engine build) saved."""
        return [] if space.sampled_methods else space.baselines()


class TpeSampler(Sampler):
    """Optuna's tree-structured Parzen estimator, after a few random startup trials."""

    name = "tpe"

    def optuna_sampler(self, seed: int | None) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=TPE_STARTUP_TRIALS)


class RandomSearchSampler(Sampler):
    """Optuna's random sampler."""

    name = "random"


class GridSampler(Sampler):
    """Every configuration once."""

    name = "grid"
    exhaustive = True

    def default_trials(self, space: SearchSpace) -> int:
        return len(space.candidates())

    def planned(self, space: SearchSpace, seed: int | None) -> list[Candidate]:
        # Configurations in a seeded order, each at every concurrency before the next: the worker keeps
        # a configuration's engine loaded while consecutive trials use it, so the grid loads each once.
        rest = space.candidates()[len(space.concurrencies):]
        configs = list(dict.fromkeys(c.config_label for c in rest))
        random.Random(seed).shuffle(configs)
        order = {label: i for i, label in enumerate(configs)}
        return space.baselines() + sorted(rest, key=lambda c: (order[c.config_label], c.concurrency))


SAMPLERS: dict[str, Sampler] = {
    sampler.name: sampler for sampler in (ModelGuidedSampler(), TpeSampler(), RandomSearchSampler(), GridSampler())
}


def get_sampler(name: str) -> Sampler:
    """The sampler called ``name``; ConfigurationError for a removed or unknown one."""
    if name in REMOVED_SAMPLERS:
        raise ConfigurationError(f"sampler {name} was removed ({REMOVED_SAMPLERS[name]}); "
                                 "use model (the default) or tpe")
    if name not in SAMPLERS:
        raise ConfigurationError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}")
    return SAMPLERS[name]
