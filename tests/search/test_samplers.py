"""The samplers behind --sampler: one interface, looked up by name."""

from __future__ import annotations

import optuna
import pytest

from autotune.errors import ConfigurationError
from autotune.search.samplers import DEFAULT_N_TRIALS, SAMPLERS, get_sampler
from autotune.search.space import SearchSpace


def test_the_registry_lists_the_cli_names_in_order() -> None:
    assert list(SAMPLERS) == ["model", "tpe", "random", "grid"]


def test_only_tpe_lets_optuna_model_the_space() -> None:
    assert isinstance(SAMPLERS["tpe"].optuna_sampler(0), optuna.samplers.TPESampler)
    for name in ("model", "random", "grid"):  # model and grid enqueue every trial: the sampler never runs
        assert isinstance(SAMPLERS[name].optuna_sampler(0), optuna.samplers.RandomSampler)


def test_the_grid_plans_every_point_tpe_and_random_the_baselines_and_the_guide_nothing() -> None:
    space = SearchSpace.build(("ngram",), (), 2, (1, 2), False)
    grid = SAMPLERS["grid"].planned(space, seed=3)
    assert sorted(map(str, grid)) == sorted(map(str, space.candidates())) and grid[:2] == space.baselines()
    assert SAMPLERS["grid"].default_trials(space) == len(space.candidates())
    for name in ("tpe", "random"):
        assert SAMPLERS[name].planned(space, seed=3) == space.baselines()
    # The guide screens a baseline only where it could lead (guide.py, step 1); with nothing to search
    # but the baselines, it plans them.
    assert SAMPLERS["model"].planned(space, seed=3) == []
    assert SAMPLERS["model"].planned(SearchSpace.build((), (), 2, (1, 2), False), seed=3) == space.baselines()
    for name in ("model", "tpe", "random"):
        assert SAMPLERS[name].default_trials(space) == DEFAULT_N_TRIALS


def test_only_the_model_sampler_is_guided() -> None:
    assert [name for name, sampler in SAMPLERS.items() if sampler.guided] == ["model"]


@pytest.mark.parametrize(("name", "message"), [("gp", "sampler gp was removed"), ("cmaes", "unknown sampler 'cmaes'")])
def test_removed_and_unknown_samplers_are_refused(name: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        get_sampler(name)
