"""Engine limits a configuration must respect, checked before TensorRT-LLM refuses it at load time.

* ``max_num_tokens`` (tokens the engine processes per step) must cover
  ``max_batch_size x (1 + depth)``: every sequence verifies its draft tokens plus one. The engine
  adapter sets it to ``max(8192, max_batch_size x (1 + depth))``
  (:func:`autotune.engines.trtllm.mapping.max_num_tokens`); prompts longer than it are rejected,
  because chunked prefill stays off.
* every model's context window (``max_position_embeddings``) must hold ``seq_len`` plus the
  ``depth + 1`` positions speculation writes ahead.
"""

from __future__ import annotations

from collections.abc import Sequence

from autotune.engines.trtllm.mapping import max_num_tokens
from autotune.preflight.models import HfModel
from autotune.preflight.report import TARGET, Check


def check_max_num_tokens(batch_sizes: Sequence[int], depth: int, seq_len: int) -> Check:
    largest = max(batch_sizes)
    tokens = max_num_tokens(largest, depth)
    details = {"max_num_tokens": tokens, "max_batch_size": largest, "depth": depth, "needed": largest * (1 + depth)}
    if seq_len > tokens:
        return Check("max_num_tokens", "warn", f"max_num_tokens {tokens}: sequences of {seq_len} tokens may have prompts "
                     "longer than one engine step; such prompts are rejected (chunked prefill is off)", TARGET, details)
    return Check("max_num_tokens", "ok", f"max_num_tokens {tokens} >= max_batch_size {largest} x (1 + depth {depth})",
                 TARGET, details)


def check_context_window(model: HfModel, name: str, subject: str, seq_len: int, depth: int) -> Check:
    window = model.param("max_position_embeddings")
    needed = seq_len + depth + 1
    details = {"max_position_embeddings": window, "needed": needed}
    if window is None:
        return Check("context_window", "warn", f"{name}: config.json has no max_position_embeddings; "
                     f"cannot tell whether {needed} positions fit", subject, details)
    if int(window) < needed:
        return Check("context_window", "error", f"{name}: context window {window} < {needed} positions "
                     f"(seq_len {seq_len} + depth {depth} + 1)", subject, details)
    return Check("context_window", "ok", f"{name}: context window {window} holds {needed} positions", subject, details)
