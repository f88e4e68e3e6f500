"""The worker-side runner in this process (with the fake tensorrt_llm imported here, then unloaded):
what the worker boundary does not carry back, the generated token ids, and the event-loop lifetime."""

from __future__ import annotations


import pytest

from autotune.engines.base import EngineConfig
from autotune.errors import EngineError, UnsupportedConfigError
from autotune.workload import Request, Workload

WORKLOAD = Workload("w", [Request("def parse(argv):", 12), Request("class Cache:", 9), Request("import os", 7)])


@pytest.fixture
def runner(make_runner, target_dir):
    return make_runner(target_dir)


def test_greedy_outputs_do_not_depend_on_method_or_concurrency(runner) -> None:
    outputs = []
    for config in (EngineConfig("none"), EngineConfig("ngram", 2)):
        runner.load(config)
        for concurrency in (1, 3):
            run = runner.measure(WORKLOAD, concurrency)
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


def test_statistics_outlast_iterations_longer_than_the_stats_timeout(make_runner, target_dir, monkeypatch) -> None:
    # get_stats_async stops for good after a quiet timeout until the next submission: a timing run
    # (every row sent at once) lost the rest of its iterations, and they were counted by the next run.
    monkeypatch.setenv("FAKE_TRTLLM_ITERATION_MS", "25")
    runner = make_runner(target_dir, stats_timeout_s=0.01)
    (point,) = runner.time_steps([EngineConfig("ngram", 2)], WORKLOAD, [2], steps=3, rounds=1)
    assert point["steps"] >= 3
    runner.load(EngineConfig("none"))  # two runs of the same schedule: the same iterations, none carried over
    first, second = (runner.measure(WORKLOAD, 2) for _ in range(2))
    assert first.target_passes == second.target_passes > 0


def test_measure_needs_a_loaded_configuration_and_valid_options(runner) -> None:
    with pytest.raises(EngineError, match="no configuration loaded"):
        runner.measure(WORKLOAD, 1)
    runner.load(EngineConfig("none"))
    with pytest.raises(Exception, match="concurrency"):
        runner.measure(WORKLOAD, 0)


def test_refused_arguments_become_unsupported_configurations(runner, monkeypatch) -> None:
    import tensorrt_llm.llmapi as llmapi

    monkeypatch.setattr(llmapi, "LLM_ARGUMENTS", llmapi.LLM_ARGUMENTS - {"enable_iter_perf_stats"})  # an older release
    runner.load(EngineConfig("none"))
    with pytest.raises(UnsupportedConfigError, match="TensorRT-LLM refused none: .*enable_iter_perf_stats"):
        runner.measure(WORKLOAD, 1)


def test_the_context_step_is_not_a_generation_step(runner) -> None:
    # decoding_iter counts the context step (the PyTorch sampler's py_decoding_iter += 1 after it too):
    # without speculation every step after the first token yields exactly one token.
    runner.load(EngineConfig("none"))
    for concurrency in (1, 3):
        run = runner.measure(WORKLOAD, concurrency)
        assert run.sequence_steps == (12 - 1) + (9 - 1) + (7 - 1)
        assert run.acceptance_length == 1.0
    runner.load(EngineConfig("ngram", 2))
    run = runner.measure(WORKLOAD, 1)  # one request at a time: a generation iteration is one sequence-step
    assert run.sequence_steps == run.target_passes
    assert run.acceptance_length == pytest.approx(sum(n - 1 for n in run.request_tokens) / run.target_passes)


def test_drafting_time_only_where_the_engine_measures_it(make_runner, target_dir, mtp_target_dir, draft_dir,
                                                         eagle3_dir) -> None:
    cases = [(target_dir, EngineConfig("ngram", 2), False), (mtp_target_dir, EngineConfig("mtp", 1), False),
             (target_dir, EngineConfig("draft", 2, str(eagle3_dir)), False),  # one-model EAGLE-3
             (target_dir, EngineConfig("draft", 2, str(draft_dir)), True)]  # two-model: ModelDrafter times it
    for target, config, timed in cases:
        runner = make_runner(target)
        runner.load(config)
        run = runner.measure(WORKLOAD, 2)
        assert run.drafted_tokens > 0, config.label()
        if timed:
            assert run.propose_time_s > 0 and run.verify_time_s > 0
        else:
            assert run.propose_time_s is None, config.label()  # not measured: never reported as 0
            assert run.verify_time_s > 0
        runner.close()


def test_memory_is_weights_and_kv_pool_with_the_device_figure_apart(runner, target_dir) -> None:
    from autotune.models.folder import read_model
    from autotune.models.footprint import folder_footprint

    runner.load(EngineConfig("none"))
    run = runner.measure(WORKLOAD, 2)
    llm = runner._llm
    import tensorrt_llm.llmapi as llmapi

    own = folder_footprint(read_model(target_dir, "target"))
    pool_tokens = llm.max_num_blocks * llmapi.TOKENS_PER_BLOCK
    assert run.memory_kind == "trtllm_weights_and_kv_cache"
    assert run.peak_memory_bytes == own.weight_bytes + pool_tokens * own.kv_bytes_per_token
    # gpuMemUsage is device-wide (about 90 % of the GPU whatever the configuration): labelled, not the peak
    assert run.device_memory_bytes > 0.85 * llmapi.GPU_TOTAL_BYTES
    assert run.device_memory_bytes - run.peak_memory_bytes >= llmapi.CUDA_CONTEXT_BYTES
