"""Limits every engine shares: every model's context window (``max_position_embeddings``) must hold
``seq_len`` plus the ``depth + 1`` positions speculation writes ahead. (An engine's own limits, such as
TensorRT-LLM's tokens per step, come from its :class:`~autotune.models.support.FolderSupport`.)
"""

from __future__ import annotations

from autotune.models.folder import HfModel
from autotune.preflight.report import Check


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
