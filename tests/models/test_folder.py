"""Reading a Hugging Face model folder without loading it: the safetensors headers are enough."""

from __future__ import annotations

import json
import struct

import pytest

from autotune.errors import ConfigurationError
from autotune.models.folder import read_weights


def test_header_only_shards_are_enough(tmp_path) -> None:
    # A 2-shard 1.5e9-parameter checkpoint, written as headers alone: nothing beyond them is read.
    for shard in (1, 2):
        header = json.dumps({"w": {"dtype": "BF16", "shape": [50_000, 15_000], "data_offsets": [0, 1_500_000_000]},
                             "__metadata__": {"format": "pt"}}).encode()
        (tmp_path / f"model-0000{shard}-of-00002.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    weights = read_weights(tmp_path)
    assert (weights.n_params, weights.n_bytes, weights.files) == (1_500_000_000, 3_000_000_000, 2)
    (tmp_path / "broken.safetensors").write_bytes(b"\x01")
    with pytest.raises(ConfigurationError, match="not a readable safetensors file"):
        read_weights(tmp_path)
