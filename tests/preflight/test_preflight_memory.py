"""Memory fit of a target and its drafts on the GPU: the largest batch of each configuration."""

from __future__ import annotations

from autotune.models.fit import MEMORY_MARGIN, largest_batch, usable_bytes
from autotune.models.folder import read_model
from autotune.models.footprint import footprint
from autotune.preflight.memory import check_memory
from hf_model_factory import llama_config, write_model

SEQ_LEN = 1000
DEPTH = 3


def capacity(memory: int, weights: int, per_token: int, depth: int = 0) -> int:
    return largest_batch(usable_bytes(memory), weights, (SEQ_LEN + depth + 1) * per_token)


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
    tight = int((weights + 4 * (SEQ_LEN + 1) * per_token) / (1 - MEMORY_MARGIN)) + 1  # room for 4 sequences
    (check,) = check_memory(target, [], tight, [1, 8], SEQ_LEN, DEPTH, mtp_layers=0)
    assert check.status == "warn" and "none up to batch 4" in check.message
    (check,) = check_memory(target, [], weights, [1, 8], SEQ_LEN, DEPTH, mtp_layers=0)
    assert check.status == "error" and "does not fit even at batch 1" in check.message


def test_unknown_sizes_are_warnings(tmp_path) -> None:
    moe = read_model(write_model(tmp_path / "m", llama_config(num_local_experts=8), weights=False), "m")
    (check,) = check_memory(moe, [], 10**12, [1], SEQ_LEN, DEPTH, mtp_layers=0)
    assert check.status == "warn" and "weight size unknown" in check.message
