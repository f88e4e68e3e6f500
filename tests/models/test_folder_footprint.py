"""A model folder's footprint: weights and KV cache bytes per token, from its headers and config.json."""

from __future__ import annotations

from autotune.models.folder import read_model
from autotune.models.footprint import estimated_weight_bytes, folder_footprint, kv_bytes_per_layer
from hf_model_factory import llama_config, parameter_count, write_model


def test_weights_are_read_from_the_safetensors_headers(tmp_path) -> None:
    target = read_model(write_model(tmp_path / "t"), "t")
    assert target.weights.n_params == parameter_count(llama_config())
    assert target.weights.n_bytes == 2 * target.weights.n_params  # 16-bit tensors
    assert folder_footprint(target).weight_bytes == target.weights.n_bytes and not folder_footprint(target).weights_estimated


def test_without_safetensors_weights_are_estimated_from_the_config(tmp_path) -> None:
    target = read_model(write_model(tmp_path / "t", weights=False), "t")
    assert estimated_weight_bytes(target) == 2 * parameter_count(llama_config())  # the same shapes, counted
    assert folder_footprint(target).weights_estimated
    moe = read_model(write_model(tmp_path / "m", llama_config(num_local_experts=8), weights=False), "m")
    assert estimated_weight_bytes(moe) is None


def test_kv_cache_bytes_per_token(tmp_path) -> None:
    gqa = read_model(write_model(tmp_path / "g", weights=False), "g")
    assert kv_bytes_per_layer(gqa) == 2 * 2 * 8 * 2  # keys + values, 2 KV heads, head_dim 32/4, bf16
    assert folder_footprint(gqa).kv_bytes_per_token == 2 * 64
    explicit = read_model(write_model(tmp_path / "e", llama_config(head_dim=16, num_key_value_heads=None), weights=False), "e")
    assert kv_bytes_per_layer(explicit) == 2 * 4 * 16 * 2  # no num_key_value_heads: one KV head per head
    mla = read_model(write_model(tmp_path / "m", llama_config(kv_lora_rank=512, qk_rope_head_dim=64), weights=False), "m")
    assert kv_bytes_per_layer(mla) == (512 + 64) * 2  # DeepSeek-V3: compressed latent + RoPE key
    fp32 = read_model(write_model(tmp_path / "f", llama_config(torch_dtype="float32"), weights=False), "f")
    assert kv_bytes_per_layer(fp32) == 2 * kv_bytes_per_layer(gqa)


def test_mtp_state_is_one_layer_of_kv_per_module_and_unknown_sizes_are_zero(tmp_path) -> None:
    target = folder_footprint(read_model(write_model(tmp_path / "t", llama_config(num_nextn_predict_layers=2)), "t"))
    assert target.n_mtp == 2 and target.mtp_bytes_per_token == 2 * target.kv_bytes_per_token // 2  # 2 layers, 2 modules
    moe = folder_footprint(read_model(write_model(tmp_path / "m", llama_config(num_local_experts=8), weights=False), "m"))
    assert moe.weight_bytes == 0 and not moe.weights_known and moe.kv_known
