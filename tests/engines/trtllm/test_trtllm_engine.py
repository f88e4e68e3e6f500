"""TrtLlmEngine end to end with a fake ``tensorrt_llm`` in real worker processes: the runner streams
the workload, counts acceptance from the iteration statistics, reuses the LLM across concurrency levels,
tears it down on a configuration change, and failures come back as typed WorkerFailures."""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import time

import pytest

from autotune.analysis.steady import stream_length
from autotune.engines.base import EngineConfig
from autotune.engines.registry import create_engine, engine_spec
from autotune.engines.trtllm import TensorRtLlmNotInstalledError
from autotune.engines.trtllm.engine import runner_spec
from autotune.engines.worker import EngineWorker, WorkerFailure
from autotune.errors import ConfigurationError, UnsupportedConfigError
from autotune.workload import Request, Workload

WORKLOAD = Workload("w", [Request("def parse(argv):", 12), Request("class Cache:", 9), Request("import os", 7)])
FAST = {"timeout_s": 60, "stats_timeout_s": 0.2}


def inits(events):
    return [e for e in events() if e["event"] == "init"]


@pytest.fixture
def engine(fake_trtllm, target_dir):
    engine = create_engine("trtllm", target=target_dir, max_batch_size=4, **FAST)
    yield engine
    engine.close()


def test_without_tensorrt_llm_the_engine_fails_at_once(target_dir) -> None:
    if importlib.util.find_spec("tensorrt_llm") is not None:
        pytest.skip("TensorRT-LLM is installed here")
    for make in (lambda: create_engine("trtllm", target=target_dir), lambda: engine_spec("trtllm", target=target_dir)):
        with pytest.raises(TensorRtLlmNotInstalledError) as failure:
            make()
        message = str(failure.value)
        assert "\n" not in message and "pip3 install tensorrt_llm" in message
    assert multiprocessing.active_children() == []  # nothing was started


