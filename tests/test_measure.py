"""measure_configuration: defaults, validation before loading, the protocol's rounds with the
baseline, verification against the baseline, and the real embedded engine end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.analysis.intervals import Estimate
from autotune.analysis.steady import request_stream
from autotune.engines import noise
from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.protocol import BASELINE, ProtocolOptions
from autotune.errors import ConfigurationError
from autotune.measure import (
    DEFAULT_DEPTH,
    DEFAULT_METHOD,
    Divergence,
    MeasureRequest,
    first_divergence,
    measure_configuration,
)
from autotune.workload import Request, Workload, builtin_workload, load_workload

TINY = Path(__file__).parent / "data" / "tiny.jsonl"
SMALL = load_workload(TINY).head(1).with_max_tokens(8)  # one short request: a pass takes a fraction of a second
QUICK = ProtocolOptions(min_repetitions=3, max_repetitions=3)


def fake_measurement(config: EngineConfig, concurrency: int, outputs: list[list[int]], tokens_per_s: float) -> Measurement:
    speculative = config.method != "none"
    return Measurement(
        method=config.method, depth=config.depth, concurrency=concurrency, draft=config.draft_model, temperature=None,
        seed=0, device="cpu", workload_name="w", workload_sha256="0", n_requests=len(outputs),
        output_tokens=sum(map(len, outputs)), wall_time_s=1.0, tokens_per_s=tokens_per_s, requests_per_s=1.0,
        ttft_ms_p50=1.0, ttft_ms_p90=1.0, ttft_ms_p99=1.0, tpot_ms_p50=1.0, tpot_ms_p90=1.0, tpot_ms_p99=1.0,
        drafted_tokens=0, accepted_tokens=0, acceptance_rate=None, acceptance_alpha=None,
        # 15 vs 10 tokens/s needs more than one token per target pass to be plausible
        acceptance_length=2.0 if speculative else 1.0, acceptance_by_position=[],
        target_passes=1, sequence_steps=1, propose_time_s=0.0, verify_time_s=0.0, prefill_time_s=0.0,
        peak_memory_bytes=1, memory_kind="cpu_weights_and_caches", outputs=outputs,
    )


class FakeEngine:
    """Returns canned outputs per method (10 tokens/s for none, 15 otherwise); records what it was asked."""

    name = "fake"

    def __init__(self, outputs: dict[str, list[list[int]]]):
        self.outputs = outputs
        self.loads = 0
        self.calls: list[tuple[EngineConfig, int, Workload]] = []
        self.margin_args = None

    def load(self, config: EngineConfig) -> None:
        self.config = config

    def measure(self, workload, concurrency, temperature=None, seed=0):
        self.calls.append((self.config, concurrency, workload))
        speed = 10.0 if self.config.method == "none" else 15.0
        outputs = self.outputs[self.config.method][: len(workload.requests)]
        return fake_measurement(self.config, concurrency, outputs, speed)

    def target_logit_margin(self, request, generated, expected, got):
        self.margin_args = (request, generated, expected, got)
        return 0.25

    def close(self) -> None:
        pass

    def timed_calls(self, workload: Workload) -> list[tuple[EngineConfig, int, Workload]]:
        """The calls over the whole workload (the warm-up decodes only its first batch)."""
        return [call for call in self.calls if call[2] == workload]


@pytest.fixture
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """No background load, whatever else runs on this machine: fake-engine runs are deterministic."""
    quiet = noise.BackgroundLoad(other_cpu_cores=0.0, steal_fraction=0.0, load_avg_1m=0.0, cpu_count=2)
    monkeypatch.setattr(noise, "between", lambda _before, _after: quiet)


def test_defaults_measure_the_builtin_draft_on_the_builtin_workload(quiet_machine):
    engine = FakeEngine({DEFAULT_METHOD: [[1]] * 8, "none": [[1]] * 8})
    report = measure_configuration(engine=engine)
    timed = engine.timed_calls(builtin_workload())
    configs = {config for config, _, _ in timed}
    assert configs == {EngineConfig(DEFAULT_METHOD, DEFAULT_DEPTH), BASELINE}
    assert report.config == EngineConfig(DEFAULT_METHOD, DEFAULT_DEPTH) and report.config.draft_model == "builtin"
    assert all(concurrency == 1 for _, concurrency, _ in engine.calls)
    # The protocol's defaults: at least 3 rounds, each with the configuration and the baseline.
    assert report.repeated.repetitions == 3 and len(timed) == 6
    assert report.protocol.options == ProtocolOptions()
    assert report.baseline is not None and report.baseline.method == "none"  # the baseline is always measured
    assert report.outputs_match is None
    assert isinstance(report.speedup, Estimate) and report.speedup.value == pytest.approx(1.5)


def test_the_warm_up_is_not_a_measured_pass(quiet_machine):
    workload = Workload("w", [Request("a", 3), Request("b", 3), Request("c", 3)])
    engine = FakeEngine({"mtp": [[1, 2], [3], [4]], "none": [[1, 2], [3], [4]]})
    measure_configuration(MeasureRequest("mtp", 2, concurrency=2, workload=workload), engine=engine, protocol=QUICK)
    warm_up = [call for call in engine.calls if call[2] != request_stream(workload, 2)]
    # In reverse order: the first round starts with the configuration warmed (so loaded) last.
    assert [config for config, _, _ in warm_up] == [EngineConfig("mtp", 2), BASELINE]
    assert all(w.requests == workload.requests[:2] for _, _, w in warm_up)
    assert engine.calls[:2] == warm_up and len(engine.calls) == 2 + 2 * 3


def test_verify_runs_the_baseline_on_the_same_prompts_and_concurrency(quiet_machine):
    engine = FakeEngine({"mtp": [[1, 2], [3]], "none": [[1, 2], [3]]})
    report = measure_configuration(MeasureRequest("mtp", 2, concurrency=4, verify=True), engine=engine)
    workload = builtin_workload()
    timed = engine.timed_calls(workload)
    # Interleaved: none, mtp in round 1, then mtp, none ...
    assert [config.method for config, _, _ in timed] == ["none", "mtp", "mtp", "none", "none", "mtp"]
    assert all(concurrency == 4 for _, concurrency, _ in engine.calls)
    assert report.outputs_match is True and report.first_divergence is None
    assert report.speedup.value == pytest.approx(1.5)
    assert report.speedup.low == pytest.approx(1.5) and report.speedup.high == pytest.approx(1.5)  # no noise
    data = json.loads(json.dumps(report.to_dict()))
    assert data["config"] == {"method": "mtp", "depth": 2, "draft": None}
    assert data["concurrency"] == 4 and data["repetitions"] == 3
    assert data["baseline"]["measurement"]["method"] == "none" and data["baseline"]["repetitions"] == 3
    assert data["speedup"]["value"] == pytest.approx(1.5) and data["speedup"]["n"] == 3
    assert data["estimates"]["tokens_per_s"]["value"] == pytest.approx(15.0)
    assert data["baseline"]["estimates"]["tokens_per_s"]["value"] == pytest.approx(10.0)
    assert data["protocol"] == ProtocolOptions().to_dict()
    assert data["capped"] is None and data["rounds_discarded"] == 0 and data["noisy"] is False


def test_verify_reports_the_first_divergence_with_its_logit_margin(quiet_machine):
    workload = Workload("w", [Request("a", 3), Request("b", 3)])
    engine = FakeEngine({"ngram": [[1, 2, 3], [4, 9, 6]], "none": [[1, 2, 3], [4, 5, 6]]})
    report = measure_configuration(MeasureRequest("ngram", 2, workload=workload, verify=True), engine=engine)
    assert report.outputs_match is False
    assert report.first_divergence == Divergence(1, 1, 5, 9, 0.25)
    assert engine.margin_args == (Request("b", 3), [4], 5, 9)
    assert report.to_dict()["first_divergence"]["logit_margin"] == 0.25


def test_method_none_is_its_own_baseline(quiet_machine):
    engine = FakeEngine({"none": [[1]] * 8})
    report = measure_configuration(MeasureRequest("none", verify=True), engine=engine, protocol=QUICK)
    assert {config for config, _, _ in engine.calls} == {BASELINE}
    assert len(engine.timed_calls(builtin_workload())) == 3  # measured once per round, not twice
    assert report.baseline is None and report.speedup is None and report.outputs_match is True
    data = report.to_dict()
    assert data["baseline"] is None and data["speedup"] is None and data["repetitions"] == 3


def test_protocol_options_are_passed_on(quiet_machine):
    engine = FakeEngine({"draft": [[1]] * 8, "none": [[1]] * 8})
    options = ProtocolOptions(precision=0.1, min_repetitions=4, max_repetitions=6, max_seconds=30.0)
    report = measure_configuration(engine=engine, protocol=options)
    assert report.protocol.options == options and report.repeated.repetitions == 4
    assert report.to_dict()["protocol"] == options.to_dict()


def test_progress_is_reported(quiet_machine):
    lines: list[str] = []
    engine = FakeEngine({"draft": [[1]] * 8, "none": [[1]] * 8})
    measure_configuration(engine=engine, protocol=QUICK, progress=lines.append)
    assert lines[0] == "round 1: none at concurrency 1" and len(lines) == 6


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
        {"concurrency": 0},
        {"temperature": -0.5},
        {"verify": True, "temperature": 0.7},
        {"protocol": ProtocolOptions(precision=2)},
        {"protocol": ProtocolOptions(min_repetitions=0)},
        {"protocol": ProtocolOptions(min_repetitions=4, max_repetitions=3)},
        {"protocol": ProtocolOptions(max_seconds=0)},
    ],
)
def test_invalid_options_fail_before_anything_is_loaded(tmp_path, options):
    request = {name: value for name, value in options.items() if name != "protocol"}
    # A missing target would raise EngineError on load: ConfigurationError proves we never got there.
    with pytest.raises(ConfigurationError):
        measure_configuration(MeasureRequest(target=tmp_path / "missing.safetensors", **request),
                              protocol=options.get("protocol"))


def test_verify_refuses_a_workload_that_samples(tmp_path, quiet_machine):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "a", "temperature": 0.8}\n')
    with pytest.raises(ConfigurationError, match="greedy"):
        measure_configuration(MeasureRequest(workload=path, verify=True, target=tmp_path / "missing.safetensors"))
    # An explicit temperature 0 overrides the requests' own: verification is possible again.
    engine = FakeEngine({"draft": [[1]], "none": [[1]]})
    request = MeasureRequest(workload=path, verify=True, temperature=0)
    assert measure_configuration(request, engine=engine, protocol=QUICK).outputs_match



# --- the real embedded engine ----------------------------------------------------------------------


# The machine is declared quiet here (noise has its own tests, and test_cli's measure runs see the real
# load): whatever else runs, these take exactly 3 rounds. Timings stay real, so intervals are only
# checked for being there and holding their value (a t interval of 3 noisy runs may reach below 0).
# torch runs on one thread: with one intra-op thread per core, a single busy process elsewhere on a
# 2-core machine slows decoding ~40x (threads wait for a descheduled peer), and these tests would
# take minutes instead of seconds.


@pytest.fixture
def one_torch_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_embedded_engine_measures_with_intervals_and_a_paired_speedup(quiet_machine, one_torch_thread):
    report = measure_configuration(MeasureRequest("draft", 4, concurrency=1, workload=SMALL), protocol=QUICK)
    assert report.repeated.repetitions >= 3 and report.protocol.rounds_kept == 3
    data = json.loads(json.dumps(report.to_dict()))
    assert data["repetitions"] >= 3 and len(data["samples"]) == data["repetitions"]
    tokens = data["estimates"]["tokens_per_s"]
    assert tokens["n"] == data["repetitions"] and tokens["low"] <= tokens["value"] <= tokens["high"]
    assert tokens["value"] > 0 and data["measurement"]["tokens_per_s"] == pytest.approx(tokens["value"])
    speedup = data["speedup"]
    assert speedup["n"] == data["repetitions"] and 0 < speedup["low"] <= speedup["value"] <= speedup["high"]
    assert data["baseline"]["repetitions"] == data["repetitions"]
    assert data["baseline"]["measurement"]["method"] == "none"
    assert data["measurement"]["n_requests"] == 4 and data["measurement"]["output_tokens"] == 4 * 8  # the stream
    assert data["measurement"]["drafted_tokens"] >= data["measurement"]["accepted_tokens"] > 0
    assert data["noise"]["passes"] == data["repetitions"]
    assert data["capped"] in (None, "repetitions")


def test_cli_measure_json_has_intervals(quiet_machine, one_torch_thread):
    from autotune.cli import cli

    result = CliRunner().invoke(cli, ["measure", "--method", "draft", "--depth", "4", "--concurrency", "1", "--json",
                                      "--min-repetitions", "3", "--max-repetitions", "3", "--workload", str(TINY)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["repetitions"] >= 3 and data["protocol"]["min_repetitions"] == 3
    tokens = data["estimates"]["tokens_per_s"]
    assert tokens["low"] is not None and tokens["low"] <= tokens["value"] <= tokens["high"]
    assert data["speedup"]["low"] is not None and data["speedup"]["low"] <= data["speedup"]["value"] <= data["speedup"]["high"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--precision", "2"), "precision"),
        (("--min-repetitions", "0"), "min repetitions"),
        (("--min-repetitions", "5", "--max-repetitions", "4"), "max repetitions (4) is below min repetitions (5)"),
        (("--max-seconds", "0"), "max seconds"),
    ],
)
def test_cli_measure_bad_protocol_options_are_one_line(args, fragment):
    from autotune.cli import cli

    result = CliRunner().invoke(cli, ["measure", "--workload", str(TINY), *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output


# --- refused before anything is allocated: the memory and context checks tune applies -------------


@pytest.fixture
def no_engine_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building an engine (loading models, allocating caches) fails the test: a refusal must come first."""
    from autotune.engines import registry

    def forbidden(*_args, **_kwargs):
        raise AssertionError("an engine was built for a configuration that cannot fit")

    monkeypatch.setattr(registry, "create_engine", forbidden)


