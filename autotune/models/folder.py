"""Read a Hugging Face model folder without loading it: the JSON files and the safetensors headers.

A safetensors file starts with an 8-byte little-endian header length and a JSON header listing every
tensor's dtype and shape, so the weight size of a 100 GB checkpoint is known after reading a few
kilobytes per shard.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune import safetensors_header
from autotune.errors import ConfigurationError

# Bits per element of every safetensors dtype (sub-byte float formats pack several per byte).
SAFETENSORS_DTYPE_BITS = {
    "F64": 64, "I64": 64, "U64": 64, "F32": 32, "I32": 32, "U32": 32, "F16": 16, "BF16": 16, "I16": 16,
    "U16": 16, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "I8": 8, "U8": 8, "BOOL": 8, "F6_E2M3": 6,
    "F6_E3M2": 6, "F4": 4,
}
# Bytes per element of the config's compute dtype ("torch_dtype", or "dtype" in newer transformers).
CONFIG_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float8_e4m3fn": 1}
DEFAULT_DTYPE_BYTES = 2  # served checkpoints are 16-bit unless they say otherwise


@dataclass(frozen=True)
class Weights:
    """What the safetensors headers of a folder say: parameter count and bytes on disk (= in memory)."""

    n_params: int
    n_bytes: int
    files: int


@dataclass(frozen=True)
class HfModel:
    """The parts of a Hugging Face model folder the preflight reads (absent files are empty dicts)."""

    path: Path
    config: dict[str, Any]
    tokenizer: dict[str, Any]  # tokenizer.json
    tokenizer_config: dict[str, Any]
    generation_config: dict[str, Any]
    sentencepiece_sha256: str | None  # of tokenizer.model, for tokenizers without tokenizer.json
    weights: Weights | None  # None: no *.safetensors file

    @property
    def architectures(self) -> list[str]:
        return [str(a) for a in self.config.get("architectures") or []]

    def param(self, name: str, default: Any = None) -> Any:
        return config_param(self.config, name, default)

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element of the compute dtype (also the KV cache's, TensorRT-LLM's default)."""
        return CONFIG_DTYPE_BYTES.get(config_dtype(self.config) or "", DEFAULT_DTYPE_BYTES)


def config_param(config: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A config.json value, looked up in ``text_config`` too (multimodal configs nest the LLM's there)."""
    if name in config:
        return config[name]
    return (config.get("text_config") or {}).get(name, default)


def config_dtype(config: Mapping[str, Any]) -> str | None:
    """The compute dtype config.json names (``torch_dtype``, or ``dtype`` in newer transformers),
    e.g. ``float32``; None when it names none."""
    dtype = config_param(config, "torch_dtype") or config_param(config, "dtype")
    return str(dtype).removeprefix("torch.") if dtype else None


def read_config(path: str | Path, role: str) -> dict[str, Any]:
    """config.json of the model folder at ``path`` (ConfigurationError when missing or malformed)."""
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigurationError(f"{role} {folder} is not a folder; pass a Hugging Face model folder (with config.json)")
    if not (folder / "config.json").is_file():
        raise ConfigurationError(f"{role} {folder} has no config.json; pass a Hugging Face model folder")
    return _read_json(folder / "config.json", role)


def read_model(path: str | Path, role: str) -> HfModel:
    """The model folder at ``path``; ``role`` ("target", "draft ...") names it in errors."""
    folder = Path(path)
    config = read_config(folder, role)
    sentencepiece = folder / "tokenizer.model"
    return HfModel(
        path=folder,
        config=config,
        tokenizer=_read_json(folder / "tokenizer.json", role, optional=True),
        tokenizer_config=_read_json(folder / "tokenizer_config.json", role, optional=True),
        generation_config=_read_json(folder / "generation_config.json", role, optional=True),
        sentencepiece_sha256=hashlib.sha256(sentencepiece.read_bytes()).hexdigest() if sentencepiece.is_file() else None,
        weights=read_weights(folder),
    )


def read_weights(folder: Path) -> Weights | None:
    """Parameters and bytes over every ``*.safetensors`` file in ``folder`` (None when there is none)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    n_params = n_bits = 0
    for file in files:
        for name, entry in read_safetensors_header(file).items():
            if name == "__metadata__":
                continue
            try:
                count = math.prod(int(size) for size in entry["shape"])
                bits = SAFETENSORS_DTYPE_BITS[entry["dtype"]]
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigurationError(f"{file}: tensor {name!r} has no readable dtype/shape ({exc})") from exc
            n_params += count
            n_bits += count * bits
    return Weights(n_params=n_params, n_bytes=math.ceil(n_bits / 8), files=len(files))


def read_safetensors_header(file: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file (tensor name -> {dtype, shape, data_offsets})."""
    try:
        return safetensors_header.read_safetensors_header(file)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{file} is not a readable safetensors file ({exc})") from exc


def _read_json(file: Path, role: str, optional: bool = False) -> dict[str, Any]:
    if optional and not file.is_file():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{role}: {file} is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"{role}: {file} must hold a JSON object, got {type(data).__name__}")
    return data
