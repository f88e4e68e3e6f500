"""preflight() end to end on model folders written by the tests, and usable_drafts for the tuner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.engines.trtllm.checks import TRTLLM_SUPPORT
from autotune.engines.vllm.checks import VLLM_SUPPORT
from autotune.errors import ConfigurationError
from autotune.preflight import Check, PreflightSpace, preflight, usable_drafts
from hf_model_factory import llama_config, tokenizer_json, write_model

GIB = 1 << 30


@pytest.fixture
def folders(tmp_path):
    return {
        "target": write_model(tmp_path / "target", llama_config(num_nextn_predict_layers=1,
                                                                architectures=["DeepseekV3ForCausalLM"])),
        "good": write_model(tmp_path / "good", llama_config(num_hidden_layers=1)),
        "bad_vocab": write_model(tmp_path / "bad-vocab", llama_config(vocab_size=256), tokenizer=tokenizer_json(special=())),
        "short": write_model(tmp_path / "short", llama_config(max_position_embeddings=512)),
    }


def test_report_checks_every_pair_and_splits_the_drafts(folders, gpu) -> None:
    drafts = [folders["good"], folders["bad_vocab"], folders["short"]]
    report = preflight(folders["target"], drafts, TRTLLM_SUPPORT, hardware=gpu(80 * GIB),
                       space=PreflightSpace(concurrencies=[1, 4], seq_len=1024, depths=[1, 3]))
    by_subject = {s: {c.name: c.status for c in report.for_subject(s)} for s in ["target", *map(str, drafts)]}
    assert by_subject["target"] == {"architecture": "ok", "mtp": "ok", "max_num_tokens": "ok", "context_window": "ok",
                                    "memory": "ok"}
    assert by_subject[str(folders["good"])] == {"architecture": "ok", "tokenizer": "ok", "context_window": "ok", "memory": "ok"}
    assert by_subject[str(folders["bad_vocab"])]["tokenizer"] == "error"
    assert by_subject[str(folders["short"])]["context_window"] == "error"  # 512 < 1024 + 3 + 1
    assert not report.ok and report.target_errors == []
    usable, rejected = usable_drafts(report)
    assert usable == [folders["good"]]
    assert set(rejected) == {folders["bad_vocab"], folders["short"]}
    assert "vocab_size (config.json) 256 vs 260" in rejected[folders["bad_vocab"]]
    assert "context window 512 < 1028" in rejected[folders["short"]]
    data = json.loads(json.dumps(report.to_dict()))  # --json
    assert data["ok"] is False and data["engine"] == "trtllm" and len(data["checks"]) == len(report.checks)
    assert {"name", "status", "subject", "message", "details"} <= set(data["checks"][0])


def test_unreadable_draft_folder_rejects_that_draft_only(folders, tmp_path) -> None:
    missing = tmp_path / "missing"
    report = preflight(folders["target"], [folders["good"], missing], TRTLLM_SUPPORT)
    usable, rejected = usable_drafts(report)
    assert usable == [folders["good"]] and "is not a folder" in rejected[Path(missing)]
    memory = [c for c in report.checks if c.name == "memory"]
    assert [(c.status, c.subject) for c in memory] == [("warn", "target")]  # no hardware profile given


def test_target_problems_are_errors_about_the_target(folders, gpu) -> None:
    report = preflight(folders["good"], [], TRTLLM_SUPPORT, hardware=gpu(100_000),
                       space=PreflightSpace(methods=["none", "mtp"]))
    errors = {c.name for c in report.target_errors}
    assert errors == {"mtp", "memory"}  # no MTP modules though mtp was asked for; 100 kB of GPU memory


def test_the_engine_decides_what_it_runs(folders, gpu) -> None:
    # vLLM chunks long prompts (no tokens-per-step check) and has no MTP drafter for a Llama-shaped target.
    report = preflight(folders["target"], [folders["good"]], VLLM_SUPPORT, hardware=gpu(80 * GIB),
                       space=PreflightSpace(methods=["mtp"]))
    assert report.engine == "vllm" and "max_num_tokens" not in {c.name for c in report.checks}
    (mtp,) = [c for c in report.checks if c.name == "mtp"]
    assert mtp.status == "error" and "no MTP drafter" in mtp.message


def test_the_report_keeps_the_folders_it_read(folders, tmp_path) -> None:
    report = preflight(folders["target"], [folders["good"], tmp_path / "missing"], TRTLLM_SUPPORT)
    assert [model.path for model in report.models] == [folders["target"], folders["good"]]  # not the unreadable one
    assert report.models.get(folders["good"], "draft").config["num_hidden_layers"] == 1
    assert "models" not in report.to_dict()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"concurrencies": [0]}, "concurrency levels"),
        ({"concurrencies": []}, "concurrency levels"),
        ({"seq_len": 0}, "seq_len"),
        ({"depths": [17]}, "depths"),
        ({"methods": ["medusa"]}, "unknown method"),
    ],
)
def test_bad_options(folders, kwargs, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        preflight(folders["target"], [], TRTLLM_SUPPORT, space=PreflightSpace(**kwargs))


def test_bad_folders(folders, tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="target .* is not a folder"):
        preflight(tmp_path / "nothing", [], TRTLLM_SUPPORT)
    with pytest.raises(ConfigurationError, match="listed twice"):
        preflight(folders["target"], [folders["good"], folders["good"]], TRTLLM_SUPPORT)
    (folders["good"] / "config.json").write_text("{not json")
    report = preflight(folders["target"], [folders["good"]], TRTLLM_SUPPORT)
    assert "not valid JSON" in usable_drafts(report)[1][folders["good"]]


def test_check_status_is_validated() -> None:
    with pytest.raises(ValueError, match="status"):
        Check("x", "fine", "message")
