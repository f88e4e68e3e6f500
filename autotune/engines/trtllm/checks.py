"""What the TensorRT-LLM engine checks in the model folders before building anything: the parent
runs it to fail fast, the worker to learn which speculative configuration a draft needs."""

from __future__ import annotations

from pathlib import Path

from autotune.engines.base import EngineConfig
from autotune.engines.trtllm.mapping import draft_kind, speculative_kind
from autotune.errors import UnsupportedConfigError
from autotune.preflight.architecture import MTP_CONFIG_KEYS, mtp_layers
from autotune.preflight.models import read_config


def check_config(config: EngineConfig, target: str | Path) -> str | None:
    """The speculative kind ``config`` needs with this target (see
    :func:`~autotune.engines.trtllm.mapping.speculative_kind`); UnsupportedConfigError when the
    models cannot run it, ConfigurationError when a folder is not a model folder."""
    config.validate()
    if config.method == "mtp" and mtp_layers(read_config(target, "target")) == 0:
        raise UnsupportedConfigError(
            f"method mtp needs a target with MTP modules, and {Path(target).name} has none "
            f"({' / '.join(MTP_CONFIG_KEYS)} absent or 0 in config.json); use draft or ngram"
        )
    kind_of_draft = None
    if config.method == "draft" and config.draft is not None:
        kind_of_draft = draft_kind(read_config(config.draft, "draft"))
    return speculative_kind(config, kind_of_draft)
