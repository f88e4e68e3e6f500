"""How much memory an embedded model and its caches take, read from the safetensors header alone.

The tuner decides which concurrency levels fit on a device before starting any engine, so this module
never builds a model: a safetensors file starts with an 8-byte little-endian header length and a
JSON header holding every tensor's shape plus the metadata (our ``"config"``).

Per cached position (token) and sequence, with C = d_model and b = bytes per element:

* target or draft KV cache: keys + values of every layer = 2 * n_layers * C * b
  (n_heads * head_dim = C; the cache is stored in the compute dtype);
* MTP: one KV layer per MTP module, plus the target's hidden state the modules read
  = (2 * n_mtp + 1) * C * b.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from autotune.engines.base import BUILTIN_DRAFT
from autotune.engines.embedded.builtin import CONFIG_KEY, DRAFT_PATH, TARGET_PATH
from autotune.engines.embedded.decoding import GenerationRequest, required_capacity
from autotune.engines.embedded.tokenizer import ByteTokenizer
from autotune.errors import EngineError
from autotune.models.footprint import ModelFootprint
from autotune.safetensors_header import read_safetensors_header
from autotune.workload import Workload

COMPUTE_DTYPE_BYTES = 4  # the engine computes in float32 unless told otherwise


def model_path(name: str | Path | None, role: str) -> Path:
    """The file of a target (None = built-in) or draft (``"builtin"`` = built-in) model."""
    if role == "target" and name is None:
        return TARGET_PATH
    if role == "draft" and (name is None or name == BUILTIN_DRAFT):
        return DRAFT_PATH
    return Path(name)


def read_footprint(path: str | Path, dtype_bytes: int = COMPUTE_DTYPE_BYTES) -> ModelFootprint:
    """The footprint of the model file at ``path`` (written by ``save_model``)."""
    header = _read_header(Path(path))
    try:
        config = json.loads(header.get("__metadata__", {})[CONFIG_KEY])
        layers, width, n_mtp = int(config["n_layers"]), int(config["d_model"]), int(config.get("n_mtp", 0))
        vocab_size, max_seq_len = int(config["vocab_size"]), int(config["max_seq_len"])
    except (KeyError, TypeError, ValueError) as exc:
        raise EngineError(f"model file {path} has no valid '{CONFIG_KEY}' metadata ({exc}); save it with save_model") from exc
    n_params = sum(math.prod(entry["shape"]) for name, entry in header.items() if name != "__metadata__")
    return ModelFootprint(
        path=str(path),
        dtype_bytes=dtype_bytes,
        n_params=n_params,
        weight_bytes=n_params * dtype_bytes,
        kv_bytes_per_token=2 * layers * width * dtype_bytes,
        mtp_bytes_per_token=(2 * n_mtp + 1) * width * dtype_bytes if n_mtp else 0,
        n_mtp=n_mtp,
        vocab_size=vocab_size,
        max_seq_len=max_seq_len,
        config=config,
    )


def _read_header(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise EngineError(f"model file {path} does not exist; check the path")
    try:
        return read_safetensors_header(path)
    except (OSError, ValueError) as exc:
        raise EngineError(f"model file {path} is not a readable safetensors file ({exc})") from exc


def _generation_requests(workload: Workload) -> list[GenerationRequest]:
    tokenizer = ByteTokenizer()
    return [GenerationRequest(tokenizer.encode(r.prompt), r.max_tokens) for r in workload.requests]


def cache_positions(workload: Workload, depth: int) -> int:
    """Cache positions the engine allocates per sequence slot to run ``workload`` at ``depth``."""
    return required_capacity(_generation_requests(workload), depth)


def longest_prompt_tokens(workload: Workload) -> int:
    """Tokens of the longest prompt (BOS included): the widest prefill."""
    return max(len(request.prompt) for request in _generation_requests(workload))
