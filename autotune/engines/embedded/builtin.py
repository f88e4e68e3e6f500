"""Saving and loading embedded models, and the two models shipped with the package.

A model file is a safetensors file holding fp16 weights; its metadata carries the
:class:`ModelConfig` as JSON under ``"config"``, so every file describes itself.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file

from autotune.engines.embedded.network import CausalLM, ModelConfig
from autotune.errors import EngineError

BUILTIN_TARGET_NAME = "autotune-byte-target"
BUILTIN_DRAFT_NAME = "autotune-byte-draft"

WEIGHTS_DIR = Path(__file__).parent / "weights"
TARGET_PATH = WEIGHTS_DIR / "target.safetensors"
DRAFT_PATH = WEIGHTS_DIR / "draft.safetensors"

STORAGE_DTYPE = torch.float16  # halves the package size; loading upcasts to the requested dtype
CONFIG_KEY = "config"


def save_model(model: CausalLM, path: str | Path, metadata: dict | None = None) -> None:
    """Write ``model``'s weights (as fp16) and config to a safetensors file at ``path``.

    ``metadata`` values that are not strings are stored as JSON.
    """
    extra = {key: value if isinstance(value, str) else json.dumps(value) for key, value in (metadata or {}).items()}
    if CONFIG_KEY in extra:
        raise ValueError(f"metadata key {CONFIG_KEY!r} is reserved for the model config")
    tensors = {name: tensor.detach().to("cpu", STORAGE_DTYPE).contiguous() for name, tensor in model.state_dict().items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target then rename, so a reader never sees a half-written file.
    partial = path.with_name(path.name + ".partial")
    save_file(tensors, str(partial), metadata={**extra, CONFIG_KEY: json.dumps(model.config.to_dict())})
    partial.chmod(0o644)  # safetensors creates 0600 files; package data must be world-readable
    partial.replace(path)


def read_metadata(path: str | Path) -> dict[str, str]:
    """The string metadata stored in a model file (``"config"`` included)."""
    path = Path(path)
    _require_file(path)
    try:
        with safe_open(str(path), framework="pt") as handle:
            return dict(handle.metadata() or {})
    except (SafetensorError, OSError, ValueError) as exc:
        raise EngineError(f"model file {path} is not a readable safetensors file ({exc}); re-create or re-download it") from exc


def load_model(path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> CausalLM:
    """Load a model file written by :func:`save_model`, in eval mode, on ``device`` as ``dtype``."""
    path = Path(path)
    metadata = read_metadata(path)
    if CONFIG_KEY not in metadata:
        raise EngineError(f"model file {path} has no '{CONFIG_KEY}' metadata; save it with autotune's save_model")
    try:
        config = ModelConfig.from_dict(json.loads(metadata[CONFIG_KEY]))
    except (ValueError, TypeError) as exc:
        raise EngineError(f"model file {path} has an invalid config in its metadata ({exc})") from exc
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise EngineError(f"model file {path} is corrupt ({exc}); re-create or re-download it") from exc
    model = CausalLM(config)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        first_line = str(exc).splitlines()[0]
        raise EngineError(f"model file {path} does not match its config ({first_line})") from exc
    return model.to(device=device, dtype=dtype).eval()


def load_builtin_target(device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> CausalLM:
    """The shipped byte-level target model, with its MTP modules."""
    return load_model(TARGET_PATH, device, dtype)


def load_builtin_draft(device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> CausalLM:
    """The shipped byte-level draft model (same tokenizer as the target)."""
    return load_model(DRAFT_PATH, device, dtype)


def model_fingerprint(path: str | Path) -> str:
    """sha256 hex digest of a model file's contents."""
    path = Path(path)
    _require_file(path)
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _require_file(path: Path) -> None:
    if not path.is_file():
        raise EngineError(f"model file {path} does not exist; check the path (built-in weights ship in {WEIGHTS_DIR})")
