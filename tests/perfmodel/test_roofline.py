"""The roofline: model shapes from both kinds of stored config, the memory-bound and compute-bound
regimes (the reason speculation loses at large batches), the cost profile the performance model
reads unchanged, and the accelerator catalog."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.errors import ConfigurationError
from autotune.hardware.catalog import GIB, ACCELERATORS, AcceleratorSpec, accelerator, accelerator_for_gpu
from autotune.perfmodel.acceptance import AcceptanceCurve, PositionCounts
from autotune.perfmodel.cost import CostPoint, CostProfile
from autotune.perfmodel.model import PerformanceModel
from autotune.perfmodel.roofline import (
    ROOFLINE_SPREAD,
    CostGrid,
    ModelShape,
    PassPart,
    forward_pass,
    roofline_cost,
    target_step_s,
)
from autotune.perfmodel.step_costs import grid_concurrencies

BUILTIN_TARGET = {"vocab_size": 259, "d_model": 320, "n_layers": 5, "n_heads": 5, "d_ff": 864, "max_seq_len": 1024,
                  "n_mtp": 2}
BUILTIN_DRAFT = {"vocab_size": 259, "d_model": 128, "n_layers": 2, "n_heads": 4, "d_ff": 384, "max_seq_len": 1024}
# Llama-3-70B's config.json (the keys the preflight stores as the model's config).
LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "num_hidden_layers": 80,
             "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672, "vocab_size": 128256,
             "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
# DeepSeek-V3's (MLA, MoE, one MTP module, FP8 weights).
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "num_hidden_layers": 61,
               "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
               "moe_intermediate_size": 2048, "n_routed_experts": 256, "num_experts_per_tok": 8,
               "first_k_dense_replace": 3, "vocab_size": 129280, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
               "qk_nope_head_dim": 128, "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16",
               "quantization_config": {"quant_method": "fp8"}}


# -- shapes -------------------------------------------------------------------------------------------


def test_shape_of_the_builtin_target_config() -> None:
    shape = ModelShape.from_config(BUILTIN_TARGET)
    assert (shape.layers, shape.d_model, shape.heads, shape.kv_heads, shape.head_dim, shape.d_ff, shape.vocab,
            shape.n_mtp) == (5, 320, 5, 5, 64, 864, 259, 2)
    assert shape.bytes_per_param == 2  # bf16 unless told otherwise
    # 5 layers + 2 MTP modules of (4 C^2 attention + 3 C d_ff gated MLP), the MTP projections, embedding and head.
    layer = 4 * 320 ** 2 + 3 * 320 * 864
    assert shape.total_params == 5 * layer + 2 * (layer + 2 * 320 ** 2) + 2 * 259 * 320
    assert shape.kv_bytes_per_token == 5 * 2 * 320 * 2
    stored = ModelShape.from_config(BUILTIN_TARGET, params=9_300_000, n_mtp=2)
    assert stored.total_params == 9_300_000  # the stored count (from the weights) wins over the estimate
    assert ModelShape.from_config(BUILTIN_DRAFT).n_mtp == 0


def test_shape_of_a_hugging_face_config() -> None:
    llama = ModelShape.from_config(LLAMA_70B)
    assert (llama.layers, llama.heads, llama.kv_heads, llama.head_dim, llama.n_mtp) == (80, 64, 8, 128, 0)
    assert llama.total_params == pytest.approx(70.55e9, rel=0.02)
    assert llama.kv_bytes_per_token == 80 * 2 * 8 * 128 * 2  # GQA: 8 KV heads, bf16
    nested = ModelShape.from_config({"architectures": ["Mllama"], "text_config": LLAMA_70B})
    assert nested.total_params == llama.total_params  # multimodal configs nest the LLM in text_config

    deepseek = ModelShape.from_config(DEEPSEEK_V3, params=684_531_386_000)
    assert deepseek.n_mtp == 1 and deepseek.bytes_per_param == 1  # FP8 weights
    assert deepseek.kv_elements_per_layer == 512 + 64  # MLA: one latent and one RoPE key per layer
    assert deepseek.experts == 256 and deepseek.experts_per_token == 8 and deepseek.moe_layers == 58
    # A decoding step of one token reads the dense part and the 8 routed experts: ~37B "active" parameters.
    one_token = forward_pass(accelerator("b200"), deepseek, 1, 1, 0, PassPart(head=False))
    assert one_token.bytes == pytest.approx(37e9, rel=0.1)


def test_a_config_without_sizes_is_refused() -> None:
    with pytest.raises(ValueError, match="hidden_size"):
        ModelShape.from_config({"architectures": ["LlamaForCausalLM"], "vocab_size": 32000})


# -- regimes ------------------------------------------------------------------------------------------


def test_verify_is_memory_bound_at_batch_1_and_compute_bound_at_a_large_batch() -> None:
    h200, shape = accelerator("h200"), ModelShape.from_config(LLAMA_70B)
    one, four = (forward_pass(h200, shape, 1, k, 1024) for k in (1, 4))
    assert one.bound == four.bound == "memory"
    assert four.seconds == pytest.approx(one.seconds, rel=0.02)  # 4 tokens per row cost ~ one step
    assert one.memory_s == pytest.approx(141e9 / 4.8e12, rel=0.05)  # the weights read once at 4.8 TB/s
    # plus the CUDA-graph floor per pass and every kernel's latency (80 layers x 10, the pass's ends 3)
    assert one.overhead_s == pytest.approx((20 + (80 * 10 + 3) * 3.5) * 1e-6)
    one, four = (forward_pass(h200, shape, 1024, k, 512) for k in (1, 4))
    assert one.bound == four.bound == "compute"
    assert four.seconds / one.seconds == pytest.approx(4, rel=0.05)  # ~k steps
    # In between, the ratio climbs from 1 to k as the batch grows.
    ratios = [target_step_s(h200, shape, b, 4, 1024) / target_step_s(h200, shape, b, 1, 1024) for b in (1, 16, 64, 256, 1024)]
    assert ratios == sorted(ratios)


def test_kernels_per_layer_by_architecture_and_the_latency_floor_of_a_small_batch() -> None:
    dense, deepseek = ModelShape.from_config(LLAMA_70B), ModelShape.from_config(DEEPSEEK_V3)
    assert dense.kernels_per_layer == 10  # GQA attention 6 + MLP 4
    assert deepseek.kernels_per_layer == pytest.approx(10 + (58 * 11 + 3 * 4) / 61)  # MLA 10 + MoE 11 (dense 4)
    assert ModelShape.from_config(BUILTIN_TARGET).kernels_per_layer == 14  # the embedded engine's eager ops
    b200 = replace(accelerator("b200"), dtype="fp4", tp=8)
    step = forward_pass(b200, replace(deepseek, bytes_per_param=0.5625), 1, 1, 2048)
    assert step.overhead_s > 5 * step.memory_s  # 1-4 tokens: kernels x latency, not bytes / bandwidth


def test_kv_cache_reads_grow_with_batch_and_context() -> None:
    h200, shape = accelerator("h200"), ModelShape.from_config(LLAMA_70B)
    short, long = (forward_pass(h200, shape, 64, 1, context) for context in (128, 4096))
    assert long.bytes - short.bytes == pytest.approx(64 * (4096 - 128) * shape.kv_bytes_per_token)


# -- the cost profile -----------------------------------------------------------------------------------


def curve(*rates: float) -> AcceptanceCurve:
    return AcceptanceCurve("p", tuple(PositionCounts(10_000, round(10_000 * r), 10_000) for r in rates))


def test_roofline_cost_feeds_the_performance_model_unchanged() -> None:
    target, draft = ModelShape.from_config(BUILTIN_TARGET), ModelShape.from_config(BUILTIN_DRAFT)
    cost = roofline_cost(accelerator("h200"), target, {"tiny": draft}, CostGrid([1, 8], [1, 2, 3]), 200, 60)
    assert isinstance(cost, CostProfile) and cost.source == "roofline"
    assert cost.spread == ROOFLINE_SPREAD  # a roofline's fixed uncertainty, not a timing spread of 0
    assert set(cost.proposers()) == {("none", None), ("mtp", None), ("ngram", None), ("draft", "tiny")}
    assert sorted({p.concurrency for p in cost.points}) == [1, 2, 4, 8]  # 1 and the powers of two between
    ngram = [p for p in cost.points if p.method == "ngram"]
    assert all(p.propose_s == 0 for p in ngram)  # a host-side lookup
    mtp = {p.depth: p for p in cost.points if p.method == "mtp" and p.concurrency == 1}
    assert mtp[3].propose_s == pytest.approx(3 * mtp[1].propose_s)  # one module pass per drafted token
    curves = {("mtp", None): curve(0.8, 0.6, 0.4), ("ngram", None): curve(0.3, 0.2, 0.1),
              ("draft", "tiny"): curve(0.6, 0.4, 0.3)}
    model = PerformanceModel(cost, curves, [60] * 16, [100] * 16)
    base = model.predict("none", None, 0, 8)
    mtp3 = model.predict("mtp", None, 3, 8)
    assert mtp3.tokens_per_s > base.tokens_per_s
    assert mtp3.low < mtp3.tokens_per_s < mtp3.high and mtp3.sigmas["cost"] == ROOFLINE_SPREAD
    assert model.predict("draft", "tiny", 2, 1) is not None


def test_speculation_pays_at_batch_1_and_loses_at_a_large_batch_for_a_70b_model() -> None:
    shape = ModelShape.from_config(LLAMA_70B)
    grid = CostGrid([1, 1024], [1, 2, 3, 4], methods=["none", "ngram"])
    cost = roofline_cost(accelerator("h200"), shape, {}, grid, 1000, 500)
    speedup = {}
    for b in (1, 1024):
        requests = 2 * b  # enough to keep b rows busy
        model = PerformanceModel(cost, {("ngram", None): curve(0.6, 0.4, 0.3, 0.2)}, [500] * requests, [200] * requests)
        speedup[b] = model.predict("ngram", None, 4, b).tokens_per_s / model.predict("none", None, 0, b).tokens_per_s
    assert speedup[1] > 2
    assert speedup[1024] < 1


def test_grid_concurrencies_are_checked() -> None:
    assert grid_concurrencies([3, 12]) == [1, 2, 3, 4, 8, 12]
    with pytest.raises(ConfigurationError):
        grid_concurrencies([0])


# -- the catalog --------------------------------------------------------------------------------------


def test_catalog_has_the_common_accelerators_with_datasheet_figures() -> None:
    expected = {"h100-sxm": (80 * GIB, 3350, 989.4), "h200": (141 * GIB, 4800, 989.4), "b200": (180 * GIB, 8000, 2250),
                "a100-80gb": (80 * GIB, 2039, 312), "l40s": (46_068 << 20, 864, 362.05),  # GDDR: as NVML reports it
                "gh200": (144 * GIB, 4900, 989.4), "gb200": (186 * GIB, 8000, 2500), "b300": (288 * GIB, 8000, 2250),
                "h20": (96 * GIB, 4000, 148)}
    for name, (memory, bandwidth, tflops) in expected.items():
        spec = accelerator(name)
        assert (spec.memory_bytes, spec.memory_bw_gbps, spec.bf16_tflops, spec.fp16_tflops) == (
            memory, bandwidth, tflops, tflops)
        assert spec.interconnect_gbps
        assert spec.fp8_tflops is None if name.startswith("a100") else spec.fp8_tflops == pytest.approx(2 * tflops,
                                                                                                       rel=0.02)
        assert spec.pass_overhead_us > 0 and spec.kernel_latency_us > 0 and spec.dtype_bytes == 2
    assert accelerator(" H200 ") == ACCELERATORS["h200"]
    assert accelerator_for_gpu("NVIDIA H200").memory_bw_gbps == 4800
    assert accelerator_for_gpu("NVIDIA Quadro") is None
    assert accelerator("b200").fp4_tflops == 9000 and accelerator("h200").fp4_tflops is None
    assert accelerator("a100-80gb").fp8_tflops is None


def test_fp8_and_fp4_peaks_and_bytes_per_element() -> None:
    spec = accelerator("b200")
    assert replace(spec, dtype="fp8").peak_tflops == 4500 and replace(spec, dtype="fp8").dtype_bytes == 1
    assert replace(spec, dtype="fp4").dtype_bytes == 0.5625  # NVFP4: one FP8 scale per 16 values
    with pytest.raises(ValueError, match="fp4"):
        replace(accelerator("h200"), dtype="fp4")  # Hopper has no FP4 tensor cores


def test_unknown_hardware_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as error:
        accelerator("tpu-v5")
    message = str(error.value)
    assert "\n" not in message and "tpu-v5" in message
    assert all(name in message for name in ("h100-sxm", "h200", "b200", "a100-80gb", "l40s"))


def test_a_cpu_spec_computes_in_fp32() -> None:
    spec = AcceleratorSpec("cpu", 16 * GIB, 20.0, None, None, fp32_tflops=0.5, dtype="fp32", device_type="cpu")
    assert spec.peak_tflops == 0.5 and spec.dtype_bytes == 4
    with pytest.raises(ValueError):
        AcceleratorSpec("cpu", 16 * GIB, 20.0, None, None, dtype="fp32")  # no FLOP/s to roof with


def test_an_untimed_cost_profile_has_no_spread_unless_given() -> None:
    points = [CostPoint("none", None, 0, 1, 0.0, 0.01, 0.001, 10)]
    assert CostProfile(points, "roofline").spread == 0.0
    assert CostProfile(points, "roofline", spread=0.25).spread == 0.25


# -- tensor parallelism, MLA, MoE ---------------------------------------------------------------------

# The whole published config (q_lora_rank, v_head_dim, shared experts), FP8 weights.
DEEPSEEK_V3_FULL = json.loads((Path(__file__).parents[1] / "data" / "configs" / "deepseek-v3.json").read_text())


def test_deepseek_v3_shape_mla_and_moe() -> None:
    shape = ModelShape.from_config(DEEPSEEK_V3_FULL)
    assert shape.total_params == pytest.approx(671e9 + 14e9, rel=0.01)  # main model + the MTP module
    assert shape.kv_elements_per_layer == 576 and not shape.kv_split  # latent + RoPE key, replicated under TP
    assert shape.attention_width == 576 + 512  # 2.8x the 2 * 192 of a per-head head_dim
    spec = accelerator("h200")
    one, two = (forward_pass(spec, shape, 1, 1, context, PassPart(layers=1)) for context in (4096, 8192))
    attention_per_context = (two.flops - one.flops) / 4096
    assert attention_per_context == pytest.approx(2 * 128 * (576 + 512))


def test_moe_reads_the_distinct_experts_a_batch_touches() -> None:
    shape = ModelShape.from_config(DEEPSEEK_V3_FULL)
    spec = accelerator("h200")
    bytes_at = {rows: forward_pass(spec, shape, rows, 1, 0).bytes for rows in (1, 8, 1024)}
    expert_bytes = shape.layer_params * shape.expert_fraction * shape.layers * shape.bytes_per_param
    dense_bytes = bytes_at[1] - expert_bytes * 8 / 256
    for rows, value in bytes_at.items():  # E (1 - (1 - k/E)^T) of E experts
        assert value == pytest.approx(dense_bytes + expert_bytes * (1 - (1 - 8 / 256) ** rows), rel=1e-6)
    assert bytes_at[1024] > 5 * bytes_at[1]  # a large batch reads nearly every expert


def test_tensor_parallelism_splits_weights_and_kv_and_adds_all_reduces() -> None:
    shape = ModelShape.from_config(LLAMA_70B)
    one, two = accelerator("h200"), replace(accelerator("h200"), tp=2)
    single, split = forward_pass(one, shape, 8, 1, 2048), forward_pass(two, shape, 8, 1, 2048)
    assert split.bytes == pytest.approx(single.bytes / 2) and split.flops == pytest.approx(single.flops / 2)
    assert single.comm_s == 0 and split.comm_s > 0
    assert shape.footprint("x", 2).weight_bytes == pytest.approx(shape.footprint("x").weight_bytes / 2, abs=1)
    assert shape.kv_share(16) == 1 / 8  # 8 KV heads: beyond 8 GPUs they are replicated
    with pytest.raises(ConfigurationError, match="interconnect"):
        forward_pass(replace(accelerator("h200"), tp=2, interconnect_gbps=None), shape, 1, 1, 10)