def test_a_batch_too_large_for_memory_is_refused_with_the_largest_that_fits(no_engine_built):
    with pytest.raises(ConfigurationError, match=r"draft@2 at concurrency 100000 .* pass --concurrency (\d+) or less"):
        measure_configuration(MeasureRequest("draft", 2, concurrency=100_000, workload=SMALL))


def test_the_suggested_concurrency_fits_and_one_more_does_not():
    """The fix the refusal names is exact: the largest concurrency the memory budget accepts."""
    from autotune.engines.embedded.footprint import model_path, read_footprint
    from autotune.search.memory import memory_budget

    target, draft = read_footprint(model_path(None, "target")), read_footprint(model_path("builtin", "draft"))
    budget = memory_budget(64 << 20, target, {"builtin": draft}, SMALL, whole_prompt_logits=True)
    largest = budget.largest_concurrency("draft", 2, "builtin")
    assert largest > 0
    budget.require_fit("draft", 2, largest, "builtin")
    with pytest.raises(ConfigurationError, match=f"pass --concurrency {largest} or less"):
        budget.require_fit("draft", 2, largest + 1, "builtin")
    tiny = memory_budget(1 << 20, target, {"builtin": draft}, SMALL, whole_prompt_logits=True)
    with pytest.raises(ConfigurationError, match="does not fit even at concurrency 1: use a smaller --target or --draft"):
        tiny.require_fit("draft", 2, 1, "builtin")


