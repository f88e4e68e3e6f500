"""Reading a safetensors file's JSON header without loading any tensor (no torch needed).

Format: 8 bytes little-endian header length, then that many bytes of JSON mapping tensor names
to {dtype, shape, data_offsets} (plus an optional "__metadata__" of strings).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

HEADER_LENGTH_BYTES = 8
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The header of ``path``; ValueError (or OSError) saying why it cannot be read."""
    try:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(HEADER_LENGTH_BYTES))
            if length > MAX_HEADER_BYTES:
                raise ValueError(f"header of {length} bytes")
            header = json.loads(handle.read(length))
    except struct.error as exc:
        raise ValueError(str(exc)) from exc
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return header
