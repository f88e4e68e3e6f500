"""Roofline step costs: what a decoding step would cost on a device nobody has timed here.

A forward pass over ``rows`` sequences, ``n`` new tokens each, attending to ``context`` cached
tokens per row (DESIGN.md section 3)::

    time  = max(bytes / bandwidth, flops / peak) + overhead
    bytes = weights read once + rows * context * KV bytes per token         (the KV cache read)
    flops = 2 * params * rows * n + 2 * rows * n * context * heads * (qk + v) per layer  (attention)
    KV bytes per token = layers * 2 * kv_heads * head_dim * dtype bytes    (MLA: latent + RoPE key)

``qk + v`` is the width of one head's score and value products: ``2 * head_dim`` for ordinary
attention; for MLA (DeepSeek-V2/V3) decoding with the absorbed weights both run against the cached
latent, ``(kv_lora_rank + qk_rope_head_dim) + kv_lora_rank`` = 576 + 512 for DeepSeek-V3, 2.8x the
``2 * 192`` a per-head ``head_dim`` would give.

Tensor parallelism over ``tp`` GPUs (Megatron-style) splits the weights, the FLOPs and the KV heads
(a KV head is not split: with fewer KV heads than GPUs they are replicated; MLA's latent is
replicated on every GPU) and adds two all-reduces of the activations per layer (after attention,
after the MLP), each a ring all-reduce: ``2 (tp - 1) / tp * rows * n * d_model * 2 bytes`` over
one direction of the interconnect (half the datasheet's both-ways figure) plus ``ALLREDUCE_LATENCY_US``.

Weights and KV cache are read once whatever ``n`` is, which is why verifying k tokens per row
costs about one decoding step while the pass is memory-bound (small batches) and about k steps
once it is compute-bound (large batches): the best depth shrinks as the batch grows (MagicDec).
MoE layers read only the experts the batch's tokens route to and compute with the k routed ones.
With T tokens each routed to k of E experts (uniform routing), an expert is missed by one token
with probability 1 - k/E, by all T with (1 - k/E)^T, so the batch touches on average
``E * (1 - (1 - k/E)^T)`` distinct experts and reads that share of the expert weights.

Per configuration, at ``b`` rows (:func:`roofline_cost`):

* none: one target pass, n = 1;
* draft: ``depth`` passes of the draft model (its own shape), n = 1, then the target verifying
  n = depth + 1;
* mtp: ``depth`` MTP module passes (one decoder layer plus the projection and the shared head,
  run inside the target's graph: no per-pass overhead), then the target verifying depth + 1;
* ngram: the proposal is a host-side lookup (~0), then the target verifying depth + 1;
* prefill: ``b`` prompts through the target (and the draft model, or the MTP modules used).

``overhead`` is the engine's per-pass step overhead plus every kernel's latency floor::

    overhead = pass overhead + kernels x kernel latency
    kernels  = layers x kernels per layer + pass-end kernels (+ an MTP module's input kernels)

A kernel costs at least the spec's ``kernel_latency_us`` (:mod:`autotune.hardware.catalog`) on top
of its bytes and FLOPs (a latency-plus-bandwidth model of each kernel), so at 1-4 tokens per row a
model with many small kernels per layer (MLA and MoE: ~21, a dense layer: 10) is bounded by its
kernel count, not its bytes. Bandwidth and
FLOP/s are the peaks times the achieved fractions of the spec (:mod:`autotune.perfmodel.calibration`,
1.0 for an uncalibrated spec).

Pure Python: the planner (:mod:`autotune.planning`) builds the shapes from stored model configs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from autotune.errors import ConfigurationError
from autotune.hardware.catalog import AcceleratorSpec
from autotune.models.folder import CONFIG_DTYPE_BYTES, DEFAULT_DTYPE_BYTES, config_dtype, config_param
from autotune.models.footprint import UNBOUNDED_CONTEXT, ModelFootprint
from autotune.models.kind import mtp_layers
from autotune.models.layers import moe_layout
from autotune.models.quantization import weight_bytes_per_param
from autotune.perfmodel.cost import BASELINE, CostProfile
from autotune.perfmodel.step_costs import cost_profile

# One-sigma relative uncertainty of a roofline step time. The roofline takes peak bandwidth and
# FLOP/s, which real kernels reach only in part (decoding GEMVs typically 70-90 % of the peak
# bandwidth, small GEMMs and attention much less of the FLOP/s), and its launch overhead is an
# assumption; 25 % covers that range. It is an assumption, not a fit: no measurement backs it.
ROOFLINE_SPREAD = 0.25
# Activations cross the interconnect in the compute dtype of activations (bf16) whatever the weights'.
ACTIVATION_BYTES = 2
# A small-message all-reduce's fixed cost on NVLink, charged per call on top of its bytes (an
# assumption, not a measurement): nccl-tests with CUDA graphs report ~6 us at 2 H100s for 128 B-64 KB
# with NVLS, rising with the GPU count (NVIDIA/nccl#1259); NCCL's ring/tree without graphs is
# 10-30 us; serving engines use their own one-shot all-reduce kernels at these sizes (TensorRT-LLM's
# custom all-reduce, vLLM's custom_all_reduce), of the graph-captured NCCL's order. 8 us.
ALLREDUCE_LATENCY_US = 8.0

# Kernels one decoder layer launches at decode (module doc), counted from the operations as serving
# engines implement them (vLLM's models/llama.py and models/deepseek_v2.py, TensorRT-LLM's modeling
# files); the all-reduces of tensor parallelism are charged apart (ALLREDUCE_LATENCY_US):
# - attention (GQA): input RMSNorm fused with the residual add, QKV GEMM, RoPE, KV-cache write,
#   attention, O GEMM: 6;
# - MLA (DeepSeek-V2/V3, absorbed weights): RMSNorm, fused q_a/kv_a GEMM, the q_a and kv_a RMSNorms,
#   q_b GEMM, the W_UK BMM, RoPE with the cache write, MLA attention, the W_UV BMM, O GEMM: 10;
# - dense MLP: RMSNorm, gate-up GEMM, SiLU-and-mul, down GEMM: 4;
# - MoE: RMSNorm, router GEMM, top-k, the shared expert (gate-up GEMM, SiLU-and-mul, down GEMM), the
#   routed experts (permute and quantise, grouped GEMM, activation, grouped GEMM, unpermute and
#   weighted sum): 11;
# - the embedded engine's layer (built-in models, eager PyTorch): 14 ops.
ATTENTION_KERNELS, MLA_KERNELS, MLP_KERNELS, MOE_KERNELS, EMBEDDED_LAYER_KERNELS = 6, 10, 4, 11, 14
# A pass's ends: the embedding lookup, the final RMSNorm and the LM-head GEMM (sampling is the
# engine's step overhead); an MTP module's input: the two RMSNorms and the projection of [h; e].
PASS_END_KERNELS = 3
MTP_INPUT_KERNELS = 3



@dataclass(frozen=True)
class ModelShape:
    """What the roofline needs of a transformer (see the module doc).

    ``params`` counts every weight (embeddings and MTP modules included; None: estimated from the
    shape); ``bytes_per_param`` and ``kv_bytes`` are the weights' and the KV cache's bytes per
    element; ``kv_width``: cached elements per layer and token (None: ``2 * kv_heads * head_dim``;
    MLA caches a latent). MoE: ``experts`` routed experts of ``expert_d_ff`` in ``moe_layers``
    layers, ``experts_per_token`` of them per token (0: dense).
    """

    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    n_mtp: int = 0
    params: int | None = None
    bytes_per_param: float = 2.0
    kv_bytes: float = 2.0
    kv_width: int | None = None
    tied_embeddings: bool = False
    experts: int = 0
    experts_per_token: int = 0
    expert_d_ff: int = 0
    moe_layers: int = 0
    shared_d_ff: int = 0  # the shared experts' MLP width, all of them together
    moe_dense_d_ff: int = 0  # a dense MLP beside the experts in each MoE layer (Gemma-4)
    attention_width: int | None = None  # qk + v of one head's products (None: 2 * head_dim; module doc)
    attention_params: int | None = None  # one layer's attention weights (None: q/k/v/o of the heads)
    kv_split: bool = True  # whether tensor parallelism splits the cache (False for MLA's latent)
    kernels_per_layer: float = ATTENTION_KERNELS + MLP_KERNELS  # on average over the layers (module doc)

    def __post_init__(self) -> None:
        for name in ("layers", "d_model", "heads", "kv_heads", "head_dim", "vocab"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"ModelShape.{name} must be a positive integer, got {value!r}")

    # -- construction ---------------------------------------------------------------------------------

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, params: int | None = None, n_mtp: int | None = None,
                    bytes_per_param: float | None = None, quant: Mapping[str, Any] | None = None) -> ModelShape:
        """The shape of a stored model's ``config``: the built-in models' keys (d_model, n_layers,
        n_heads, d_ff, vocab_size, n_mtp) or a Hugging Face config.json (hidden_size,
        num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
        MoE and MLA keys, :mod:`autotune.models.layers`; ``text_config`` nesting is followed; the
        weights' bytes from its quantisation or ``quant``, its hf_quant_config.json:
        :mod:`autotune.models.quantization`). ValueError when sizes are missing."""
        if "d_model" in config and "n_layers" in config:
            return cls._from_builtin(config, params, n_mtp, bytes_per_param)
        return cls._from_hf(config, params, n_mtp, bytes_per_param, quant)

    @classmethod
    def _from_builtin(cls, config: Mapping[str, Any], params: int | None, n_mtp: int | None,
                      bytes_per_param: float | None) -> ModelShape:
        d, heads = int(config["d_model"]), int(config["n_heads"])
        return cls(layers=int(config["n_layers"]), d_model=d, heads=heads, kv_heads=heads, head_dim=d // heads,
                   d_ff=int(config["d_ff"]), vocab=int(config["vocab_size"]),
                   n_mtp=int(config.get("n_mtp", 0)) if n_mtp is None else n_mtp, params=params,
                   bytes_per_param=bytes_per_param or 2.0, kernels_per_layer=EMBEDDED_LAYER_KERNELS)

    @classmethod
    def _from_hf(cls, config: Mapping[str, Any], params: int | None, n_mtp: int | None,
                 bytes_per_param: float | None, quant: Mapping[str, Any] | None) -> ModelShape:
        def get(name: str, default: Any = None) -> Any:
            return config_param(config, name, default)

        missing = [name for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
                   if not get(name)]
        if missing:
            raise ValueError(f"the model config lacks {', '.join(missing)}: the roofline needs the model's sizes")
        d, layers, heads = int(get("hidden_size")), int(get("num_hidden_layers")), int(get("num_attention_heads"))
        kv_heads = int(get("num_key_value_heads") or heads)
        head_dim = int(get("head_dim") or d // heads)
        kv_width = attention_width = attention_params = None
        if get("kv_lora_rank"):  # MLA (DeepSeek-V2/V3): one latent and one RoPE key per layer
            rank, rope, nope = (int(get(name) or 0) for name in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim"))
            v_dim, q_rank = int(get("v_head_dim") or nope), int(get("q_lora_rank") or 0)
            kv_width = rank + rope
            head_dim = nope + rope or head_dim
            attention_width = kv_width + rank  # scores against latent + RoPE key, values from the latent
            query = d * q_rank + q_rank * heads * head_dim if q_rank else d * heads * head_dim
            attention_params = query + d * kv_width + rank * heads * (nope + v_dim) + heads * v_dim * d
        moe = moe_layout(config, layers, d)
        attention_kernels = MLA_KERNELS if kv_width is not None else ATTENTION_KERNELS
        kernels = attention_kernels + (moe.moe_layers * MOE_KERNELS + (layers - moe.moe_layers) * MLP_KERNELS) / layers
        return cls(layers=layers, d_model=d, heads=heads, kv_heads=kv_heads, head_dim=head_dim, d_ff=moe.dense_d_ff,
                   vocab=int(get("vocab_size")), n_mtp=mtp_layers(config) if n_mtp is None else n_mtp, params=params,
                   bytes_per_param=bytes_per_param or weight_bytes_per_param(config, quant),
                   kv_bytes=float(CONFIG_DTYPE_BYTES.get(config_dtype(config) or "", DEFAULT_DTYPE_BYTES)),
                   kv_width=kv_width, tied_embeddings=bool(get("tie_word_embeddings", False)), experts=moe.experts,
                   experts_per_token=moe.per_token, expert_d_ff=moe.expert_d_ff, moe_layers=moe.moe_layers,
                   shared_d_ff=moe.shared_d_ff, moe_dense_d_ff=moe.moe_dense_d_ff,
                   attention_width=attention_width, attention_params=attention_params, kv_split=kv_width is None,
                   kernels_per_layer=kernels)

    def with_dtype(self, dtype_bytes: float) -> ModelShape:
        """The same model computed (weights and KV cache) in a dtype of ``dtype_bytes`` bytes."""
        return replace(self, bytes_per_param=dtype_bytes, kv_bytes=dtype_bytes)

    # -- sizes ------------------------------------------------------------------------------------------

    @property
    def kv_elements_per_layer(self) -> int:
        return self.kv_width if self.kv_width is not None else 2 * self.kv_heads * self.head_dim

    @property
    def kv_bytes_per_token(self) -> float:
        """KV cache bytes per token and sequence of the main layers."""
        return self.layers * self.kv_elements_per_layer * self.kv_bytes

    @property
    def mtp_kv_bytes_per_token(self) -> float:
        """KV cache bytes per token of one MTP module (one decoder layer)."""
        return self.kv_elements_per_layer * self.kv_bytes

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.d_model

    def _estimated_layer_params(self, moe: bool) -> int:
        """One decoder layer: attention, and a gated MLP of 3 matrices (gate, up, down) — for a MoE
        layer the routed and shared experts of ``expert_d_ff`` and the router."""
        attention = self.attention_params or (2 * self.d_model * self.heads * self.head_dim
                                              + 2 * self.d_model * self.kv_heads * self.head_dim)
        if moe:
            experts = self.experts * self.expert_d_ff + self.shared_d_ff + self.moe_dense_d_ff
            return attention + 3 * self.d_model * experts + self.d_model * self.experts
        return attention + 3 * self.d_model * self.d_ff

    @property
    def total_params(self) -> int:
        """Every weight: the stored count, else the shape's estimate (an MTP module is a MoE layer
        when the model has any, plus its projection)."""
        if self.params:
            return int(self.params)
        moe_layers = self.moe_layers if self.experts else 0
        body = (moe_layers * self._estimated_layer_params(True)
                + (self.layers - moe_layers) * self._estimated_layer_params(False))
        head = 0 if self.tied_embeddings else self.embedding_params
        module = self._estimated_layer_params(bool(self.experts)) + 2 * self.d_model ** 2
        return body + self.embedding_params + head + self.n_mtp * module

    @property
    def layer_params(self) -> float:
        """One decoder layer's weights, on average (MLA, MoE and odd layers included), from the total."""
        head = 0 if self.tied_embeddings else self.embedding_params
        body = self.total_params - self.embedding_params - head - self.n_mtp * 2 * self.d_model ** 2
        return max(body / (self.layers + self.n_mtp), 1.0)

    @property
    def expert_fraction(self) -> float:
        """The share of an average layer's weights in routed experts (0 for a dense model)."""
        if not self.experts or not self.experts_per_token:
            return 0.0
        routed = self.moe_layers * self.experts * 3 * self.d_model * self.expert_d_ff
        return min(routed / (self.layer_params * self.layers), 0.99)

    @property
    def mtp_module_params(self) -> float:
        """One MTP module: a decoder layer and the projection of [hidden; embedding] (the head is shared)."""
        return self.layer_params + 2 * self.d_model ** 2

    def weight_bytes(self, with_mtp: bool = True) -> float:
        """Bytes of the weights in memory (the MTP modules only when they are used)."""
        params = self.total_params - (0 if with_mtp else self.n_mtp * self.mtp_module_params)
        return params * self.bytes_per_param

    def kv_share(self, tp: int) -> float:
        """The share of the KV cache one of ``tp`` GPUs holds and reads (module doc)."""
        return 1.0 / min(tp, self.kv_heads) if self.kv_split else 1.0

    def footprint(self, name: str, tp: int = 1) -> ModelFootprint:
        """The shape's memory on one of ``tp`` GPUs as the tuner and the preflight size a model (one
        estimate for all three, :mod:`autotune.models.fit`): the whole checkpoint's weights, MTP
        modules included, and every MTP module's cache; bytes rounded up to whole bytes."""
        kv = self.kv_share(tp)
        return ModelFootprint(
            path=name, dtype_bytes=math.ceil(self.kv_bytes), n_params=self.total_params,
            weight_bytes=math.ceil(self.weight_bytes() / tp), kv_bytes_per_token=math.ceil(self.kv_bytes_per_token * kv),
            mtp_bytes_per_token=math.ceil(self.n_mtp * self.mtp_kv_bytes_per_token * kv), n_mtp=self.n_mtp,
            vocab_size=self.vocab, max_seq_len=UNBOUNDED_CONTEXT, config={},
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_params": self.total_params, "kv_bytes_per_token": self.kv_bytes_per_token}


# -- one pass -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PassTime:
    """The roofline of one forward pass: bytes, FLOPs, and the times they take."""

    bytes: float
    flops: float
    memory_s: float
    compute_s: float
    overhead_s: float
    comm_s: float = 0.0  # tensor parallelism's all-reduces (not overlapped with the layers' work)

    @property
    def seconds(self) -> float:
        return max(self.memory_s, self.compute_s) + self.overhead_s + self.comm_s

    @property
    def bound(self) -> str:
        """``"memory"`` or ``"compute"``: which roof the pass sits under."""
        return "memory" if self.memory_s >= self.compute_s else "compute"


@dataclass(frozen=True)
class PassPart:
    """Which part of a model a pass runs: ``layers`` decoder layers (None: all), the head or not,
    ``extra_params`` dense weights besides (an MTP module's projection, with its input kernels);
    ``pass_overhead``: the pass is launched on its own (False for MTP modules, which run inside the
    target's graph)."""

    layers: float | None = None
    head: bool = True
    extra_params: float = 0.0
    pass_overhead: bool = True


def forward_pass(spec: AcceleratorSpec, shape: ModelShape, rows: int, tokens: float, context: float,
                 part: PassPart = PassPart()) -> PassTime:
    """``rows`` sequences through the ``part`` of the model, ``tokens`` new tokens per row attending
    to ``context`` cached ones (module doc)."""
    layers, head, extra_params = part.layers, part.head, part.extra_params
    n_layers = shape.layers if layers is None else layers
    total_tokens = rows * tokens
    layer = shape.layer_params
    expert = layer * shape.expert_fraction
    dense = layer - expert
    if expert:
        share = shape.experts_per_token / shape.experts
        touched = 1.0 - (1.0 - share) ** total_tokens  # distinct experts touched / E (module doc)
        read_layer, compute_layer = dense + expert * touched, dense + expert * share
    else:
        read_layer = compute_layer = layer
    head_params = shape.embedding_params if head else 0
    weights = n_layers * read_layer + head_params + extra_params
    matmul = n_layers * compute_layer + head_params + extra_params
    tp = spec.tp
    kv_read = rows * context * n_layers * shape.kv_elements_per_layer * shape.kv_bytes * shape.kv_share(tp)
    width = shape.attention_width or 2 * shape.head_dim
    attention = 2 * total_tokens * context * n_layers * shape.heads * width
    num_bytes = weights * shape.bytes_per_param / tp + kv_read
    flops = (2 * matmul * total_tokens + attention) / tp
    kernels = n_layers * shape.kernels_per_layer + (PASS_END_KERNELS if head else 0) \
        + (MTP_INPUT_KERNELS if extra_params else 0)
    overhead_us = (spec.pass_overhead_us if part.pass_overhead else 0.0) + kernels * spec.kernel_latency_us
    comm_s = 0.0
    if tp > 1:
        if not spec.interconnect_gbps:
            raise ConfigurationError(f"{spec.name} has no interconnect bandwidth in the catalog: it cannot plan --tp {tp}")
        message = total_tokens * shape.d_model * ACTIVATION_BYTES
        one_way = spec.interconnect_gbps * 1e9 / 2
        comm_s = 2 * n_layers * (2 * (tp - 1) / tp * message / one_way + ALLREDUCE_LATENCY_US * 1e-6)
    return PassTime(num_bytes, flops, num_bytes / (spec.achieved_bw_gbps * 1e9), flops / (spec.achieved_tflops * 1e12),
                    overhead_us * 1e-6, comm_s)


def target_step_s(spec: AcceleratorSpec, target: ModelShape, rows: int, tokens: float, context: float) -> float:
    """The target verifying ``tokens`` per row (1: a plain decoding step)."""
    return forward_pass(spec, target, rows, tokens, context).seconds


def mtp_token_s(spec: AcceleratorSpec, target: ModelShape, rows: int, context: float) -> float:
    """One MTP module drafting one token per row: a layer, the projection and the shared head."""
    part = PassPart(layers=1, extra_params=2 * target.d_model ** 2, pass_overhead=False)
    return forward_pass(spec, target, rows, 1, context, part).seconds


def prefill_s(spec: AcceleratorSpec, shape: ModelShape, rows: int, prompt_tokens: int, *,
              layers: float | None = None, pass_overhead: bool = True) -> float:
    """``rows`` prompts of ``prompt_tokens`` through the model (each token attends to half the
    prompt on average)."""
    extra = 2 * shape.d_model ** 2 if layers is not None else 0.0
    part = PassPart(layers=layers, extra_params=extra, pass_overhead=pass_overhead)
    return forward_pass(spec, shape, rows, prompt_tokens, prompt_tokens / 2, part).seconds


# -- the cost profile ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RooflinePricer:
    """The parts of a step (:mod:`autotune.perfmodel.step_costs`) priced by the roofline of ``spec``:
    ``context`` cached tokens a row attends to while decoding, ``prompt`` tokens it prefills."""

    spec: AcceleratorSpec
    target: ModelShape
    draft_shapes: Mapping[str, ModelShape]
    context: float
    prompt: int

    @property
    def n_mtp(self) -> int:
        return self.target.n_mtp

    @property
    def drafts(self) -> list[str]:
        return list(self.draft_shapes)

    def target_s(self, rows: int, tokens: int) -> float:
        return target_step_s(self.spec, self.target, rows, tokens, self.context)

    def mtp_token_s(self, rows: int) -> float:
        return mtp_token_s(self.spec, self.target, rows, self.context)

    def draft_token_s(self, label: str, rows: int) -> float:
        return target_step_s(self.spec, self.draft_shapes[label], rows, 1, self.context)

    def prefill_s(self, rows: int) -> float:
        return prefill_s(self.spec, self.target, rows, self.prompt)

    def mtp_prefill_s(self, rows: int, modules: int) -> float:
        return modules * prefill_s(self.spec, self.target, rows, self.prompt, layers=1, pass_overhead=False)

    def draft_prefill_s(self, label: str, rows: int) -> float:
        return prefill_s(self.spec, self.draft_shapes[label], rows, self.prompt)


def default_methods(target: ModelShape, drafts: Mapping[str, ModelShape]) -> set[str]:
    """none, ngram, mtp when the target has MTP modules, draft when drafts are given."""
    return {BASELINE, "ngram", *(("mtp",) if target.n_mtp else ()), *(("draft",) if drafts else ())}


@dataclass(frozen=True)
class CostGrid:
    """The configurations a cost profile prices: every method of ``methods`` (None:
    :func:`default_methods`) at every depth of ``depths`` and concurrency of ``concurrencies``."""

    concurrencies: Iterable[int]
    depths: Iterable[int]
    methods: Iterable[str] | None = None


def roofline_cost(
    spec: AcceleratorSpec,
    target: ModelShape,
    drafts: Mapping[str, ModelShape],
    grid: CostGrid,
    context_tokens: float,
    prompt_tokens: int,
) -> CostProfile:
    """A :class:`CostProfile` (source ``"roofline"``) of the baseline and the ``grid``'s
    configurations (module doc). ``drafts``: draft label -> shape; ``context_tokens``: cached tokens a
    row attends to during decoding (on average); ``prompt_tokens``: the prompt each row prefills (the
    longest)."""
    pricer = RooflinePricer(spec, target, drafts, context_tokens, max(int(prompt_tokens), 1))
    wanted = set(grid.methods) if grid.methods is not None else default_methods(target, drafts)
    return cost_profile(pricer, grid.concurrencies, grid.depths, prompt_tokens, wanted, "roofline", ROOFLINE_SPREAD)