def test_a_request_longer_than_the_context_window_is_refused(tmp_path, no_engine_built):
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"prompt": "x" * 1000, "max_tokens": 20}) + "\n")
    with pytest.raises(ConfigurationError, match=r"handles 1024; use a workload with shorter prompts .* --depth"):
        measure_configuration(MeasureRequest("ngram", 4, workload=path))


def test_measure_and_tune_share_one_memory_budget(gpu):
    """tune's memory budget for a workload is the one measure checks against: same positions, same logits."""
    from autotune.engines.embedded.footprint import model_path, read_footprint
    from autotune.search.memory import memory_budget
    from autotune.search.options import TuneOptions
    from autotune.search.setup import set_up_study

    hardware = gpu(8 << 30)
    study = set_up_study(TuneOptions(workload=TINY, hardware=hardware, concurrencies=(1,), methods=("none", "draft")))
    measured = memory_budget(hardware.memory_total_bytes, read_footprint(model_path(None, "target")),
                           {"builtin": read_footprint(model_path("builtin", "draft"))}, load_workload(TINY),
                           whole_prompt_logits=True)
    assert study.memory == measured


def test_cli_measure_oversized_batch_is_one_line_exit_2():
    from autotune.cli import cli

    result = CliRunner().invoke(cli, ["measure", "--method", "draft", "--depth", "2", "--concurrency", "100000"],
                                catch_exceptions=False)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot run on this device" in lines[0] and "--concurrency" in lines[0], result.stderr


