"""A small decoder-only transformer with DeepSeek-V3-style multi-token-prediction (MTP) modules
and a slot-addressed KV cache, written for fast batch-1 decoding in eager PyTorch.

Architecture: token embedding -> ``n_layers`` pre-norm blocks (RMSNorm, causal self-attention with
RoPE at absolute positions, RMSNorm, SwiGLU MLP) -> final RMSNorm -> linear head.

MTP module k (0-based) at position i combines the previous depth's hidden state h^k_i (h^0 is the
target's last hidden state, before the final norm) with the embedding of token t_{i+k+1}:

    x = W_k [RMSNorm(h^k_i) ; RMSNorm(Emb(t_{i+k+1}))]        # 2C -> C
    h^{k+1}_i = Block_k(x)                                    # one transformer block
    logits = Head(FinalNorm(h^{k+1}_i))                       # predicts t_{i+k+2}

The embedding, final norm and head are the target's own (shared), as in DeepSeek-V3.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

ROPE_BASE = 10000.0
NORM_EPS = 1e-6


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a :class:`CausalLM`; stored as JSON next to the weights."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    max_seq_len: int  # max positions: prompt + generation + speculative slack
    n_mtp: int = 0  # number of MTP modules (0 for a plain LM such as the draft)

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            minimum = 0 if field.name == "n_mtp" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"ModelConfig.{field.name} must be an int >= {minimum}, got {value!r}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"ModelConfig.d_model ({self.d_model}) must split into n_heads ({self.n_heads}) "
                "heads of even size (RoPE rotates pairs)"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        """Inverse of :meth:`to_dict`; rejects unknown or missing keys."""
        known = {field.name for field in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown ModelConfig keys: {sorted(unknown)}")
        return cls(**d)


class KVCache:
    """Per-layer key/value storage for ``batch_size`` independent sequence slots.

    ``k``, ``v``: (n_layers, B, H, S, Dh) tensors, S = capacity; ``lengths``: (B,) long = number of
    valid positions per slot. Entries at or beyond ``lengths[b]`` are garbage and never attended to.
    """

    def __init__(
        self,
        n_layers: int,
        batch_size: int,
        n_heads: int,
        capacity: int,
        head_dim: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        shape = (n_layers, batch_size, n_heads, capacity, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.lengths = torch.zeros(batch_size, device=device, dtype=torch.long)

    @property
    def batch_size(self) -> int:
        return self.k.shape[1]

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def reset(self, slots: torch.Tensor | list[int] | None = None) -> None:
        """Empty the given slots (all slots when ``slots`` is None)."""
        if slots is None:
            self.lengths.zero_()
        else:
            self.lengths[torch.as_tensor(slots, dtype=torch.long, device=self.lengths.device)] = 0

    def nbytes(self) -> int:
        """Bytes held by the key/value storage."""
        return self.k.nbytes + self.v.nbytes


@dataclass
class _Step:
    """What every layer of one forward call needs, computed once per call.

    ``rows`` (B,) are the cache slots of the batch rows (None: slots 0..B-1); ``positions`` (B, T)
    the absolute positions of the new tokens; ``key_len`` how much of the cache attention reads;
    ``mask`` (B, 1, T, key_len) True where a key is visible (None: everything visible).
    """

    rope: torch.Tensor  # complex (B or 1, T, 1, Dh/2)
    rows: torch.Tensor | None = None
    row_index: torch.Tensor | None = None  # (B, T) cache row of every new token
    positions: torch.Tensor | None = None
    key_len: int = 0
    mask: torch.Tensor | None = None
    n_new: torch.Tensor | None = None


def _rope_table(max_seq_len: int, head_dim: int) -> torch.Tensor:
    """exp(i * pos * theta_j), theta_j = base^(-2j/Dh): (max_seq_len, Dh/2) complex64."""
    theta = ROPE_BASE ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), theta)
    return torch.polar(torch.ones_like(angles), angles).to(torch.complex64)


def _apply_rope(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """Rotate consecutive pairs of the last dim of ``x`` (..., Dh) by the angles in ``rope``."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (..., Dh/2)
    return torch.view_as_real(pairs * rope).flatten(-2).type_as(x)


