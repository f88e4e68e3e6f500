"""The models a study tunes, as the planner sees them: identity (a content fingerprint), the label
the search space uses, what the engine is given to load them, and their memory footprint.

Two kinds of model, one per engine:

* the embedded engine's single safetensors files (ours, or the built-in ones), fingerprinted by
  their whole contents (a few MB);
* TensorRT-LLM's and vLLM's Hugging Face model folders, read without loading them (config.json, tokenizer
  files, safetensors headers) and fingerprinted by those (:mod:`autotune.models.folder`).

For those engines the pairing preflight (:mod:`autotune.preflight`) runs here: errors about the
target stop the setup with its messages; a draft with errors is left out, with its reasons kept for
the study record, instead of failing trials mid-study.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.engines.base import BUILTIN_DRAFT
from autotune.engines.embedded.builtin import BUILTIN_DRAFT_NAME, BUILTIN_TARGET_NAME, model_fingerprint
from autotune.engines.embedded.footprint import model_path, read_footprint
from autotune.engines.registry import engine_adapter, folder_support
from autotune.errors import ConfigurationError
from autotune.models.folder import HfModel
from autotune.models.footprint import ModelFootprint, folder_footprint
from autotune.preflight import PreflightSpace, preflight, usable_drafts
from autotune.search.options import TuneOptions
from autotune.store.results import ModelEntry

@dataclass(frozen=True)
class ModelArtifact:
    """A target or draft model: ``label`` names it in the search space (``builtin`` or the file's
    stem), ``engine_arg`` is what the engine is given to load it; ``folder``: a Hugging Face folder
    as the preflight read it (None for the embedded engine's files), handed on to the engine."""

    role: str
    label: str
    name: str
    source: str
    engine_arg: str | None
    fingerprint: str
    footprint: ModelFootprint
    folder: HfModel | None = None

    def model_entry(self) -> ModelEntry:
        """The columns of its model-artifact row."""
        return ModelEntry(
            fingerprint=self.fingerprint, name=self.name, role=self.role, source=self.source,
            num_params=self.footprint.n_params, num_mtp_modules=self.footprint.n_mtp,
            vocab_size=self.footprint.vocab_size, config=self.footprint.config,
        )


@dataclass(frozen=True)
class StudyModels:
    """The target, the drafts to tune (by label) and the drafts left out (label -> reason)."""

    target: ModelArtifact
    drafts: dict[str, ModelArtifact]
    excluded_drafts: dict[str, str]


# -- the embedded engine ------------------------------------------------------------------------------


def embedded_models(target: str | None, drafts: Sequence[str], want_drafts: bool) -> StudyModels:
    """The embedded engine's target file (None: built-in) and draft files (``"builtin"`` allowed);
    drafts must share the target's vocabulary. ``want_drafts`` False: method draft is not tuned."""
    target_artifact = embedded_artifact("target", target)
    found: dict[str, ModelArtifact] = {}
    for given in drafts if want_drafts else ():
        draft = embedded_artifact("draft", given)
        if draft.label in found:
            raise ConfigurationError(f"two drafts are named {draft.label!r} (file stem); rename one of them")
        if draft.footprint.vocab_size != target_artifact.footprint.vocab_size:
            raise ConfigurationError(
                f"draft {draft.label} has a vocabulary of {draft.footprint.vocab_size} tokens and the target "
                f"{target_artifact.footprint.vocab_size}; a draft must share the target's tokenizer"
            )
        found[draft.label] = draft
    return StudyModels(target_artifact, found, {})


def embedded_artifact(role: str, given: str | None) -> ModelArtifact:
    """A model file of the embedded engine (None / ``"builtin"``: the built-in target / draft)."""
    builtin = given is None or (role == "draft" and given == BUILTIN_DRAFT)
    path = model_path(given, role)
    if builtin:
        name = BUILTIN_TARGET_NAME if role == "target" else BUILTIN_DRAFT_NAME
        label, source = BUILTIN_DRAFT if role == "draft" else name, f"builtin:{name}"
    else:
        name = label = Path(given).stem
        source = str(Path(given).resolve())
    engine_arg = (None if role == "target" else BUILTIN_DRAFT) if builtin else source
    return ModelArtifact(role, label, name, source, engine_arg, model_fingerprint(path), read_footprint(path))


# -- TensorRT-LLM and vLLM --------------------------------------------------------------------------


def folder_models(options: TuneOptions, drafts: Sequence[str], hardware: Any, seq_len: int) -> StudyModels:
    """The Hugging Face folders of a study on ``options.engine`` (trtllm or vllm): its target and
    ``drafts``, after the pairing preflight (module doc).

    The preflight checks the concurrencies the options give (1 when none: only a draft that does not
    fit even at the smallest is left out; larger batches that do not fit are the memory budget's to
    skip), every depth up to ``options.max_depth`` and the options' methods; ``seq_len``: tokens per
    sequence, an upper bound (prompt bytes + max_tokens)."""
    engine, target = options.engine, options.target
    space = PreflightSpace(options.concurrencies or (1,), seq_len, tuple(range(1, options.max_depth + 1)),
                           options.methods)
    report = preflight(target, list(drafts), folder_support(engine), hardware=hardware, space=space)
    if report.target_errors:
        raise ConfigurationError(f"the target cannot be tuned with {engine_adapter(engine).display_name}: "
                                 + "; ".join(check.message for check in report.target_errors))
    usable, rejected = usable_drafts(report)
    target_artifact = hf_artifact("target", report.models.get(target, "target"))  # read once, by the preflight
    found: dict[str, ModelArtifact] = {}
    for folder in usable:
        draft = hf_artifact("draft", report.models.get(folder, "draft"))
        if draft.label in found:
            raise ConfigurationError(f"two drafts are named {draft.label!r} (folder name); rename one of them")
        found[draft.label] = draft
    excluded = {Path(folder).name: reason for folder, reason in rejected.items()}
    return StudyModels(target_artifact, found, excluded)


def hf_artifact(role: str, model: HfModel) -> ModelArtifact:
    """A Hugging Face model folder as a study model (labelled by its folder name)."""
    folder = model.path.resolve()
    return ModelArtifact(role, folder.name, folder.name, str(folder), str(folder), model.fingerprint,
                         folder_footprint(model), model)
