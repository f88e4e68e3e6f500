"""Footprints read from safetensors headers agree with what the models and caches really take."""

from __future__ import annotations

import json
import struct

import pytest
import torch

from autotune.engines.embedded.builtin import DRAFT_PATH, TARGET_PATH, load_model, save_model
from autotune.engines.embedded.footprint import (
    cache_positions,
    longest_prompt_tokens,
    model_path,
    read_footprint,
)
from autotune.engines.embedded.network import CausalLM, ModelConfig
from autotune.errors import EngineError
from autotune.workload import Request, Workload

CONFIG = ModelConfig(vocab_size=259, d_model=24, n_layers=2, n_heads=2, d_ff=40, max_seq_len=64, n_mtp=2)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> str:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("footprint") / "m.safetensors"
    save_model(CausalLM(CONFIG), path)
    return str(path)


def test_weights_and_cache_bytes_match_the_loaded_model(model_file) -> None:
    footprint = read_footprint(model_file)
    model = load_model(model_file)  # float32, as the engine computes
    assert footprint.n_params == sum(p.numel() for p in model.parameters())
    assert footprint.weight_bytes == sum(p.nbytes for p in model.parameters())
    batch, positions = 3, 17
    assert batch * positions * footprint.kv_bytes_per_token == model.new_cache(batch, positions).nbytes()
    mtp_state = model.new_mtp_cache(batch, positions).nbytes() + batch * positions * CONFIG.d_model * 4
    assert batch * positions * footprint.mtp_bytes_per_token == mtp_state
    assert (footprint.n_mtp, footprint.vocab_size, footprint.max_seq_len) == (2, 259, 64)


def test_dtype_scales_every_byte_count(model_file) -> None:
    full, half = read_footprint(model_file), read_footprint(model_file, dtype_bytes=2)
    assert (half.weight_bytes * 2, half.kv_bytes_per_token * 2) == (full.weight_bytes, full.kv_bytes_per_token)


def test_builtin_models_are_found() -> None:
    assert model_path(None, "target") == TARGET_PATH
    assert model_path("builtin", "draft") == DRAFT_PATH
    assert read_footprint(DRAFT_PATH).n_mtp == 0


def test_cache_positions_follow_the_longest_request() -> None:
    workload = Workload("w", [Request("abc", 10), Request("abcdefgh", 3)])
    # BOS + 3 bytes + 10 tokens is the longest sequence; one more slot, plus one per draft token.
    assert cache_positions(workload, 0) == 15
    assert cache_positions(workload, 4) == 19
    assert longest_prompt_tokens(workload) == 9


def test_unreadable_files_are_engine_errors(tmp_path) -> None:
    with pytest.raises(EngineError, match="does not exist"):
        read_footprint(tmp_path / "missing.safetensors")
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x05")
    with pytest.raises(EngineError, match="not a readable safetensors"):
        read_footprint(garbage)
    header = json.dumps({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    no_config = tmp_path / "no_config.safetensors"
    no_config.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    with pytest.raises(EngineError, match="no valid 'config' metadata"):
        read_footprint(no_config)
