"""Can the engine run these models, and does the target carry MTP modules?

The engine's own answers (which architectures, EAGLE-3 heads and MTP modules it runs) come from the
:class:`~autotune.models.support.FolderSupport` the caller passes in; this module turns them into
checks and adds what holds for every engine: an EAGLE-1/2 head runs nowhere, and a target without
MTP modules has no method mtp.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autotune.models.folder import HfModel
from autotune.models.kind import EAGLE3, EAGLE_LEGACY, MTP_CONFIG_KEYS, draft_kind, mtp_layers
from autotune.models.support import FolderSupport
from autotune.preflight.report import TARGET, Check, finding_check


def check_target_architecture(target: HfModel, support: FolderSupport) -> Check:
    return finding_check("architecture", support.architecture(target.architectures, "target"), TARGET,
                         {"architectures": target.architectures})


def check_draft_architecture(target: HfModel, draft: HfModel, subject: str, support: FolderSupport) -> Check:
    """A draft is either a whole model the engine runs (draft-target) or an EAGLE-3 head."""
    kind = draft_kind(draft.config)
    name = f"draft {draft.path.name}"
    details: dict[str, Any] = {"architectures": draft.architectures, "kind": kind}
    if kind == EAGLE_LEGACY:
        return Check("architecture", "error",
                     f"{name} is an EAGLE-1/2 head; the adapters run EAGLE-3 heads only", subject, details)
    if kind == EAGLE3:
        return finding_check("architecture", support.eagle3_head(target, name), subject, details)
    return finding_check("architecture", support.architecture(draft.architectures, name), subject,
                         {"architectures": draft.architectures})


def check_mtp(target: HfModel, depths: Iterable[int], requested: bool, support: FolderSupport) -> Check:
    """Whether method mtp can run, and at which depths. ``requested``: the user asked for mtp, so
    its absence is an error rather than information."""
    layers = mtp_layers(target.config)
    arch = target.architectures[0] if target.architectures else "?"
    details: dict[str, Any] = {"mtp_layers": layers, "architecture": arch, "depths": sorted(set(depths))}
    if layers == 0:
        status = "error" if requested else "ok"
        return Check("mtp", status, f"the target has no MTP modules ({' / '.join(MTP_CONFIG_KEYS)} absent or 0): "
                     "method mtp is not available", TARGET, details)
    details["depth_range"] = [1, support.max_depth]
    return finding_check("mtp", support.mtp(target, layers, requested), TARGET, details)

