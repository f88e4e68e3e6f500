"""Reading a Hugging Face model folder without loading it: headers, fingerprint, each folder once."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from autotune.errors import ConfigurationError
from autotune.models import folder as folder_module
from autotune.models.folder import ModelFolders, read_model
from hf_model_factory import write_model


def test_header_only_shards_are_enough(tmp_path) -> None:
    # A 2-shard 1.5e9-parameter checkpoint, written as headers alone: nothing beyond them is read.
    for shard in (1, 2):
        header = json.dumps({"w": {"dtype": "BF16", "shape": [50_000, 15_000], "data_offsets": [0, 1_500_000_000]},
                             "__metadata__": {"format": "pt"}}).encode()
        (tmp_path / f"model-0000{shard}-of-00002.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    (tmp_path / "config.json").write_text("{}")
    weights = read_model(tmp_path, "target").weights
    assert (weights.n_params, weights.n_bytes, weights.files) == (1_500_000_000, 3_000_000_000, 2)
    (tmp_path / "broken.safetensors").write_bytes(b"\x01")
    with pytest.raises(ConfigurationError, match="not a readable safetensors file"):
        read_model(tmp_path, "target")


def test_the_fingerprint_follows_the_defining_files_and_headers(tmp_path) -> None:
    folder = write_model(tmp_path / "m")
    first = read_model(folder, "target").fingerprint
    assert read_model(folder, "target").fingerprint == first
    (folder / "generation_config.json").write_text('{"eos_token_id": 3}')
    assert read_model(folder, "target").fingerprint != first
    (folder / "README.md").write_text("not a defining file")
    assert read_model(folder, "target").fingerprint == read_model(folder, "target").fingerprint


def test_model_folders_read_each_folder_once(tmp_path, monkeypatch) -> None:
    seeded = read_model(write_model(tmp_path / "seeded"), "target")
    other = write_model(tmp_path / "other")
    reads: list[Path] = []
    monkeypatch.setattr(folder_module, "read_model", lambda path, role: reads.append(Path(path)) or read_model(path, role))
    folders = ModelFolders([seeded])
    assert folders.get(tmp_path / "seeded", "target") is seeded and reads == []
    assert folders.get(other, "draft") is folders.get(str(other), "draft") and reads == [other]
    assert list(folders) == [seeded, folders.get(other, "draft")]
    with pytest.raises(ConfigurationError, match="missing is not a folder"):
        folders.get(tmp_path / "missing", "draft")
