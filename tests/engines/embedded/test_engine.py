"""EmbeddedEngine: loading, measuring, typed errors (on the tiny trained models saved as files)."""

from __future__ import annotations

import json

import pytest
import torch

from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.embedded.builtin import save_model
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.embedded.network import CausalLM, ModelConfig
from autotune.errors import ConfigurationError, EngineError, UnsupportedConfigError
from autotune.measure import MeasureRequest, measure_configuration
from autotune.workload import Request, Workload


@pytest.fixture
def workload(text_workload) -> Workload:
    return text_workload


@pytest.fixture
def engine(tiny_model_files) -> EmbeddedEngine:
    return EmbeddedEngine(target=tiny_model_files["target"])


def test_measures_a_speculative_configuration(engine, tiny_model_files, workload):
    engine.load(EngineConfig("draft", 3, tiny_model_files["draft"]))
    m = engine.measure(workload, concurrency=2)
    assert (m.method, m.depth, m.concurrency, m.draft) == ("draft", 3, 2, tiny_model_files["draft"])
    assert m.n_requests == 5 and m.workload_sha256 == workload.sha256
    assert [len(o) for o in m.outputs] == [r.max_tokens for r in workload.requests]
    assert m.output_tokens == sum(r.max_tokens for r in workload.requests)
    # Five requests at 2 in flight: a steady window from the ramp-up to the 4th finish.
    assert m.steady and 0 < m.window_start_s < m.window_start_s + m.window_s <= m.wall_time_s
    assert m.occupancy == pytest.approx(1.0, abs=0.05)
    assert 0 < m.tokens_per_s * m.window_s < m.output_tokens
    assert m.requests_per_s == pytest.approx(m.window_requests / m.window_s)
    assert 0 < m.accepted_tokens <= m.drafted_tokens == 3 * m.sequence_steps
    assert m.acceptance_rate == pytest.approx(m.accepted_tokens / m.drafted_tokens)
    assert m.acceptance_length == pytest.approx(1 + m.accepted_tokens / m.sequence_steps)
    assert len(m.acceptance_by_position) == 3 and all(0 <= a <= 1 for a in m.acceptance_by_position)
    assert len(m.request_ttft_ms) == 5 and m.ttft_ms_p50 <= m.ttft_ms_p90 <= m.ttft_ms_p99
    assert m.tpot_ms_p50 > 0
    assert m.memory_kind == "cpu_weights_and_caches"
    weights = sum(p.nbytes for p in engine.target.parameters())
    assert m.peak_memory_bytes > weights


def test_greedy_speculation_matches_the_baseline_through_the_engine(engine, tiny_model_files, workload):
    engine.load(EngineConfig("none"))
    baseline = engine.measure(workload, concurrency=3)
    assert baseline.drafted_tokens == 0 and baseline.acceptance_rate is None and baseline.acceptance_length == 1
    for config in [EngineConfig("mtp", 3), EngineConfig("ngram", 4), EngineConfig("draft", 2, tiny_model_files["draft"])]:
        engine.load(config)
        assert engine.measure(workload, concurrency=3).outputs == baseline.outputs, config.label()


def test_target_is_loaded_once_and_each_draft_once(engine, tiny_model_files, workload):
    for config in [
        EngineConfig("none"),
        EngineConfig("mtp", 2),
        EngineConfig("draft", 2, tiny_model_files["draft"]),
        EngineConfig("ngram", 3),
        EngineConfig("draft", 5, tiny_model_files["draft"]),
    ]:
        engine.load(config)
        engine.measure(workload.head(1), concurrency=1)
    assert engine.loads == 2


def test_sampling_is_reproducible_per_seed(engine, workload):
    engine.load(EngineConfig("mtp", 2))
    first = engine.measure(workload, 2, temperature=1.0, seed=7)
    again = engine.measure(workload, 2, temperature=1.0, seed=7)
    other = engine.measure(workload, 2, temperature=1.0, seed=8)
    assert first.temperature == 1.0
    assert first.outputs == again.outputs
    assert first.outputs != other.outputs


