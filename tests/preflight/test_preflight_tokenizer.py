"""Tokenizer identity between target and draft, from real model folders written by the tests."""

from __future__ import annotations

import json

import pytest

from autotune.models.folder import read_model
from autotune.preflight.tokenizer import compare_tokenizers, content_sha256, tokenizer_facts
from hf_model_factory import llama_config, tokenizer_json, write_model


def compare(tmp_path, target_kwargs=None, draft_kwargs=None):
    target = read_model(write_model(tmp_path / "target", **(target_kwargs or {})), "target")
    draft = read_model(write_model(tmp_path / "draft", **(draft_kwargs or {})), "draft")
    return compare_tokenizers(target, draft, "draft-subject")


def test_same_tokenizer_is_ok_and_facts_are_read(tmp_path) -> None:
    check = compare(tmp_path, draft_kwargs={"config": llama_config(num_hidden_layers=1)})
    assert (check.status, check.subject) == ("ok", "draft-subject")
    facts = check.details["target"]
    assert facts["config_vocab_size"] == 260 and facts["tokenizer_size"] == 260
    assert facts["special_ids"] == {"bos": [256], "eos": [257], "pad": []}


def test_content_hash_ignores_formatting_and_merge_spelling(tmp_path) -> None:
    a = write_model(tmp_path / "a")
    b = write_model(tmp_path / "b", tokenizer=tokenizer_json(merges=[["t1", "t2"], ["t3", "t4"]]))  # newer pair form
    data = json.loads((b / "tokenizer.json").read_text())
    data["truncation"] = {"max_length": 512}  # a setting that does not change which id means what
    (b / "tokenizer.json").write_text(json.dumps(data, indent=4, sort_keys=True))
    assert content_sha256(read_model(a, "a")) == content_sha256(read_model(b, "b"))
    c = write_model(tmp_path / "c", tokenizer=tokenizer_json(merges=["t1 t3"]))
    assert content_sha256(read_model(c, "c")) != content_sha256(read_model(a, "a"))


def test_llama3_style_vocab_mismatch_is_an_error_naming_the_fields(tmp_path) -> None:
    # The 128000 vs 128256 crash in small: the draft lacks the ids of the target's special tokens.
    check = compare(tmp_path, draft_kwargs={"config": llama_config(vocab_size=256), "tokenizer": tokenizer_json(special=())})
    assert check.status == "error"
    assert "vocab_size (config.json) 256 vs 260 (draft vs target)" in check.message
    assert "tokenizer vocabulary 256 vs 260 ids" in check.message


def test_different_merges_with_equal_sizes_is_an_error(tmp_path) -> None:
    check = compare(tmp_path, draft_kwargs={"tokenizer": tokenizer_json(merges=["t5 t6"])})
    assert check.status == "error" and "tokenizer content" in check.message
    assert "vocab_size" not in check.message


def test_padding_only_vocab_difference_is_a_warning(tmp_path) -> None:
    check = compare(tmp_path, draft_kwargs={"config": llama_config(vocab_size=320)})  # Qwen-style padded embedding
    assert check.status == "warn" and "only embedding padding" in check.message


@pytest.mark.parametrize(
    ("draft_config", "draft_generation", "status", "field"),
    [
        # config.json and tokenizer_config.json ("<s>" = 256) disagree: the draft's BOS is ambiguous
        (llama_config(bos_token_id=1), None, "error", "bos_token_id [1, 256] vs 256"),
        # instruct checkpoints list extra EOS ids: overlapping sets only warn
        (llama_config(eos_token_id=None), {"eos_token_id": [257, 259]}, "warn", "eos_token_id [257, 259] vs 257"),
        (llama_config(pad_token_id=0), None, "warn", "pad_token_id 0 vs none"),
    ],
)
def test_special_token_ids(tmp_path, draft_config, draft_generation, status, field) -> None:
    check = compare(tmp_path, draft_kwargs={"config": draft_config, "generation_config": draft_generation})
    assert check.status == status and field in check.message


def test_disjoint_eos_is_an_error(tmp_path) -> None:
    check = compare(tmp_path, draft_kwargs={"config": llama_config(eos_token_id=259),
                                            "tokenizer_config": {"bos_token": "<s>", "eos_token": "<eot>"}})
    assert check.status == "error" and "eos_token_id 259 vs 257" in check.message


def test_missing_tokenizer_files_warn(tmp_path) -> None:
    check = compare(tmp_path, draft_kwargs={"tokenizer": None, "tokenizer_config": {}})
    assert check.status == "warn" and "draft has no tokenizer.json" in check.message


def test_sentencepiece_only_folders_compare_the_model_file(tmp_path) -> None:
    folders = []
    for name, payload in [("a", b"spm-1"), ("b", b"spm-1"), ("c", b"spm-2")]:
        folder = write_model(tmp_path / name, tokenizer=None, tokenizer_config={})
        (folder / "tokenizer.model").write_bytes(payload)
        folders.append(read_model(folder, name))
    assert compare_tokenizers(folders[0], folders[1], "b").status == "ok"
    assert compare_tokenizers(folders[0], folders[2], "c").status == "error"
    assert tokenizer_facts(folders[0]).content_sha256.startswith("sentencepiece:")