class Attention(nn.Module):
    """Multi-head causal self-attention with RoPE, reading/writing one layer of a KVCache."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.out = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor, step: _Step, cache: KVCache | None, layer: int) -> torch.Tensor:
        B, T, C = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim)
        qk = _apply_rope(qkv[:, :, :2], step.rope.unsqueeze(2))  # (B, T, 2, H, Dh)
        q = qk[:, :, 0].transpose(1, 2)  # (B, H, T, Dh)
        if cache is None:
            k = qk[:, :, 1].transpose(1, 2)
            v = qkv[:, :, 2].transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            k, v = self._store(cache, layer, step, qk[:, :, 1], qkv[:, :, 2])
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=step.mask)
        return self.out(y.transpose(1, 2).reshape(B, T, C))

    @staticmethod
    def _store(
        cache: KVCache, layer: int, step: _Step, k_new: torch.Tensor, v_new: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new (B, T, H, Dh) keys/values at their positions; return the (B, H, key_len, Dh)
        prefix attention reads."""
        keys, values = cache.k[layer], cache.v[layer]  # (B_cache, H, S, Dh)
        # Advanced indices on dims 0 and 2 put the (B, T) index dims first: target is (B, T, H, Dh).
        keys[step.row_index, :, step.positions] = k_new
        values[step.row_index, :, step.positions] = v_new
        if step.rows is None:
            B = k_new.shape[0]
            return keys[:B, :, : step.key_len], values[:B, :, : step.key_len]
        return keys[step.rows, :, : step.key_len], values[step.rows, :, : step.key_len]


class MLP(nn.Module):
    """SwiGLU feed-forward: W2 (silu(W1 x) * W3 x)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_up = nn.Linear(config.d_model, 2 * config.d_ff, bias=False)
        self.down = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(config.d_model, eps=NORM_EPS)
        self.attn = Attention(config)
        self.mlp_norm = nn.RMSNorm(config.d_model, eps=NORM_EPS)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, step: _Step, cache: KVCache | None, layer: int) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), step, cache, layer)
        return x + self.mlp(self.mlp_norm(x))


class MTPModule(nn.Module):
    """One DeepSeek-V3 MTP depth: project [norm(h) ; norm(Emb(next token))] to C, one block."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.hidden_norm = nn.RMSNorm(config.d_model, eps=NORM_EPS)
        self.embed_norm = nn.RMSNorm(config.d_model, eps=NORM_EPS)
        self.proj = nn.Linear(2 * config.d_model, config.d_model, bias=False)
        self.block = Block(config)

    def forward(
        self, hidden: torch.Tensor, next_embed: torch.Tensor, step: _Step, cache: KVCache | None, layer: int
    ) -> torch.Tensor:
        x = self.proj(torch.cat([self.hidden_norm(hidden), self.embed_norm(next_embed)], dim=-1))  # (B, T, C)
        return self.block(x, step, cache, layer)


