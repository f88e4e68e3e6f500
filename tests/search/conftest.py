"""Tiny random models, a tiny workload and a made-up CPU profile: each trial runs the real embedded
engine in a worker process and takes a fraction of a second (plus the worker's start)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from faulty_engine import QUIET

from autotune.engines import noise
from autotune.engines.embedded.builtin import save_model
from autotune.engines.embedded.network import CausalLM, ModelConfig
from autotune.engines.embedded.tokenizer import ByteTokenizer
from autotune.engines.worker import EngineWorker
from autotune.hardware import HardwareProfile
from autotune.search import TuneOptions
from autotune.workload import Request, Workload

VOCAB = ByteTokenizer.vocab_size
TARGET = ModelConfig(vocab_size=VOCAB, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=96, n_mtp=1)
PLAIN_TARGET = replace(TARGET, n_mtp=0)
DRAFT = ModelConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=96)
RAM_BYTES = 8 << 30


def save_random(config: ModelConfig, path: Path, seed: int = 0) -> str:
    torch.manual_seed(seed)
    save_model(CausalLM(config), path)
    return str(path)


@pytest.fixture(scope="session")
def random_model_file():
    """Saves a randomly initialised model: ``random_model_file(config, path, seed=0) -> str``."""
    return save_random


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, str]:
    """Model files: ``target`` (1 MTP module), ``plain_target`` (none), ``draft``."""
    folder = tmp_path_factory.mktemp("search-models")
    return {
        "target": save_random(TARGET, folder / "target.safetensors", 0),
        "plain_target": save_random(PLAIN_TARGET, folder / "plain.safetensors", 1),
        "draft": save_random(DRAFT, folder / "draft.safetensors", 2),
    }


@pytest.fixture(scope="session")
def workload() -> Workload:
    return Workload("tiny", [Request("def f(x):", 6), Request("class A:", 6), Request("import os", 4)])


def make_cpu_profile(ram_bytes: int = RAM_BYTES, fingerprint: str = "c0ffee0000000000") -> HardwareProfile:
    """A CPU profile as the probe would build it, without measuring anything."""
    return HardwareProfile(fingerprint, "test cpu", "cpu", 1, {"ram_total_bytes": ram_bytes}, ())


@pytest.fixture
def cpu_profile():
    """Builds made-up CPU profiles: ``cpu_profile(ram_bytes=..., fingerprint=...)``."""
    return make_cpu_profile


@pytest.fixture
def options(models, workload, sqlite_url) -> TuneOptions:
    """A small study: all four methods, depth <= 2, concurrency levels 1 and 2, 6 trials, a short
    confirmation (3 rounds per concurrency). TPE: these tests count on the budget being spent; the
    model-guided search, which stops when nothing can win, is tested in test_guide.py."""
    return TuneOptions(
        db_url=sqlite_url, study_name="tiny", target=models["target"], drafts=(models["draft"],), max_depth=2,
        concurrencies=(1, 2), n_trials=6, seed=3, sampler="tpe", workload=workload, hardware=make_cpu_profile(), trial_timeout_s=120,
        heartbeat_interval_s=1, grace_period_s=2, max_repetitions=3, confirm_seconds=1.0,
    )


@pytest.fixture
def quiet_machine(monkeypatch):  # noqa: ANN001 - pytest's
    """The machine read as quiet before the study and through every screening pass (the readings
    are taken in the parent and in the worker; both are set here). For tests that count worker
    starts: a load the suite itself puts on the machine would limit the engine's threads, and each
    change of the thread count starts a fresh worker (search/screening.py)."""
    monkeypatch.setattr(noise, "while_waiting", lambda _seconds: QUIET)
    measure_pass = EngineWorker.measure_pass

    def quiet(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - EngineWorker's
        return replace(measure_pass(self, *args, **kwargs), load=QUIET)

    monkeypatch.setattr(EngineWorker, "measure_pass", quiet)
