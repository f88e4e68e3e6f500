"""Memory fit from safetensors headers and config.json: weights, KV cache per token, largest batch."""

from __future__ import annotations

import json
import struct

import pytest

from autotune.errors import ConfigurationError
from autotune.preflight.memory import (
    MEMORY_HEADROOM,
    check_memory,
    estimated_weight_bytes,
    footprint,
    kv_bytes_per_layer,
    largest_batch,
)
from autotune.preflight.models import read_model, read_weights
from hf_model_factory import llama_config, parameter_count, write_model

SEQ_LEN = 1000
DEPTH = 3


def test_weights_are_read_from_the_safetensors_headers(tmp_path) -> None:
    target = read_model(write_model(tmp_path / "t"), "t")
    assert target.weights.n_params == parameter_count(llama_config())
    assert target.weights.n_bytes == 2 * target.weights.n_params  # 16-bit tensors
    assert footprint(target).weight_bytes == target.weights.n_bytes and not footprint(target).weights_estimated


def test_without_safetensors_weights_are_estimated_from_the_config(tmp_path) -> None:
    target = read_model(write_model(tmp_path / "t", weights=False), "t")
    assert estimated_weight_bytes(target) == 2 * parameter_count(llama_config())  # the same shapes, counted
    assert footprint(target).weights_estimated
    moe = read_model(write_model(tmp_path / "m", llama_config(num_local_experts=8), weights=False), "m")
    assert estimated_weight_bytes(moe) is None


def test_header_only_shards_are_enough(tmp_path) -> None:
    # A 2-shard 1.5e9-parameter checkpoint, written as headers alone: nothing beyond them is read.
    for shard in (1, 2):
        header = json.dumps({"w": {"dtype": "BF16", "shape": [50_000, 15_000], "data_offsets": [0, 1_500_000_000]},
                             "__metadata__": {"format": "pt"}}).encode()
        (tmp_path / f"model-0000{shard}-of-00002.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    weights = read_weights(tmp_path)
    assert (weights.n_params, weights.n_bytes, weights.files) == (1_500_000_000, 3_000_000_000, 2)
    (tmp_path / "broken.safetensors").write_bytes(b"\x01")
    with pytest.raises(ConfigurationError, match="not a readable safetensors file"):
        read_weights(tmp_path)


def test_kv_cache_bytes_per_token(tmp_path) -> None:
    gqa = read_model(write_model(tmp_path / "g", weights=False), "g")
    assert kv_bytes_per_layer(gqa) == 2 * 2 * 8 * 2  # keys + values, 2 KV heads, head_dim 32/4, bf16
    assert footprint(gqa).kv_bytes_per_token == 2 * 64
    explicit = read_model(write_model(tmp_path / "e", llama_config(head_dim=16, num_key_value_heads=None), weights=False), "e")
    assert kv_bytes_per_layer(explicit) == 2 * 4 * 16 * 2  # no num_key_value_heads: one KV head per head
    mla = read_model(write_model(tmp_path / "m", llama_config(kv_lora_rank=512, qk_rope_head_dim=64), weights=False), "m")
    assert kv_bytes_per_layer(mla) == (512 + 64) * 2  # DeepSeek-V3: compressed latent + RoPE key
    fp32 = read_model(write_model(tmp_path / "f", llama_config(torch_dtype="float32"), weights=False), "f")
    assert kv_bytes_per_layer(fp32) == 2 * kv_bytes_per_layer(gqa)


def test_largest_batch() -> None:
    assert largest_batch(1000, 100, 300) == 3
    assert largest_batch(1000, 990, 300) == 0
    assert largest_batch(1000, 2000, 300) == 0


def capacity(memory: int, weights: int, per_token: int, depth: int = 0) -> int:
    return largest_batch(int(memory * (1 - MEMORY_HEADROOM)), weights, (SEQ_LEN + depth + 1) * per_token)


def test_fits_reports_the_largest_batch_for_each_configuration(tmp_path) -> None:
    target = read_model(write_model(tmp_path / "t", llama_config(num_nextn_predict_layers=1)), "t")
    draft = read_model(write_model(tmp_path / "d", llama_config(num_hidden_layers=1)), "d")
    own, theirs = footprint(target), footprint(draft)
    memory = 100_000_000
    checks = check_memory(target, [("d", draft)], memory, [1, 8, 64], SEQ_LEN, DEPTH, mtp_layers=1)
    assert [(c.subject, c.status) for c in checks] == [("target", "ok"), ("d", "ok")]
    none, mtp = checks[0].details["configurations"]
    assert none["largest_batch"] == capacity(memory, own.weight_bytes, own.kv_bytes_per_token)
    assert mtp["largest_batch"] == capacity(memory, own.weight_bytes, own.kv_bytes_per_token + own.kv_bytes_per_layer, DEPTH)
    (pair,) = checks[1].details["configurations"]
    assert pair["largest_batch"] == capacity(memory, own.weight_bytes + theirs.weight_bytes,
                                             own.kv_bytes_per_token + theirs.kv_bytes_per_token, DEPTH)
    assert pair["largest_batch"] < none["largest_batch"]  # the draft's weights and KV cache cost room
    assert f"none up to batch {none['largest_batch']}" in checks[0].message


def test_too_small_gpus(tmp_path) -> None:
    target = read_model(write_model(tmp_path / "t"), "t")
    weights, per_token = footprint(target).weight_bytes, footprint(target).kv_bytes_per_token
    tight = int((weights + 4 * (SEQ_LEN + 1) * per_token) / (1 - MEMORY_HEADROOM)) + 1  # room for 4 sequences
    (check,) = check_memory(target, [], tight, [1, 8], SEQ_LEN, DEPTH, mtp_layers=0)
    assert check.status == "warn" and "none up to batch 4" in check.message
    (check,) = check_memory(target, [], weights, [1, 8], SEQ_LEN, DEPTH, mtp_layers=0)
    assert check.status == "error" and "does not fit even at batch 1" in check.message


def test_unknown_sizes_are_warnings(tmp_path) -> None:
    moe = read_model(write_model(tmp_path / "m", llama_config(num_local_experts=8), weights=False), "m")
    (check,) = check_memory(moe, [], 10**12, [1], SEQ_LEN, DEPTH, mtp_layers=0)
    assert check.status == "warn" and "weight size unknown" in check.message
