"""Preflight: the integration risks of a target and its drafts, checked from the model folders before
any GPU second is spent.

``preflight(target, drafts, ...)`` returns a :class:`PreflightReport` of checks (``ok`` / ``warn`` /
``error``), each about the target or one draft: tokenizer identity, architecture support by the
engine, MTP availability and depth range, memory fit on the probed GPU (largest batch size that
fits) and engine limits. :func:`usable_drafts` splits the drafts into those to tune and those to
leave out, with the reasons. Nothing here imports torch or tensorrt_llm.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.engines.base import MAX_DEPTH, METHODS
from autotune.engines.trtllm.mapping import EAGLE3, draft_kind
from autotune.errors import ConfigurationError
from autotune.preflight.architecture import (
    check_draft_architecture,
    check_engine_support,
    check_mtp,
    check_target_architecture,
    mtp_layers,
)
from autotune.preflight.constraints import check_context_window, check_max_num_tokens
from autotune.preflight.memory import check_memory
from autotune.preflight.models import HfModel, read_model
from autotune.preflight.report import TARGET, Check, PreflightReport, usable_drafts
from autotune.preflight.tokenizer import compare_head_vocabulary, compare_tokenizers

if TYPE_CHECKING:
    from autotune.hardware import HardwareProfile

DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_SEQ_LEN = 2048  # prompt + generated tokens per sequence
DEFAULT_DEPTHS = (1, 2, 3, 4)

__all__ = ["Check", "PreflightReport", "preflight", "usable_drafts"]


def preflight(
    target: str | Path,
    drafts: Sequence[str | Path] = (),
    engine: str = "trtllm",
    hardware: HardwareProfile | None = None,
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    seq_len: int = DEFAULT_SEQ_LEN,
    depths: Sequence[int] = DEFAULT_DEPTHS,
    methods: Sequence[str] | None = None,
) -> PreflightReport:
    """Check ``target`` and each of ``drafts`` (Hugging Face model folders) for ``engine``.

    ``hardware``: a probed profile (its GPU memory); None skips the memory fit. ``batch_sizes``,
    ``seq_len`` (tokens per sequence) and ``depths``: the workload and search space the checks
    assume. ``methods``: the methods the user asked for (None: any), so that a missing MTP module
    is an error only when mtp was asked for. A target folder that cannot be read raises
    ConfigurationError; an unreadable draft folder is an error check of that draft.
    """
    _validate(batch_sizes, seq_len, depths, methods)
    draft_names = tuple(str(d) for d in drafts)
    if len(set(draft_names)) != len(draft_names):
        raise ConfigurationError("a draft is listed twice; pass each draft folder once")
    engine_error = check_engine_support(engine)
    if engine_error is not None:
        return PreflightReport(engine, str(target), draft_names, (engine_error,))
    depth = max(depths)
    model = read_model(target, "target")
    layers = mtp_layers(model.config)
    checks: list[Check] = [
        check_target_architecture(model, engine),
        check_mtp(model, depths, requested=methods is not None and "mtp" in methods, engine=engine),
        check_context_window(model, "target", TARGET, seq_len, depth),
    ]
    if engine == "trtllm":  # vLLM chunks long prompts; TensorRT-LLM with chunked prefill off cannot
        checks.insert(2, check_max_num_tokens(batch_sizes, depth, seq_len))
    readable: list[tuple[str, HfModel]] = []
    for name in draft_names:
        try:
            draft = read_model(name, "draft")
        except ConfigurationError as exc:
            checks.append(Check("draft_folder", "error", str(exc), name))
            continue
        readable.append((name, draft))
        checks.append(check_draft_architecture(model, draft, name, engine))
        if draft_kind(draft.config) == EAGLE3:
            checks.append(compare_head_vocabulary(model, draft, name))
        else:
            checks.append(compare_tokenizers(model, draft, name))
        checks.append(check_context_window(draft, f"draft {draft.path.name}", name, seq_len, depth))
    if hardware is None:
        checks.append(Check("memory", "warn", "no hardware profile given: memory fit not checked (run autotune probe)"))
    else:
        checks.extend(check_memory(model, readable, hardware.memory_total_bytes, batch_sizes, seq_len, depth, layers))
    return PreflightReport(engine, str(target), draft_names, tuple(checks))


def _validate(batch_sizes: Sequence[int], seq_len: int, depths: Sequence[int], methods: Sequence[str] | None) -> None:
    def positive_ints(values: Sequence[int]) -> bool:
        return bool(values) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)

    if not positive_ints(batch_sizes):
        raise ConfigurationError(f"batch sizes must be integers >= 1, got {list(batch_sizes)!r}")
    if not positive_ints([seq_len]):
        raise ConfigurationError(f"seq_len must be an integer >= 1, got {seq_len!r}")
    if not positive_ints(depths) or max(depths) > MAX_DEPTH:
        raise ConfigurationError(f"depths must be integers in 1..{MAX_DEPTH}, got {list(depths)!r}")
    unknown = sorted(set(methods or ()) - set(METHODS))
    if unknown:
        raise ConfigurationError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
