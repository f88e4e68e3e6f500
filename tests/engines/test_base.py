"""Engine configuration validation and Measurement helpers."""

import pytest

from autotune.analysis.steady import latency_percentiles
from autotune.engines.base import MAX_DEPTH, EngineConfig, Measurement, validate_run_options
from autotune.errors import ConfigurationError


@pytest.mark.parametrize(
    "config",
    [EngineConfig("none"), EngineConfig("mtp", 1), EngineConfig("draft", MAX_DEPTH), EngineConfig("draft", 3, "d.safetensors"), EngineConfig("ngram", 5)],
)
def test_valid_configs_pass(config):
    config.validate()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (EngineConfig("eagle", 2), "unknown method"),
        (EngineConfig("draft", 0), "depth >= 1"),
        (EngineConfig("ngram", -1), "depth >= 1"),
        (EngineConfig("none", 2), "depth must be 0"),
        (EngineConfig("mtp", 2, "d.safetensors"), "only used by method draft"),
        (EngineConfig("none", 0, "builtin"), "only used by method draft"),
        (EngineConfig("draft", MAX_DEPTH + 1), "maximum"),
        (EngineConfig("draft", 2.5), "integer"),
    ],
)
def test_invalid_configs_are_configuration_errors(config, message):
    with pytest.raises(ConfigurationError, match=message):
        config.validate()


def test_draft_defaults_to_the_builtin_model_for_method_draft_only():
    assert EngineConfig("draft", 2).draft_model == "builtin"
    assert EngineConfig("draft", 2, "d.safetensors").draft_model == "d.safetensors"
    assert EngineConfig("mtp", 2).draft_model is None


def test_labels():
    assert EngineConfig("none").label() == "none"
    assert EngineConfig("mtp", 3).label() == "mtp@3"


@pytest.mark.parametrize(("concurrency", "temperature"), [(0, None), (True, None), ("2", None), (1, -1), (1, "0.5"), (1, float("inf"))])
def test_run_options_are_validated(concurrency, temperature):
    with pytest.raises(ConfigurationError):
        validate_run_options(concurrency, temperature)


def test_latency_percentiles_interpolate_and_skip_missing_values():
    assert latency_percentiles([4.0, 1.0, None, 3.0, 2.0]) == (2.5, 3.7, pytest.approx(3.97))
    assert latency_percentiles([None]) == (None, None, None)


def test_from_dict_rejects_unknown_fields():
    with pytest.raises(ValueError, match="unknown"):
        Measurement.from_dict({"method": "none", "flux_capacitor": 1})