def test_measures_in_a_worker_and_reuses_the_llm_across_concurrencies(engine, fake_trtllm) -> None:
    engine.load(EngineConfig("none"))
    runs = [engine.measure(WORKLOAD, concurrency) for concurrency in (1, 2, 4)]
    assert (engine.loads, engine.worker_starts) == (1, 1)
    (init,) = inits(fake_trtllm)
    assert init["pid"] != os.getpid()
    assert init["kwargs"]["max_batch_size"] == 4 and init["kwargs"]["enable_iter_perf_stats"] is True
    assert "speculative_config" not in init["kwargs"]
    generated = [e for e in fake_trtllm() if e["event"] == "generate"]
    assert all(e["streaming"] and e["sampling_params"]["top_k"] == 1 and e["pid"] == init["pid"] for e in generated)
    # The worker runs the steady-state stream: the workload in whole cycles, at least 4 x C requests.
    cycles = [stream_length(3, concurrency) // 3 for concurrency in (1, 2, 4)]
    assert [e["sampling_params"]["max_tokens"] for e in generated] == [4] + [12, 9, 7] * sum(cycles)  # a warm-up first
    for run, n in zip(runs, cycles):
        assert run.engine == "trtllm" and run.output_tokens == 28 * n and run.n_requests == 3 * n
        assert run.acceptance_length == 1.0 and run.drafted_tokens == 0 and run.acceptance_rate is None
        assert run.target_passes > 0 and run.sequence_steps == (11 + 8 + 6) * n  # tokens after the first, one per step
        assert run.peak_memory_bytes > 0 and run.memory_kind == "trtllm_weights_and_kv_cache"
        assert run.device_memory_bytes > run.peak_memory_bytes  # device-wide, labelled apart
        assert run.propose_time_s is None  # nothing drafted, nothing timed
    assert runs[2].target_passes / cycles[2] < runs[0].target_passes / cycles[0]  # more sequences share each iteration


def test_configuration_change_rebuilds_the_llm_in_the_same_worker_and_counts_acceptance(engine, fake_trtllm,
                                                                                        mtp_target_dir) -> None:
    engine.load(EngineConfig("none"))
    baseline = engine.measure(WORKLOAD, 2)
    engine.load(EngineConfig("ngram", 3))
    ngram = engine.measure(WORKLOAD, 2)
    first, second = inits(fake_trtllm)
    # The runner manages its LLMs, so the worker keeps its process: the switch shuts the first LLM down
    # there and builds the next (a fresh process per configuration paid TensorRT-LLM's start again).
    assert first["pid"] == second["pid"] and (engine.loads, engine.worker_starts) == (2, 1)
    shutdowns = [i for i, e in enumerate(fake_trtllm()) if e["event"] == "shutdown"]
    assert shutdowns and shutdowns[0] < fake_trtllm().index(second)  # the first torn down before the second
    assert second["kwargs"]["speculative_config"] == {
        "class": "NGramDecodingConfig",
        "fields": {"max_draft_len": 3, "max_matching_ngram_size": 3, "is_keep_all": True, "is_use_oldest": False,
                   "is_public_pool": False},
    }
    assert ngram.output_tokens == baseline.output_tokens
    assert ngram.drafted_tokens > 0 and 0 < ngram.accepted_tokens <= ngram.drafted_tokens
    assert ngram.acceptance_rate == pytest.approx(ngram.accepted_tokens / ngram.drafted_tokens)
    assert ngram.acceptance_length > 1.0
    assert ngram.sequence_steps < baseline.sequence_steps  # fewer target passes per sequence


def test_larger_batch_than_built_rebuilds_the_llm_in_the_same_worker(fake_trtllm, target_dir) -> None:
    engine = create_engine("trtllm", target=target_dir, **FAST)  # built for the first concurrency
    try:
        engine.load(EngineConfig("none"))
        engine.measure(WORKLOAD, 1)
        engine.measure(WORKLOAD, 3)
        engine.measure(WORKLOAD, 2)
        assert [i["kwargs"]["max_batch_size"] for i in inits(fake_trtllm)] == [1, 3]
        assert (engine.loads, engine.worker_starts) == (2, 1)
    finally:
        engine.close()


@pytest.mark.parametrize(("kind", "expected_class"), [("draft", "DraftTargetDecodingConfig"), ("eagle3", "Eagle3DecodingConfig")])
def test_draft_folders_select_their_decoding_config(fake_trtllm, engine, draft_dir, eagle3_dir, kind, expected_class) -> None:
    folder = draft_dir if kind == "draft" else eagle3_dir
    engine.load(EngineConfig("draft", 2, str(folder)))
    run = engine.measure(WORKLOAD, 2, temperature=0.7, seed=3)
    (init,) = inits(fake_trtllm)
    assert init["kwargs"]["speculative_config"]["class"] == expected_class
    assert init["kwargs"]["speculative_config"]["fields"]["speculative_model_dir"] == str(folder)
    sampled = [e["sampling_params"] for e in fake_trtllm() if e["event"] == "generate"][1:]  # after the warm-up
    assert all(p["temperature"] == 0.7 and "top_k" not in p for p in sampled)
    assert sorted(p["seed"] for p in sampled) == list(range(3, 3 + stream_length(3, 2)))  # a seed per stream position
    assert run.temperature == 0.7 and run.draft == str(folder)


def test_mtp_target_runs_mtp(fake_trtllm, mtp_target_dir) -> None:
    engine = create_engine("trtllm", target=mtp_target_dir, max_batch_size=2, **FAST)
    try:
        engine.load(EngineConfig("mtp", 2))
        run = engine.measure(WORKLOAD, 2)
        assert inits(fake_trtllm)[0]["kwargs"]["speculative_config"]["class"] == "MTPDecodingConfig"
        assert run.method == "mtp" and run.drafted_tokens > 0
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("fault", "kind", "reason"),
    [
        ("crash_on_load", "crash", "fatal error while loading the engine"),
        ("oom_on_load", "oom", "CUDA out of memory"),
        ("hang_on_generate", "timeout", "no answer within 5 s"),
    ],
)
def test_failures_come_back_typed_and_the_next_call_starts_afresh(fake_trtllm, target_dir, monkeypatch, fault, kind,
                                                                   reason) -> None:
    timeout_s = 5 if kind == "timeout" else 60
    engine = create_engine("trtllm", target=target_dir, max_batch_size=2, timeout_s=timeout_s, stats_timeout_s=0.2)
    try:
        engine.load(EngineConfig("none"))
        monkeypatch.setenv("FAKE_TRTLLM_FAULT", fault)
        with pytest.raises(WorkerFailure) as failure:
            engine.measure(WORKLOAD, 1)
        assert failure.value.kind == kind and reason in failure.value.reason
        monkeypatch.delenv("FAKE_TRTLLM_FAULT")
        assert engine.measure(WORKLOAD, 1).output_tokens == 28 * stream_length(3, 1) // 3
    finally:
        engine.close()


