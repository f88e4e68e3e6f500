"""What a profile asks a serving engine to run, in the engine adapters' vocabulary: the speculative
kind, the model paths to hand over, and the :class:`~autotune.engines.base.EngineConfig` an adapter
measures, so that each engine's writer builds its speculative block with that adapter's mapping.

A draft that is an EAGLE-3 head (config.json ``architectures``, judged by
:func:`autotune.engines.trtllm.mapping.draft_kind` as the engine adapters do) is served as one;
:func:`with_draft_config` reads the draft folder's config.json when it is there, else the config
the database stored with the model is used.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from autotune.engines.base import EngineConfig
from autotune.engines.limits import DEFAULT_MAX_NGRAM
from autotune.errors import ConfigurationError
from autotune.models.kind import EAGLE_LEGACY, speculative_kind_of
from autotune.profiles.data import DeploymentProfile, ModelInfo


def with_draft_config(profile: DeploymentProfile) -> DeploymentProfile:
    """``profile`` with its draft's config.json read from the draft folder where that folder is
    readable here; otherwise as stored (the database keeps the config.json the model was registered
    with)."""
    draft = profile.draft
    if profile.method != "draft" or draft is None or draft.is_builtin:
        return profile
    try:
        config = json.loads((Path(draft.source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return profile
    if not isinstance(config, dict):
        return profile
    return replace(profile, draft=replace(draft, config=config))


def speculative_kind(profile: DeploymentProfile) -> str | None:
    """What the serving engine must run: None (method none), ``mtp``, ``ngram``, or for method draft
    what the draft is (:func:`autotune.engines.trtllm.mapping.draft_kind` of its stored config.json;
    a built-in draft or one without a config is a whole model)."""
    draft = profile.draft
    return speculative_kind_of(profile.method, None if draft is None or draft.is_builtin else draft.config)


def engine_kind(profile: DeploymentProfile, engine: str, supported: dict[str, str]) -> str:
    """:func:`speculative_kind` of ``profile``, refused (ConfigurationError) unless a key of
    ``supported``, the engine's own names for the kinds it serves."""
    kind = speculative_kind(profile)
    if kind not in supported:
        what = "an EAGLE-1/2 head" if kind == EAGLE_LEGACY else f"a {kind} draft"
        raise ConfigurationError(f"draft {profile.draft.name if profile.draft else '?'} is {what}; {engine} serves "
                                 "whole draft models and EAGLE-3 heads only")
    return kind


def measured_config(profile: DeploymentProfile, depth: int) -> EngineConfig:
    """The configuration an engine adapter measures for ``profile`` at draft length ``depth``,
    with the draft as the server loads it (:func:`serving_model`)."""
    draft = serving_model(profile.draft) if profile.method == "draft" else None
    return EngineConfig(profile.method, depth, draft)


def max_ngram(profile: DeploymentProfile) -> int:
    """The n-gram window an n-gram profile was measured with; other methods have none to read
    (the engine adapters' default is passed on, and never written)."""
    if profile.method != "ngram":
        return DEFAULT_MAX_NGRAM
    return int(profile.details.get("max_ngram", DEFAULT_MAX_NGRAM))


def serving_model(model: ModelInfo | None) -> str:
    """What to hand a serving engine: the checkpoint path, or the name of a built-in model."""
    if model is None:
        raise ConfigurationError("the profile's draft model is missing")
    return model.name if model.is_builtin else model.source
