"""Read a Hugging Face model folder without loading it: the JSON files and the safetensors headers.

A safetensors file starts with an 8-byte little-endian header length and a JSON header listing every
tensor's dtype and shape, so the weight size of a 100 GB checkpoint is known after reading a few
kilobytes per shard.

The same read gives the folder's fingerprint (:attr:`HfModel.fingerprint`): sha256 over the files
that decide what the checkpoint computes (:data:`FINGERPRINT_FILES`) and over its safetensors
headers (names, dtypes, shapes, offsets) and file sizes. Hashing 100 GB of weights would take longer
than a study, and a change of weights without a change of shapes, dtype or config is a retrained
checkpoint the user names differently anyway.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping
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
# Files that decide what a checkpoint computes, hashed (in this order) into its fingerprint.
FINGERPRINT_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "generation_config.json")


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
    fingerprint: str  # sha256 of the folder's defining files and safetensors headers (module doc)

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


def read_model(path: str | Path, role: str) -> HfModel:
    """The model folder at ``path``, each file read once; ``role`` ("target", "draft ...") names it in errors."""
    folder = _model_folder(path, role)
    contents = {name: _read_bytes(folder / name, role) for name in FINGERPRINT_FILES if (folder / name).is_file()}

    def json_file(name: str) -> dict[str, Any]:
        return _parse_json(folder / name, contents[name], role) if name in contents else {}

    sentencepiece = contents.get("tokenizer.model")
    headers = {file: read_safetensors_header(file) for file in sorted(folder.glob("*.safetensors"))}
    return HfModel(
        path=folder,
        config=json_file("config.json"),
        tokenizer=json_file("tokenizer.json"),
        tokenizer_config=json_file("tokenizer_config.json"),
        generation_config=json_file("generation_config.json"),
        sentencepiece_sha256=hashlib.sha256(sentencepiece).hexdigest() if sentencepiece is not None else None,
        weights=_weights(headers),
        fingerprint=_fingerprint(contents, headers),
    )


class ModelFolders:
    """The model folders a process has read, by resolved path: :meth:`get` reads a folder on first
    use only. Seeded with folders read elsewhere (the preflight's, handed to an engine's worker), it
    lets a whole study read each folder once."""

    def __init__(self, models: Iterable[HfModel] = ()) -> None:
        self._models = {model.path.resolve(): model for model in models}

    def get(self, path: str | Path, role: str) -> HfModel:
        """The folder at ``path`` (:func:`read_model` the first time; ``role`` names it in errors)."""
        key = Path(path).resolve()
        if key not in self._models:
            self._models[key] = read_model(path, role)
        return self._models[key]

    def __iter__(self) -> Iterator[HfModel]:
        return iter(self._models.values())


def _weights(headers: Mapping[Path, dict[str, Any]]) -> Weights | None:
    if not headers:
        return None
    n_params = n_bits = 0
    for file, header in headers.items():
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            try:
                count = math.prod(int(size) for size in entry["shape"])
                bits = SAFETENSORS_DTYPE_BITS[entry["dtype"]]
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigurationError(f"{file}: tensor {name!r} has no readable dtype/shape ({exc})") from exc
            n_params += count
            n_bits += count * bits
    return Weights(n_params=n_params, n_bytes=math.ceil(n_bits / 8), files=len(headers))


def _fingerprint(contents: Mapping[str, bytes], headers: Mapping[Path, dict[str, Any]]) -> str:
    """sha256 over the defining files as read and the safetensors headers (module doc)."""
    digest = hashlib.sha256()
    for name, data in contents.items():
        digest.update(f"{name}\0".encode())
        digest.update(data)
    for file, header in headers.items():
        digest.update(f"{file.name}\0{file.stat().st_size}\0{json.dumps(header, sort_keys=True)}".encode())
    return digest.hexdigest()


def read_safetensors_header(file: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file (tensor name -> {dtype, shape, data_offsets})."""
    try:
        return safetensors_header.read_safetensors_header(file)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{file} is not a readable safetensors file ({exc})") from exc


def _model_folder(path: str | Path, role: str) -> Path:
    """``path`` as a folder with a config.json (ConfigurationError saying what is missing)."""
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigurationError(f"{role} {folder} is not a folder; pass a Hugging Face model folder (with config.json)")
    if not (folder / "config.json").is_file():
        raise ConfigurationError(f"{role} {folder} has no config.json; pass a Hugging Face model folder")
    return folder


def _read_bytes(file: Path, role: str) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"{role}: {file} cannot be read ({exc})") from exc


def _parse_json(file: Path, data: bytes, role: str) -> dict[str, Any]:
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{role}: {file} is not valid JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise ConfigurationError(f"{role}: {file} must hold a JSON object, got {type(parsed).__name__}")
    return parsed