class CausalLM(nn.Module):
    """Decoder-only LM with optional MTP modules sharing its embedding, final norm and head."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = nn.RMSNorm(config.d_model, eps=NORM_EPS)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.mtp = nn.ModuleList(MTPModule(config) for _ in range(config.n_mtp))
        # Not a buffer: Module.to(dtype) would cast the complex table to real; it follows the device lazily.
        self._rope = _rope_table(config.max_seq_len, config.head_dim)
        self._init_weights()

    def _init_weights(self) -> None:
        # GPT-2 init: N(0, 0.02), residual output projections scaled by 1/sqrt(2 * residual layers).
        residual_std = 0.02 / math.sqrt(2 * (self.config.n_layers + self.config.n_mtp))
        for name, param in self.named_parameters():
            if param.dim() < 2:
                continue
            is_residual_out = name.endswith(("attn.out.weight", "mlp.down.weight"))
            nn.init.normal_(param, mean=0.0, std=residual_std if is_residual_out else 0.02)

    # -- caches -----------------------------------------------------------------------------------

    def _new_kv_cache(self, n_layers: int, batch_size: int, capacity: int | None) -> KVCache:
        capacity = self.config.max_seq_len if capacity is None else capacity
        if not 1 <= capacity <= self.config.max_seq_len:
            raise ValueError(f"cache capacity must be in [1, {self.config.max_seq_len}], got {capacity}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        weight = self.embed.weight
        return KVCache(
            n_layers, batch_size, self.config.n_heads, capacity, self.config.head_dim, weight.device, weight.dtype
        )

    def new_cache(self, batch_size: int, capacity: int | None = None) -> KVCache:
        """Empty KV cache for the main layers, on the model's device and dtype."""
        return self._new_kv_cache(self.config.n_layers, batch_size, capacity)

    def new_mtp_cache(self, batch_size: int, capacity: int | None = None) -> KVCache:
        """Empty KV cache with one layer per MTP module (layer k belongs to module k).

        All modules share its ``lengths``: to run several modules over the same positions, pass
        ``n_new=0`` to all but the last call, so only that one advances the lengths.
        """
        if self.config.n_mtp == 0:
            raise ValueError("this model has no MTP modules (config.n_mtp == 0)")
        return self._new_kv_cache(self.config.n_mtp, batch_size, capacity)

    # -- forward passes ---------------------------------------------------------------------------

    def forward(
        self,
        tokens: torch.Tensor,
        cache: KVCache | None = None,
        n_new: torch.Tensor | list[int] | None = None,
        slots: torch.Tensor | list[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run ``tokens`` (B, T) through the model.

        Row b's positions are ``cache.lengths[slot_b] + arange(T)`` (``arange(T)`` without cache).
        The new keys/values are written at those positions; each token attends to its slot's valid
        prefix plus the new tokens up to itself; then ``lengths[slot_b]`` advances by ``n_new[b]``
        (default T). Rows may be right-padded (``n_new[b] < T``): the padding's keys land past the
        new length and are ignored later. ``slots`` (B,) picks the cache rows (default 0..B-1).

        Returns logits (B, T, V) and hidden (B, T, C), the last hidden state before the final norm.
        """
        step = self._plan_step(tokens, cache, n_new, slots, self.config.n_layers)
        x = self.embed(tokens)  # (B, T, C)
        for layer, block in enumerate(self.layers):
            x = block(x, step, cache, layer)
        self._advance(cache, step)
        return self.head(self.norm(x)), x

    def mtp_forward(
        self,
        k: int,
        hidden: torch.Tensor,
        next_tokens: torch.Tensor,
        cache: KVCache | None = None,
        n_new: torch.Tensor | list[int] | None = None,
        slots: torch.Tensor | list[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run MTP module ``k`` (0-based).

        ``hidden`` (B, T, C): the previous depth's hidden states at the row positions (module 0 takes
        the target's ``forward`` hidden); ``next_tokens`` (B, T): token t_{i+k+1} for each position i.
        Cache semantics as in :meth:`forward`, with a cache from :meth:`new_mtp_cache`.
        Returns logits (B, T, V) for t_{i+k+2} through the shared head, and the module's hidden (B, T, C).
        """
        if not 0 <= k < self.config.n_mtp:
            raise ValueError(f"MTP module index must be in [0, {self.config.n_mtp}), got {k}")
        if hidden.shape[:2] != next_tokens.shape or hidden.shape[-1] != self.config.d_model:
            raise ValueError(
                f"hidden {tuple(hidden.shape)} must be (B, T, {self.config.d_model}) "
                f"with (B, T) = next_tokens {tuple(next_tokens.shape)}"
            )
        step = self._plan_step(next_tokens, cache, n_new, slots, self.config.n_mtp)
        x = self.mtp[k](hidden, self.embed(next_tokens), step, cache, k)  # (B, T, C)
        self._advance(cache, step)
        return self.head(self.norm(x)), x

    def _plan_step(
        self,
        tokens: torch.Tensor,
        cache: KVCache | None,
        n_new: torch.Tensor | list[int] | None,
        slots: torch.Tensor | list[int] | None,
        cache_layers: int,
    ) -> _Step:
        """Validate the call and compute positions, RoPE angles and the attention mask once."""
        if tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError(f"tokens must be a (B, T) long tensor, got {tuple(tokens.shape)} {tokens.dtype}")
        B, T = tokens.shape
        device = tokens.device
        if cache is None:
            if n_new is not None or slots is not None:
                raise ValueError("n_new and slots need a cache")
            if T > self.config.max_seq_len:
                raise ValueError(f"sequence of {T} tokens exceeds max_seq_len {self.config.max_seq_len}")
            return _Step(rope=self._rope_on(device)[:T].view(1, T, 1, -1))
        if cache.k.shape[0] != cache_layers:
            raise ValueError(f"cache has {cache.k.shape[0]} layers, this pass needs {cache_layers}")

        rows = None
        if slots is not None:
            rows = torch.as_tensor(slots, dtype=torch.long, device=device)
            if rows.shape != (B,) or len(set(rows.tolist())) != B:
                raise ValueError(f"slots must hold {B} distinct cache rows, got {rows.tolist()}")
            if not all(0 <= r < cache.batch_size for r in rows.tolist()):
                raise ValueError(f"slots must be in [0, {cache.batch_size}), got {rows.tolist()}")
        elif B > cache.batch_size:
            raise ValueError(f"batch of {B} rows does not fit a cache of {cache.batch_size} slots")
        starts = cache.lengths[:B] if rows is None else cache.lengths[rows]  # (B,)
        first_start, last_start = (int(s) for s in torch.aminmax(starts))
        key_len = last_start + T
        if key_len > cache.capacity:
            raise ValueError(f"cache capacity {cache.capacity} exceeded: a slot needs {key_len} positions")

        positions = starts[:, None] + torch.arange(T, device=device)  # (B, T)
        # One new token per row at a common position sees the whole prefix: no mask needed.
        mask = None
        if T > 1 or first_start != last_start:
            mask = (torch.arange(key_len, device=device) <= positions[..., None]).unsqueeze(1)  # (B, 1, T, key_len)
        return _Step(
            rope=self._rope_on(device)[positions].unsqueeze(2),  # (B, T, 1, Dh/2)
            rows=rows,
            row_index=(torch.arange(B, device=device) if rows is None else rows)[:, None].expand(B, T),
            positions=positions,
            key_len=key_len,
            mask=mask,
            n_new=self._checked_n_new(n_new, B, T, device),
        )

    def _rope_on(self, device: torch.device) -> torch.Tensor:
        if self._rope.device != device:
            self._rope = self._rope.to(device)
        return self._rope

    @staticmethod
    def _checked_n_new(n_new: torch.Tensor | list[int] | None, B: int, T: int, device: torch.device) -> torch.Tensor:
        if n_new is None:
            return torch.full((B,), T, dtype=torch.long, device=device)
        counts = torch.as_tensor(n_new, dtype=torch.long, device=device)
        if counts.shape != (B,) or bool(((counts < 0) | (counts > T)).any()):
            raise ValueError(f"n_new must hold {B} counts in [0, {T}], got {counts.tolist()}")
        return counts

    @staticmethod
    def _advance(cache: KVCache | None, step: _Step) -> None:
        if cache is None:
            return
        if step.rows is None:
            cache.lengths[: step.n_new.shape[0]] += step.n_new
        else:
            cache.lengths.index_add_(0, step.rows, step.n_new)