def test_a_gpu_index_the_machine_lacks_is_refused(monkeypatch: pytest.MonkeyPatch, no_engine_built):
    """torch itself would fail on cuda:3 with a bare assertion while reading the device's memory."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigurationError, match=r"device cuda:3 does not exist: .* cuda:0 to cuda:0"):
        measure_configuration(MeasureRequest(device="cuda:3", workload=SMALL))


def test_a_folder_engine_gets_the_same_check_from_config_json(fake_trtllm, tmp_path, no_engine_built):
    """TensorRT-LLM / vLLM targets are read from their Hugging Face folder: a context window shorter
    than the workload's requests is refused before the worker starts."""
    import hf_model_factory as hf

    target = hf.write_model(tmp_path / "target", hf.llama_config(max_position_embeddings=16))
    with pytest.raises(ConfigurationError, match=r"ngram@2 at concurrency 1 .* the target handles 16; use a workload"):
        measure_configuration(MeasureRequest("ngram", 2, workload=SMALL, target=target), engine="trtllm")


def test_a_model_of_unknown_cache_size_is_refused_on_its_weights_alone():
    """A folder whose config.json lacks the sizes costs 0 bytes per sequence: only its weights decide."""
    from dataclasses import replace

    from autotune.engines.embedded.footprint import model_path, read_footprint
    from autotune.search.memory import memory_budget

    unknown = replace(read_footprint(model_path(None, "target")), kv_bytes_per_token=0, vocab_size=0)
    budget = memory_budget(1 << 30, unknown, {}, SMALL, whole_prompt_logits=False)
    assert budget.largest_concurrency("none", 0) is None
    budget.require_fit("none", 0, 100_000)
    heavy = memory_budget(1 << 30, replace(unknown, weight_bytes=1 << 40), {}, SMALL, whole_prompt_logits=False)
    with pytest.raises(ConfigurationError, match="does not fit even at concurrency 1"):
        heavy.require_fit("none", 0, 1)
