"""What the vLLM engine checks in the model folders before starting anything.

:func:`check_config`: the parent runs it to fail fast, the worker to learn which speculative method a
draft folder needs. :data:`VLLM_SUPPORT`: which folders vLLM runs, asked by the preflight
(:class:`autotune.models.support.FolderSupport`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autotune.engines.base import BUILTIN_DRAFT, MAX_DEPTH, METHODS, EngineConfig
from autotune.engines.vllm.mapping import mtp_depth_refusal, runs_mtp, speculative_config
from autotune.errors import UnsupportedConfigError
from autotune.models.folder import HfModel, ModelFolders
from autotune.models.kind import EAGLE_LEGACY, MTP_CONFIG_KEYS, draft_kind, mtp_layers
from autotune.models.support import Finding


def check_config(config: EngineConfig, target: str | Path, folders: ModelFolders) -> str | None:
    """The draft kind ``config`` needs (``draft_target`` / ``eagle3``; None without a draft folder);
    UnsupportedConfigError when vLLM cannot run it with these folders, ConfigurationError when a
    folder is not a model folder. ``folders``: the model folders already read (a folder not among
    them is read once and kept)."""
    config.validate()
    if config.method == "mtp":
        target_config = folders.get(target, "target").config
        if mtp_layers(target_config) == 0:
            raise UnsupportedConfigError(
                f"method mtp needs a target with MTP modules, and {Path(target).name} has none "
                f"({' / '.join(MTP_CONFIG_KEYS)} absent or 0 in config.json); use draft or ngram"
            )
        if not runs_mtp(target_config):
            architecture = (target_config.get("architectures") or ["?"])[0]
            raise UnsupportedConfigError(
                f"vLLM has no MTP drafter for {architecture} (model_type {target_config.get('model_type')!r}); "
                "use draft or ngram"
            )
        refusal = mtp_depth_refusal(config.depth, mtp_layers(target_config))
        if refusal:
            raise UnsupportedConfigError(refusal)
    kind = None
    if config.method == "draft" and config.draft not in (None, BUILTIN_DRAFT):
        kind = draft_kind(folders.get(config.draft, "draft").config)
        if kind == EAGLE_LEGACY:
            raise UnsupportedConfigError(f"{Path(config.draft).name} is an EAGLE-1/2 head; this adapter runs EAGLE-3 "
                                         "heads and whole draft models with vLLM")
    speculative_config(config, kind)  # the mapping's own refusals (a draft without a folder), before any process starts
    return kind


class VllmSupport:
    """The model folders vLLM runs. Its model registry (``vllm/model_executor/models/registry.py``)
    holds hundreds of architectures and grows every release, and vLLM itself refuses an unknown one at
    load time: any generative architecture passes here."""

    engine = "vllm"
    methods = METHODS
    max_depth = MAX_DEPTH

    def architecture(self, architectures: Sequence[str], name: str) -> Finding:
        generative = [a for a in architectures if a.endswith(("ForCausalLM", "ForConditionalGeneration"))]
        if generative:
            return Finding("ok", f"{name}: {generative[0]} is a generative architecture "
                           "(vLLM's own registry decides at load time)")
        found = ", ".join(architectures) or "no 'architectures' in config.json"
        return Finding("error", f"{name}: {found} is not a generative model vLLM serves")

    def eagle3_head(self, target: HfModel, name: str) -> Finding:
        return Finding("ok", f"{name} is an EAGLE-3 head (vLLM method eagle3)")

    def mtp(self, target: HfModel, layers: int, requested: bool) -> Finding:
        if not runs_mtp(target.config):
            arch = target.architectures[0] if target.architectures else "?"
            return Finding("error" if requested else "warn", f"the target ships {layers} MTP module(s), but vLLM "
                           f"0.32 has no MTP drafter for {arch}: method mtp is not available")
        return Finding("ok", f"the target ships {layers} MTP module(s); vLLM drafts every depth with them")

    def step_limit(self, concurrencies: Sequence[int], depth: int, seq_len: int) -> None:
        """None: vLLM chunks long prompts, so no step limit binds the study."""
        return None


VLLM_SUPPORT = VllmSupport()
