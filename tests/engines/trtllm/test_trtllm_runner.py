"""The worker-side runner in this process (with the fake tensorrt_llm imported here, then unloaded):
what the worker boundary does not carry back, the generated token ids, and the event-loop lifetime."""

from __future__ import annotations

import sys

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.trtllm.runner import TrtLlmRunner
from autotune.errors import EngineError, UnsupportedConfigError
from autotune.workload import Request, Workload

WORKLOAD = Workload("w", [Request("def parse(argv):", 12), Request("class Cache:", 9), Request("import os", 7)])


@pytest.fixture
def runner(monkeypatch, target_dir, fake_trtllm_dir):
    monkeypatch.syspath_prepend(str(fake_trtllm_dir))
    runner = TrtLlmRunner(str(target_dir), stats_timeout_s=0.1)
    yield runner
    runner.close()
    for name in [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]:
        del sys.modules[name]


def test_greedy_outputs_do_not_depend_on_method_or_batch_size(runner) -> None:
    outputs = []
    for config in (EngineConfig("none"), EngineConfig("ngram", 2)):
        runner.load(config)
        for batch_size in (1, 3):
            run = runner.measure(WORKLOAD, batch_size)
            assert [len(tokens) for tokens in run.outputs] == [12, 9, 7]  # in request order
            outputs.append(run.outputs)
    assert all(o == outputs[0] for o in outputs)


def test_sampling_follows_the_seed(runner) -> None:
    runner.load(EngineConfig("none"))
    first = runner.measure(WORKLOAD, 2, temperature=1.0, seed=1).outputs
    assert runner.measure(WORKLOAD, 2, temperature=1.0, seed=1).outputs == first
    assert runner.measure(WORKLOAD, 2, temperature=1.0, seed=2).outputs != first


def test_one_event_loop_serves_every_run_of_an_llm(runner) -> None:
    # TensorRT-LLM binds its statistics queue to the loop of the first request: a loop per run
    # would break the second run's statistics.
    runner.load(EngineConfig("ngram", 2))
    counted = [runner.measure(WORKLOAD, 2).drafted_tokens for _ in range(3)]
    assert counted[0] > 0 and counted == [counted[0]] * 3  # every run counts its own iterations, no leftovers


def test_measure_needs_a_loaded_configuration_and_valid_options(runner) -> None:
    with pytest.raises(EngineError, match="no configuration loaded"):
        runner.measure(WORKLOAD, 1)
    runner.load(EngineConfig("none"))
    with pytest.raises(Exception, match="batch size"):
        runner.measure(WORKLOAD, 0)


def test_refused_arguments_become_unsupported_configurations(runner, monkeypatch) -> None:
    import tensorrt_llm.llmapi as llmapi

    monkeypatch.setattr(llmapi, "LLM_ARGUMENTS", llmapi.LLM_ARGUMENTS - {"enable_iter_perf_stats"})  # an older release
    runner.load(EngineConfig("none"))
    with pytest.raises(UnsupportedConfigError, match="TensorRT-LLM refused none: .*enable_iter_perf_stats"):
        runner.measure(WORKLOAD, 1)
