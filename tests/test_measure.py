"""measure_configuration: defaults, validation before loading, verification against the baseline."""

from __future__ import annotations

import json

import pytest

from autotune.engines.base import EngineConfig, Measurement
from autotune.errors import ConfigurationError
from autotune.measure import DEFAULT_DEPTH, DEFAULT_METHOD, Divergence, first_divergence, measure_configuration
from autotune.workload import Request, Workload, builtin_workload


def fake_measurement(config: EngineConfig, batch_size: int, outputs: list[list[int]], tokens_per_s: float) -> Measurement:
    return Measurement(
        method=config.method, depth=config.depth, batch_size=batch_size, draft=config.draft_model, temperature=None,
        seed=0, device="cpu", workload_name="w", workload_sha256="0", n_requests=len(outputs),
        output_tokens=sum(map(len, outputs)), wall_time_s=1.0, tokens_per_s=tokens_per_s, requests_per_s=1.0,
        ttft_ms_p50=1.0, ttft_ms_p90=1.0, ttft_ms_p99=1.0, tpot_ms_p50=1.0, tpot_ms_p90=1.0, tpot_ms_p99=1.0,
        drafted_tokens=0, accepted_tokens=0, acceptance_rate=None, acceptance_alpha=None, acceptance_length=1.0, acceptance_by_position=[],
        target_passes=1, sequence_steps=1, propose_time_s=0.0, verify_time_s=0.0, prefill_time_s=0.0,
        peak_memory_bytes=1, memory_kind="cpu_weights_and_caches", outputs=outputs,
    )


class FakeEngine:
    """Returns canned outputs per method; records what it was asked."""

    name = "fake"

    def __init__(self, outputs: dict[str, list[list[int]]]):
        self.outputs = outputs
        self.loads = 0
        self.calls: list[tuple[EngineConfig, int, Workload]] = []
        self.margin_args = None

    def load(self, config: EngineConfig) -> None:
        self.config = config

    def measure(self, workload, batch_size, temperature=None, seed=0):
        self.calls.append((self.config, batch_size, workload))
        speed = 10.0 if self.config.method == "none" else 15.0
        return fake_measurement(self.config, batch_size, self.outputs[self.config.method], speed)

    def target_logit_margin(self, request, generated, expected, got):
        self.margin_args = (request, generated, expected, got)
        return 0.25

    def close(self) -> None:
        pass


def test_defaults_measure_the_builtin_draft_on_the_builtin_workload():
    engine = FakeEngine({DEFAULT_METHOD: [[1]]})
    report = measure_configuration(engine=engine)
    config, batch_size, workload = engine.calls[0]
    assert config == EngineConfig(DEFAULT_METHOD, DEFAULT_DEPTH) and config.draft_model == "builtin"
    assert batch_size == 1 and workload == builtin_workload()
    assert report.baseline is None and report.outputs_match is None and report.speedup is None


def test_verify_runs_the_baseline_on_the_same_prompts_and_batch_size():
    engine = FakeEngine({"mtp": [[1, 2], [3]], "none": [[1, 2], [3]]})
    report = measure_configuration("mtp", 2, batch_size=4, verify=True, engine=engine)
    (spec, spec_batch, spec_workload), (base, base_batch, base_workload) = engine.calls
    assert base == EngineConfig("none") and base_batch == spec_batch == 4 and base_workload == spec_workload
    assert report.outputs_match is True and report.first_divergence is None
    assert report.speedup == pytest.approx(1.5)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["config"] == {"method": "mtp", "depth": 2, "draft": None}
    assert data["baseline"]["method"] == "none" and data["speedup"] == pytest.approx(1.5)


def test_verify_reports_the_first_divergence_with_its_logit_margin():
    workload = Workload("w", [Request("a", 3), Request("b", 3)])
    engine = FakeEngine({"ngram": [[1, 2, 3], [4, 9, 6]], "none": [[1, 2, 3], [4, 5, 6]]})
    report = measure_configuration("ngram", 2, workload=workload, verify=True, engine=engine)
    assert report.outputs_match is False
    assert report.first_divergence == Divergence(1, 1, 5, 9, 0.25)
    assert engine.margin_args == (Request("b", 3), [4], 5, 9)
    assert report.to_dict()["first_divergence"]["logit_margin"] == 0.25


def test_first_divergence():
    assert first_divergence([[1, 2], [3]], [[1, 2], [3]]) is None
    assert first_divergence([[1, 2], [3]], [[1, 2], [4]]) == Divergence(1, 0, 3, 4)
    assert first_divergence([[1, 2, 3]], [[1, 2]]) == Divergence(0, 2, 3, None)
    with pytest.raises(ValueError):
        first_divergence([[1]], [])


@pytest.mark.parametrize(
    "options",
    [
        {"method": "draft", "depth": 0},
        {"method": "mtp", "draft": "d.safetensors"},
        {"method": "eagle"},
        {"method": "none", "depth": 2},
        {"batch_size": 0},
        {"temperature": -0.5},
        {"verify": True, "temperature": 0.7},
    ],
)
def test_invalid_options_fail_before_anything_is_loaded(tmp_path, options):
    # A missing target would raise EngineError on load: ConfigurationError proves we never got there.
    with pytest.raises(ConfigurationError):
        measure_configuration(target=tmp_path / "missing.safetensors", **options)


def test_verify_refuses_a_workload_that_samples(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "a", "temperature": 0.8}\n')
    with pytest.raises(ConfigurationError, match="greedy"):
        measure_configuration(workload=path, verify=True, target=tmp_path / "missing.safetensors")
    # An explicit temperature 0 overrides the requests' own: verification is possible again.
    engine = FakeEngine({"draft": [[1]], "none": [[1]]})
    assert measure_configuration(workload=path, verify=True, temperature=0, engine=engine).outputs_match