def test_measurement_survives_json(engine, workload):
    engine.load(EngineConfig("ngram", 2))
    m = engine.measure(workload, 2)
    data = json.loads(json.dumps(m.to_dict()))
    assert "outputs" not in data
    restored = Measurement.from_dict(data)
    assert restored.outputs is None and restored.tokens_per_s == m.tokens_per_s
    assert Measurement.from_dict(m.to_dict(include_outputs=True)) == m


def test_logit_margin_is_positive_for_the_greedy_choice(engine, workload):
    engine.load(EngineConfig("none"))
    m = engine.measure(workload.head(1), 1)
    request, first = workload.requests[0], m.outputs[0][0]
    other = (first + 1) % engine.tokenizer.vocab_size
    assert engine.target_logit_margin(request, [], first, other) > 0


def test_measure_configuration_verifies_real_models(tiny_model_files, workload):
    report = measure_configuration(MeasureRequest(
        "draft", 3, concurrency=2, draft=tiny_model_files["draft"], workload=workload, verify=True,
        target=tiny_model_files["target"],
    ))
    assert report.outputs_match is True and report.first_divergence is None
    assert report.baseline.concurrency == 2 and report.baseline.outputs == report.measurement.outputs
    assert report.speedup.value > 0 and report.speedup.n >= 3  # paired, over at least 3 rounds


# -- errors -------------------------------------------------------------------------------------------


def test_mtp_on_a_target_without_mtp_modules_is_unsupported(tiny_model_files):
    engine = EmbeddedEngine(target=tiny_model_files["draft"])  # the draft has n_mtp = 0
    with pytest.raises(UnsupportedConfigError, match="MTP modules"):
        engine.load(EngineConfig("mtp", 2))


@pytest.mark.parametrize(
    ("concurrency", "temperature"), [(0, None), (-2, None), (1.5, None), (1, -0.1), (1, float("nan"))]
)
def test_bad_run_options_are_configuration_errors(engine, workload, concurrency, temperature):
    engine.load(EngineConfig("none"))
    with pytest.raises(ConfigurationError):
        engine.measure(workload, concurrency, temperature)


def test_invalid_config_is_rejected_by_load(engine):
    with pytest.raises(ConfigurationError, match="depth"):
        engine.load(EngineConfig("draft", 0))


def test_measure_before_load_is_an_engine_error(engine, workload):
    with pytest.raises(EngineError, match="load"):
        engine.measure(workload, 1)


def test_missing_model_file_is_an_engine_error(tmp_path, tiny_model_files):
    with pytest.raises(EngineError, match="does not exist"):
        EmbeddedEngine(target=tmp_path / "nope.safetensors").load(EngineConfig("none"))
    engine = EmbeddedEngine(target=tiny_model_files["target"])
    with pytest.raises(EngineError, match="does not exist"):
        engine.load(EngineConfig("draft", 2, str(tmp_path / "missing-draft.safetensors")))


def test_draft_with_another_vocabulary_is_unsupported(tmp_path, tiny_model_files):
    path = tmp_path / "other-vocab.safetensors"
    save_model(CausalLM(ModelConfig(vocab_size=100, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=64)), path)
    with pytest.raises(UnsupportedConfigError, match="vocabulary"):
        EmbeddedEngine(target=tiny_model_files["target"]).load(EngineConfig("draft", 2, str(path)))


def test_request_longer_than_the_model_context_is_unsupported(engine):
    engine.load(EngineConfig("mtp", 4))
    too_long = Workload("long", [Request("def f():", 400)])  # the tiny target handles 320 positions
    with pytest.raises(UnsupportedConfigError, match="positions"):
        engine.measure(too_long, 1)


def test_unknown_device_and_dtype_are_configuration_errors():
    with pytest.raises(ConfigurationError, match="device"):
        EmbeddedEngine(device="tpu")
    with pytest.raises(ConfigurationError, match="dtype"):
        EmbeddedEngine(dtype="float8")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where CUDA is missing")
def test_cuda_without_a_gpu_is_an_engine_error():
    with pytest.raises(EngineError, match="CUDA"):
        EmbeddedEngine(device="cuda")