def test_configurations_the_models_cannot_run_are_refused_before_any_process(fake_trtllm, engine, tmp_path) -> None:
    with pytest.raises(UnsupportedConfigError, match="MTP modules"):
        engine.load(EngineConfig("mtp", 2))
    with pytest.raises(UnsupportedConfigError, match="draft model folder"):
        engine.load(EngineConfig("draft", 2))
    with pytest.raises(ConfigurationError, match="not a folder"):
        engine.load(EngineConfig("draft", 2, str(tmp_path / "missing")))
    with pytest.raises(ConfigurationError, match="concurrency"):
        engine.load(EngineConfig("none")) or engine.measure(WORKLOAD, 0)
    assert engine.worker_starts == 0 and inits(fake_trtllm) == []


def test_target_must_be_a_model_folder(fake_trtllm, tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="no config.json"):
        create_engine("trtllm", target=tmp_path)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_the_executor_process_of_each_llm_ends_with_its_worker(engine, fake_trtllm) -> None:
    # Like the real LLM, the stand-in starts a process of its own when built (issue 13, items 6 and 8).
    engine.load(EngineConfig("none"))
    engine.measure(WORKLOAD, 1)
    (first,) = inits(fake_trtllm)
    assert _alive(first["executor_pid"])
    engine.load(EngineConfig("ngram", 2))
    engine.measure(WORKLOAD, 1)
    second = inits(fake_trtllm)[1]
    assert _gone(first["executor_pid"]) and _alive(second["executor_pid"])
    engine.close()
    assert _gone(second["executor_pid"])


def _build_in_daemon(target: str, errors) -> None:  # noqa: ANN001
    try:
        import tensorrt_llm

        tensorrt_llm.LLM(target).shutdown()
        errors.put(None)
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        errors.put(f"{type(exc).__name__}: {exc}")


def test_a_daemonic_worker_could_not_host_the_stand_in(fake_trtllm, target_dir) -> None:
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    process = context.Process(target=_build_in_daemon, args=(str(target_dir), errors), daemon=True)
    process.start()
    message = errors.get(timeout=30)
    process.join(10)
    assert message is not None and "daemonic processes are not allowed to have children" in message


def test_step_cost_timing_through_the_worker_sets_the_forcing_variable_in_the_child(fake_trtllm, mtp_target_dir) -> None:
    worker = EngineWorker(runner_spec(mtp_target_dir, max_batch_size=2, stats_timeout_s=0.05), timeout_s=60)
    points = worker.time_steps([EngineConfig("none"), EngineConfig("mtp", 1)], WORKLOAD, [1, 2], steps=3, rounds=1)
    # The baseline is timed last and its LLM (nothing forced) kept: the next measurement of it builds nothing.
    assert [(p["method"], p["concurrency"]) for p in points] == [("mtp", 1), ("mtp", 2), ("none", 1), ("none", 2)]
    assert [i["forced_accepted"] for i in inits(fake_trtllm)] == [1, 0]  # set before LLM(...), in the worker only
    assert "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS" not in os.environ
    try:
        assert worker.measure(EngineConfig("none"), WORKLOAD, 2).output_tokens > 0
        assert len(inits(fake_trtllm)) == 2 and (worker.starts, worker.loads) == (1, 2)
        worker.measure(EngineConfig("mtp", 1), WORKLOAD, 2)  # the forced LLM was not kept: built again, unforced
        assert [i["forced_accepted"] for i in inits(fake_trtllm)] == [1, 0, 0]
    finally:
        worker.stop()
