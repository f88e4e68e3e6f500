"""What an engine says about model folders: the interface between the engine adapters and the preflight.

Each engine adapter that runs Hugging Face folders implements :class:`FolderSupport` in its
``checks`` module (``autotune.engines.trtllm.checks.TRTLLM_SUPPORT``, ``autotune.engines.vllm.checks``
``VLLM_SUPPORT``), and :func:`autotune.engines.registry.folder_support` finds it by engine name. The
preflight receives it as a parameter from its caller (the CLI, the tuner's planner). The interface
lives here, below both, so that the arrows keep pointing down: the engines never import the
preflight (whose checks they would otherwise have to build), and the preflight never imports an
engine (whose tables it would otherwise have to branch on by name).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from autotune.models.folder import HfModel


class Finding(NamedTuple):
    """An engine's verdict on one question: ``status`` ``ok`` / ``warn`` / ``error``, a message for
    the user, and JSON-ready ``details`` the preflight adds to its own."""

    status: str
    message: str
    details: dict[str, Any] | None = None


class FolderSupport(Protocol):
    """Which model folders an engine runs (see the module doc)."""

    engine: str  # the engine's registry name, e.g. "trtllm"
    methods: tuple[str, ...]  # the methods the adapter runs (our vocabulary: none, mtp, draft, ngram)
    max_depth: int  # the deepest speculation the adapter runs

    def architecture(self, architectures: Sequence[str], name: str) -> Finding:
        """Whether the engine runs a whole model of these ``architectures`` (``name``: the model in messages)."""

    def eagle3_head(self, target: HfModel, name: str) -> Finding:
        """Whether the engine runs the EAGLE-3 head ``name`` with ``target``."""

    def mtp(self, target: HfModel, layers: int, requested: bool) -> Finding:
        """Whether the engine drafts with the ``layers`` (>= 1) MTP modules ``target`` ships;
        ``requested``: the user asked for method mtp (a refusal is then an error)."""

    def step_limit(self, concurrencies: Sequence[int], depth: int, seq_len: int) -> Finding | None:
        """A limit on tokens per engine step the study must respect (None: the engine has none)."""
