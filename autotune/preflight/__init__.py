"""Preflight: the integration risks of a target and its drafts, checked from the model folders before
any GPU second is spent.

``preflight(target, drafts, ...)`` returns a :class:`PreflightReport` of checks (``ok`` / ``warn`` /
``error``), each about the target or one draft: tokenizer identity, architecture support by the
engine, MTP availability and depth range, memory fit on the probed GPU (largest concurrency that
fits) and engine limits. :func:`usable_drafts` splits the drafts into those to tune and those to
leave out, with the reasons. Nothing here imports torch or tensorrt_llm.

What the engine runs (architectures, EAGLE-3 heads, MTP drafters, tokens per step) is the engine
adapter's to say: the caller passes its :class:`~autotune.models.support.FolderSupport`
(``autotune.engines.registry.folder_support(engine)``), so the preflight reads the model folders
(:mod:`autotune.models`) without importing any engine, and no engine imports the preflight. The
report keeps the folders it read (:attr:`PreflightReport.models`), so that the tuner reads each one
once per study.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.errors import ConfigurationError
from autotune.models.folder import HfModel, ModelFolders
from autotune.models.kind import EAGLE3, draft_kind
from autotune.models.support import FolderSupport
from autotune.preflight.architecture import check_draft_architecture, check_mtp, check_target_architecture
from autotune.preflight.constraints import check_context_window
from autotune.preflight.memory import check_memory
from autotune.preflight.report import TARGET, Check, PreflightReport, finding_check, usable_drafts
from autotune.preflight.tokenizer import compare_head_vocabulary, compare_tokenizers

if TYPE_CHECKING:
    from autotune.hardware import HardwareProfile

DEFAULT_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_SEQ_LEN = 2048  # prompt + generated tokens per sequence
DEFAULT_DEPTHS = (1, 2, 3, 4)

__all__ = ["Check", "PreflightReport", "PreflightSpace", "preflight", "usable_drafts"]


@dataclass(frozen=True)
class PreflightSpace:
    """The workload and search space the checks assume: ``concurrencies``, ``seq_len`` (tokens per
    sequence) and ``depths``; ``methods``: the methods the user asked for (None: any), so that a
    missing MTP module is an error only when mtp was asked for."""

    concurrencies: Sequence[int] = DEFAULT_CONCURRENCIES
    seq_len: int = DEFAULT_SEQ_LEN
    depths: Sequence[int] = DEFAULT_DEPTHS
    methods: Sequence[str] | None = None


def preflight(
    target: str | Path,
    drafts: Sequence[str | Path],
    support: FolderSupport,
    hardware: HardwareProfile | None = None,
    space: PreflightSpace = PreflightSpace(),
) -> PreflightReport:
    """Check ``target`` and each of ``drafts`` (Hugging Face model folders) for the engine whose
    ``support`` is given (module doc), in ``space``.

    ``hardware``: a probed profile (its GPU memory); None skips the memory fit. A target folder that
    cannot be read raises ConfigurationError; an unreadable draft folder is an error check of that
    draft.
    """
    _validate(space, support)
    concurrencies, seq_len, depths, methods = space.concurrencies, space.seq_len, space.depths, space.methods
    draft_names = tuple(str(d) for d in drafts)
    if len(set(draft_names)) != len(draft_names):
        raise ConfigurationError("a draft is listed twice; pass each draft folder once")
    depth = max(depths)
    folders = ModelFolders()
    model = folders.get(target, "target")
    checks: list[Check] = [
        check_target_architecture(model, support),
        check_mtp(model, depths, requested=methods is not None and "mtp" in methods, support=support),
    ]
    step_limit = support.step_limit(concurrencies, depth, seq_len)
    if step_limit is not None:
        checks.append(finding_check("max_num_tokens", step_limit))
    checks.append(check_context_window(model, "target", TARGET, seq_len, depth))
    readable: list[tuple[str, HfModel]] = []
    for name in draft_names:
        try:
            draft = folders.get(name, "draft")
        except ConfigurationError as exc:
            checks.append(Check("draft_folder", "error", str(exc), name))
            continue
        readable.append((name, draft))
        checks.append(check_draft_architecture(model, draft, name, support))
        if draft_kind(draft.config) == EAGLE3:
            checks.append(compare_head_vocabulary(model, draft, name))
        else:
            checks.append(compare_tokenizers(model, draft, name))
        checks.append(check_context_window(draft, f"draft {draft.path.name}", name, seq_len, depth))
    if hardware is None:
        checks.append(Check("memory", "warn", "no hardware profile given: memory fit not checked (run autotune probe)"))
    else:
        checks.extend(check_memory(model, readable, hardware.memory_total_bytes, concurrencies, seq_len, depth))
    return PreflightReport(support.engine, str(target), draft_names, tuple(checks), folders)


def _validate(space: PreflightSpace, support: FolderSupport) -> None:
    concurrencies, seq_len, depths, methods = space.concurrencies, space.seq_len, space.depths, space.methods

    def positive_ints(values: Sequence[int]) -> bool:
        return bool(values) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)

    if not positive_ints(concurrencies):
        raise ConfigurationError(f"concurrency levels must be integers >= 1, got {list(concurrencies)!r}")
    if not positive_ints([seq_len]):
        raise ConfigurationError(f"seq_len must be an integer >= 1, got {seq_len!r}")
    if not positive_ints(depths) or max(depths) > support.max_depth:
        raise ConfigurationError(f"depths must be integers in 1..{support.max_depth}, got {list(depths)!r}")
    unknown = sorted(set(methods or ()) - set(support.methods))
    if unknown:
        raise ConfigurationError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(support.methods)}")
