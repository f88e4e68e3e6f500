"""Memory fit of a target and its drafts on the GPU: the largest batch of each configuration."""

from __future__ import annotations

from autotune.models.fit import MEMORY_MARGIN, largest_concurrency, usable_bytes
from autotune.models.folder import read_model
from autotune.models.footprint import folder_footprint
from autotune.preflight.memory import check_memory
from hf_model_factory import llama_config, write_model

SEQ_LEN = 1000
DEPTH = 3


def capacity(memory: int, weights: int, per_token: int, logits: int, depth: int = 0) -> int:
    """Sequences of SEQ_LEN tokens and depth + 1 positions ahead, each with one position's logits."""
    return largest_concurrency(usable_bytes(memory), weights, (SEQ_LEN + depth + 1) * per_token + logits)


def test_fits_reports_the_largest_concurrency_for_each_configuration(tmp_path) -> None:
    target = read_model(write_model(tmp_path / "t", llama_config(num_nextn_predict_layers=1)), "t")
    draft = read_model(write_model(tmp_path / "d", llama_config(num_hidden_layers=1)), "d")
    own, theirs = folder_footprint(target), folder_footprint(draft)
    logits = own.vocab_size * own.dtype_bytes
    memory = 100_000_000
    checks = check_memory(target, [("d", draft)], memory, [1, 8, 64], SEQ_LEN, DEPTH)
    assert [(c.subject, c.status) for c in checks] == [("target", "ok"), ("d", "ok")]
    none, mtp = checks[0].details["configurations"]
    assert none["largest_concurrency"] == capacity(memory, own.weight_bytes, own.kv_bytes_per_token, logits)
    assert mtp["largest_concurrency"] == capacity(memory, own.weight_bytes, own.kv_bytes_per_token + own.mtp_bytes_per_token,
                                            logits, DEPTH)
    (pair,) = checks[1].details["configurations"]
    assert pair["largest_concurrency"] == capacity(memory, own.weight_bytes + theirs.weight_bytes,
                                             own.kv_bytes_per_token + theirs.kv_bytes_per_token, logits, DEPTH)
    assert pair["largest_concurrency"] < none["largest_concurrency"]  # the draft's weights and KV cache cost room
    assert f"none up to concurrency {none['largest_concurrency']}" in checks[0].message


def test_too_small_gpus(tmp_path) -> None:
    target = read_model(write_model(tmp_path / "t"), "t")
    own = folder_footprint(target)
    per_sequence = (SEQ_LEN + 1) * own.kv_bytes_per_token + own.vocab_size * own.dtype_bytes
    tight = int((own.weight_bytes + 4 * per_sequence) / (1 - MEMORY_MARGIN)) + 1  # room for 4 sequences
    (check,) = check_memory(target, [], tight, [1, 8], SEQ_LEN, DEPTH)
    assert check.status == "warn" and "none up to concurrency 4" in check.message
    (check,) = check_memory(target, [], own.weight_bytes, [1, 8], SEQ_LEN, DEPTH)
    assert check.status == "error" and "does not fit even at concurrency 1" in check.message


def test_unknown_sizes_are_warnings(tmp_path) -> None:
    moe = read_model(write_model(tmp_path / "m", llama_config(num_local_experts=8), weights=False), "m")
    (check,) = check_memory(moe, [], 10**12, [1], SEQ_LEN, DEPTH)
    assert check.status == "warn" and "weight size unknown" in check.message
