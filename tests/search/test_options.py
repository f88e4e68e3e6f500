"""Options are validated before anything is probed, loaded or written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autotune.engines.embedded.network import ModelConfig
from autotune.errors import ConfigurationError
from autotune.search import Slo, TuneOptions, tune
from autotune.search.setup import set_up_study


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"methods": ("none", "medusa")}, "unknown method 'medusa'"),
        ({"drafts": ("/no/such/draft.safetensors",)}, "draft model file /no/such/draft.safetensors does not exist"),
        ({"target": "/no/such/target.safetensors"}, "target model file"),
        ({"max_depth": 0}, "max depth must be an integer in 1..16"),
        ({"confirm_seconds": -1.0}, "confirm seconds must be a number > 0"),
        ({"max_repetitions": 2}, "max repetitions must be an integer >= 3"),
        ({"precision": 2.0}, "precision must be a fraction in"),
        ({"max_depth": 17}, "max depth must be an integer in 1..16"),
        ({"concurrencies": (1, 0)}, "concurrency must be an integer >= 1"),
        ({"concurrencies": ()}, "at least one level"),
        ({"sampler": "cmaes"}, "unknown sampler 'cmaes'"),
        ({"seed": -1}, "seed must be"),
        ({"n_trials": 0}, "n_trials must be"),
        ({"timeout_s": 0}, "timeout must be"),
        ({"trial_timeout_s": -5}, "trial timeout must be"),
        ({"objective": "speed"}, "unknown objective"),
        ({"slo": Slo(tpot_ms=-1)}, "tpot_ms must be"),
        ({"engine": "sglang"}, "unknown engine 'sglang'"),
        ({"study_name": " "}, "study name must have"),
        ({"grace_period_s": 1}, "grace period must be"),
    ],
)
def test_bad_options_are_refused_before_anything_is_written(options, empty_sqlite_url, changes, message) -> None:
    bad = replace(options, db_url=empty_sqlite_url, **changes)
    with pytest.raises(ConfigurationError, match=message):
        tune(bad)
    assert not Path(empty_sqlite_url.removeprefix("sqlite:///")).exists()


def test_the_same_draft_twice_is_refused(options, models) -> None:
    with pytest.raises(ConfigurationError, match="listed twice"):
        TuneOptions(drafts=(models["draft"], models["draft"])).validate()


def test_a_draft_with_another_vocabulary_is_refused(options, tmp_path, random_model_file) -> None:
    other = random_model_file(ModelConfig(300, 16, 1, 2, 32, 96), tmp_path / "other.safetensors")
    with pytest.raises(ConfigurationError, match="vocabulary of 300 tokens"):
        set_up_study(replace(options, drafts=(other,)))


def test_fewer_trials_than_baselines_is_refused(options) -> None:
    with pytest.raises(ConfigurationError, match="below the 2 baseline trials"):
        set_up_study(replace(options, sampler="tpe", n_trials=1))
    # The model-guided search plans no baseline (it screens one only where it could lead).
    assert set_up_study(replace(options, sampler="model", n_trials=1)).planned() == []


def test_default_study_name_names_hardware_target_and_workload(options) -> None:
    setup = set_up_study(replace(options, study_name=None))
    assert setup.name == "c0ffee00-target-tiny"


def test_grid_defaults_to_every_point(options) -> None:
    setup = set_up_study(replace(options, sampler="grid", n_trials=None))
    assert setup.n_trials == len(setup.space.candidates()) == 2 + 3 * 2 * 2
    assert setup.planned()[:2] == setup.space.baselines()
    assert sorted(map(repr, setup.planned())) == sorted(map(repr, setup.space.candidates()))


def test_the_database_url_stays_out_of_the_options_repr() -> None:
    """TuneOptions in a log line or a traceback must not show a --db password."""
    assert "s3cretPW" not in repr(TuneOptions(db_url="postgresql://u:s3cretPW@host/db"))


def test_the_model_sampler_is_refused_for_an_engine_without_step_timings(options, monkeypatch) -> None:
    """An adapter that takes no step-cost timings gives the model-guided search no model, so it is
    refused there; vLLM takes them (synthetic acceptance) and is accepted (vLLM itself need not be
    installed: the engine check is stepped over)."""
    monkeypatch.setattr("autotune.engines.registry.check_engine", lambda _name: None)
    vllm = replace(options, engine="vllm", target="/tmp", drafts=(), sampler="model")
    vllm.validate()
    monkeypatch.setattr(type(vllm.engine_adapter), "times_steps", False)
    with pytest.raises(ConfigurationError, match="sampler model needs step-cost timings, which the vllm adapter"):
        vllm.validate()
