"""The memory autotune gives every vLLM engine and server (autotune.engines.vllm.memory), on the built-in
models exported as Hugging Face folders: the KV cache their sequences need on a CPU, fewer engines
where the machine holds fewer, one line where it holds none, the user's VLLM_CPU_KVCACHE_SPACE kept,
and a share of the device on a GPU. No vLLM needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.engines.vllm.memory import (
    ENGINE_PROCESS_BYTES,
    GIB,
    KV_ENV,
    MIB,
    SERVER_PROCESS_BYTES,
    EngineHost,
    available_memory_bytes,
    engine_memory,
)
from autotune.errors import ConfigurationError
from autotune.models import fit
from autotune.models.folder import read_model
from autotune.models.footprint import folder_footprint

# The built-in target's config.json: 5 layers, 5 KV heads of 64 in float32, 1024 positions.
TARGET_PER_POSITION = 5 * 2 * 5 * 64 * 4
# The built-in draft's: 2 layers, 4 KV heads of 32 in float32.
DRAFT_PER_POSITION = 2 * 2 * 4 * 32 * 4
CONTEXT = 1024


@pytest.fixture
def models(hf_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(KV_ENV, raising=False)
    return read_model(hf_models["target"], "target"), read_model(hf_models["draft"], "draft")


def whole_mib(n_bytes: float) -> int:
    return -(-int(n_bytes) // MIB) * MIB


def test_a_cpu_engine_gets_the_kv_cache_its_sequences_need(models) -> None:
    target, draft = models
    memory = engine_memory("none", target, None, 8, EngineHost(6, on_cpu=True, available_bytes=20 * GIB))
    assert memory.kv_cache_bytes == whole_mib(8 * CONTEXT * TARGET_PER_POSITION * 1.25)
    assert memory.engines == 6 and memory.gpu_memory_utilization is None
    assert memory.engine_arguments() == {"kv_cache_memory_bytes": memory.kv_cache_bytes}
    assert memory.server_arguments() == [f"--kv-cache-memory-bytes={memory.kv_cache_bytes}"]
    assert memory.reserved_bytes == memory.kv_cache_bytes and memory.describe().startswith("KV cache ")
    with_draft = engine_memory("draft", target, draft, 8, EngineHost(6, on_cpu=True, available_bytes=20 * GIB))
    assert with_draft.kv_cache_bytes == whole_mib(8 * CONTEXT * (TARGET_PER_POSITION + DRAFT_PER_POSITION) * 1.25)


def test_fewer_engines_where_the_machine_holds_fewer_and_never_less_than_one_sequence(models) -> None:
    target, _ = models
    one = folder_footprint(target).weight_bytes + ENGINE_PROCESS_BYTES + SERVER_PROCESS_BYTES + CONTEXT * TARGET_PER_POSITION
    available = int(2.5 * one / (1 - fit.MEMORY_MARGIN))  # room for two servers, not three
    memory = engine_memory("none", target, None, 64, EngineHost(3, on_cpu=True, server=True, available_bytes=available))
    assert memory.engines == 2
    # 64 whole-context sequences do not fit beside two servers: the share left, at least one sequence.
    share = fit.usable_bytes(available) // 2 - (one - CONTEXT * TARGET_PER_POSITION)
    assert CONTEXT * TARGET_PER_POSITION <= memory.kv_cache_bytes <= whole_mib(share)


def test_a_machine_without_room_for_one_engine_is_one_line(models) -> None:
    target, _ = models
    with pytest.raises(ConfigurationError) as error:
        engine_memory("none", target, None, 8, EngineHost(3, on_cpu=True, server=True, available_bytes=GIB))
    message = str(error.value)
    assert message.startswith("not enough memory for a vLLM engine of autotune-byte-target: it needs ")
    assert "1024-token sequence" in message and "\n" not in message


def test_the_users_vllm_cpu_kvcache_space_is_kept_and_named(models, monkeypatch: pytest.MonkeyPatch) -> None:
    target, _ = models
    monkeypatch.setenv(KV_ENV, "2")
    memory = engine_memory("none", target, None, 8, EngineHost(3, on_cpu=True, available_bytes=GIB))
    assert (memory.user_kv_gib, memory.kv_cache_bytes, memory.server_arguments()) == (2, None, [])
    assert memory.reserved_bytes == 2 * GIB and KV_ENV in memory.describe()
    monkeypatch.setenv(KV_ENV, "1.5")  # vLLM reads it with int(): it would fail at the first build
    with pytest.raises(ConfigurationError, match=r"VLLM_CPU_KVCACHE_SPACE='1.5' is not a whole number of GiB"):
        engine_memory("none", target, None, 8, EngineHost(3, on_cpu=True))


def test_gpu_engines_share_the_device(models) -> None:
    target, _ = models
    memory = engine_memory("none", target, None, 8, EngineHost(3, on_cpu=False))
    assert memory.gpu_memory_utilization == 0.3 and memory.kv_cache_bytes is None
    assert memory.server_arguments() == ["--gpu-memory-utilization=0.3"] and memory.reserved_bytes is None
    assert engine_memory("none", target, None, 8, EngineHost(1, on_cpu=False)).gpu_memory_utilization == 0.9


def test_the_machines_available_memory_is_read_from_this_machine() -> None:
    total = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                 if line.startswith("MemTotal:"))
    assert 0 < available_memory_bytes() <= total
