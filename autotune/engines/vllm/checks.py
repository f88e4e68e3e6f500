"""What the vLLM engine checks in the model folders before starting anything: the parent runs it to
fail fast, the worker to learn which speculative method a draft folder needs."""

from __future__ import annotations

from pathlib import Path

from autotune.engines.base import BUILTIN_DRAFT, EngineConfig
from autotune.engines.trtllm.mapping import EAGLE_LEGACY, draft_kind
from autotune.engines.vllm.mapping import runs_mtp, speculative_config
from autotune.errors import UnsupportedConfigError
from autotune.preflight.architecture import MTP_CONFIG_KEYS, mtp_layers
from autotune.preflight.models import read_config


def check_config(config: EngineConfig, target: str | Path) -> str | None:
    """The draft kind ``config`` needs (``draft_target`` / ``eagle3``; None without a draft folder);
    UnsupportedConfigError when vLLM cannot run it with these folders, ConfigurationError when a
    folder is not a model folder."""
    config.validate()
    if config.method == "mtp":
        target_config = read_config(target, "target")
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
    kind = None
    if config.method == "draft" and config.draft not in (None, BUILTIN_DRAFT):
        kind = draft_kind(read_config(config.draft, "draft"))
        if kind == EAGLE_LEGACY:
            raise UnsupportedConfigError(f"{Path(config.draft).name} is an EAGLE-1/2 head; this adapter runs EAGLE-3 "
                                         "heads and whole draft models with vLLM")
    speculative_config(config, kind)  # the mapping's own refusals (a draft without a folder), before any process starts
    return kind
