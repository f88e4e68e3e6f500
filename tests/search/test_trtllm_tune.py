"""Tuning with --engine trtllm, run for real against the fake TensorRT-LLM (tests/engines/trtllm/
fake_trtllm) in the tuner's worker processes: the preflight decides which drafts are tuned, the LLM
is built for the study's largest concurrency, and every trial is measured by the TensorRT-LLM runner."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

import hf_model_factory as hf
from autotune.engines.base import EngineConfig
from autotune.engines.trtllm.engine import RUNNER_FACTORY
from autotune.engines.trtllm.runner import TrtLlmRunner
from autotune.errors import ConfigurationError
from autotune.models import folder as folder_module
from autotune.models.fit import MEMORY_MARGIN
from autotune.report import load_study, render_html
from autotune.search import TuneOptions, list_studies, study_listing, tune
from autotune.search.setup import set_up_study
from autotune.store import open_database, performance
from autotune.workload import Request, Workload

WORKLOAD = Workload("w", [Request("def parse(argv):", 8), Request("class Cache:", 6), Request("import os", 5)])
GPU_BYTES = 80 << 30


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, str]:
    """An MTP target, a draft sharing its tokenizer and one whose special tokens differ."""
    target = hf.write_model(tmp_path / "target", hf.llama_config(architectures=["DeepseekV3ForCausalLM"],
                                                                 num_nextn_predict_layers=1))
    small = hf.write_model(tmp_path / "small", hf.llama_config(num_hidden_layers=1))
    other = hf.write_model(tmp_path / "other-tokenizer", hf.llama_config(num_hidden_layers=1),
                           tokenizer=hf.tokenizer_json(special=("<bos>", "</s>", "<pad>", "<eot>")))
    return {"target": str(target), "small": str(small), "other": str(other)}


def trtllm_options(folders: dict[str, str], gpu, **overrides) -> TuneOptions:
    fields = {
        "engine": "trtllm", "target": folders["target"], "drafts": (folders["small"], folders["other"]),
        "max_depth": 2, "concurrencies": (1, 2), "hardware": gpu(GPU_BYTES), "workload": WORKLOAD, "n_trials": 6,
        "max_repetitions": 3, "confirm_seconds": 1.0,
    }
    return TuneOptions(**{**fields, **overrides})


def test_the_plan_runs_the_preflight_and_builds_one_llm_for_the_largest_batch(fake_trtllm, folders, gpu) -> None:
    setup = set_up_study(trtllm_options(folders, gpu))
    assert list(setup.drafts) == ["small"]
    assert list(setup.excluded_drafts) == ["other-tokenizer"]
    assert "tokenizer differs from the target" in setup.excluded_drafts["other-tokenizer"]
    assert setup.space.methods == ("none", "mtp", "draft", "ngram")  # mtp: the target ships a module
    assert setup.search_space_record()["excluded_drafts"] == setup.excluded_drafts
    spec = setup.engine_spec
    assert spec.factory == RUNNER_FACTORY
    assert spec.kwargs["max_batch_size"] == 2 and spec.kwargs["target"] == str(Path(folders["target"]).resolve())
    assert setup.drafts["small"].engine_arg == str(Path(folders["small"]).resolve())
    assert setup.target.footprint.n_mtp == 1 and setup.target.footprint.weight_bytes > 0


def test_a_study_reads_each_model_folder_once(fake_trtllm, folders, gpu, monkeypatch) -> None:
    """The preflight reads each folder; the setup and the worker's runner reuse what it read."""
    reads: Counter[Path] = Counter()
    read_model = folder_module.read_model

    def counted(path, role):
        reads[Path(path).resolve()] += 1
        return read_model(path, role)

    monkeypatch.setattr(folder_module, "read_model", counted)
    setup = set_up_study(trtllm_options(folders, gpu))
    # The runner the tuner's worker builds, here in-process: without max_batch_size, load() checks
    # each configuration against the folders without building an LLM (nor importing tensorrt_llm).
    runner = TrtLlmRunner(**{**setup.engine_spec.kwargs, "max_batch_size": None})
    for config in (EngineConfig("none"), EngineConfig("mtp", 2), EngineConfig("draft", 2, folders["small"])):
        runner.load(config)
    assert reads == {Path(folder).resolve(): 1 for folder in folders.values()}


def test_default_concurrencies_come_from_the_gpu_memory(fake_trtllm, folders, gpu) -> None:
    setup = set_up_study(trtllm_options(folders, gpu, concurrencies=None))
    assert setup.space.concurrencies == (1, 2, 4, 8, 16, 32, 64)  # GPU_MAX_DEFAULT_CONCURRENCY: the memory allows more
    tight = int(setup.memory.required_bytes("none", 0, 2) / (1 - MEMORY_MARGIN)) - 1  # a byte short of batch 2
    assert set_up_study(trtllm_options(folders, gpu, concurrencies=None, hardware=gpu(tight))).space.concurrencies == (1,)


def test_a_fingerprint_follows_the_folder_contents(fake_trtllm, folders, gpu, tmp_path) -> None:
    before = set_up_study(trtllm_options(folders, gpu)).target.fingerprint
    hf.write_model(Path(folders["target"]), hf.llama_config(architectures=["DeepseekV3ForCausalLM"],
                                                            num_nextn_predict_layers=2))
    assert set_up_study(trtllm_options(folders, gpu)).target.fingerprint != before


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"target": None}, "needs --target MODEL_FOLDER"),
        ({"drafts": ("missing-folder",)}, "draft folder missing-folder does not exist"),
        ({"methods": ("draft",), "drafts": ("OTHER",)}, "every draft failed the preflight: other-tokenizer:"),
    ],
)
def test_bad_trtllm_studies_fail_before_anything_runs(fake_trtllm, folders, gpu, overrides, message) -> None:
    overrides = {k: tuple(folders["other"] if d == "OTHER" else d for d in v) if k == "drafts" else v
                 for k, v in overrides.items()}
    with pytest.raises(ConfigurationError, match=message):
        set_up_study(trtllm_options(folders, gpu, **overrides))


def test_a_cpu_machine_cannot_tune_trtllm(fake_trtllm, folders, cpu_profile) -> None:
    with pytest.raises(ConfigurationError, match="needs an NVIDIA GPU"):
        set_up_study(trtllm_options(folders, lambda _bytes: cpu_profile()))


def test_a_study_without_drafts_tunes_mtp_and_ngram(fake_trtllm, folders, gpu) -> None:
    setup = set_up_study(trtllm_options(folders, gpu, drafts=("builtin",)))
    assert setup.space.methods == ("none", "mtp", "ngram") and setup.excluded_drafts == {}


@pytest.mark.slow  # a whole stand-in study; the guided one stays in the quick tier
def test_tune_measures_every_trial_with_the_trtllm_runner(fake_trtllm, folders, gpu, sqlite_url) -> None:
    options = trtllm_options(folders, gpu, db_url=sqlite_url, study_name="gpu", methods=("none", "mtp", "draft"),
                             max_depth=1, sampler="grid", n_trials=None, seed=0, trial_timeout_s=120)
    result = tune(options)
    assert result.status == "complete"
    screened = [row for row in result.rows if row.phase == "screening"]
    assert [row.state for row in screened] == ["complete"] * 6  # none, mtp@1, draft@1 at batch 1 and 2
    assert {(row.method, row.concurrency) for row in screened} == {
        (m, b) for m in ("none", "mtp", "draft") for b in (1, 2)
    }
    generated = [event for event in fake_trtllm() if event["event"] == "generate"]
    assert generated and all(event["pid"] != os.getpid() for event in generated)  # in worker processes
    spec_rows = [row for row in result.rows if row.method != "none"]
    assert all(row.drafted_tokens > 0 for row in spec_rows)  # counted by the runner
    confirmed = [row for row in spec_rows if row.phase == "confirmation"]
    assert confirmed and all(row.speedup is not None and row.repetitions >= 3 for row in confirmed)
    inits = [event for event in fake_trtllm() if event["event"] == "init"]
    assert inits and all(event["kwargs"]["max_batch_size"] == 2 for event in inits)
    # One worker process for the whole study (it was 6: timings, one per screened configuration, one
    # per confirmed concurrency). Its builds: the step timings' (mtp@1 and draft@1 forced, the baseline
    # last and kept), then one per configuration for both concurrency levels of the screening (none reuses
    # the timings' LLM). Confirmation still builds at every switch of its rounds (one LLM at a time on
    # a GPU), and how many rounds it runs depends on how busy the machine is.
    assert result.worker_starts == 1 and len({event["pid"] for event in inits}) == 1
    kinds = [(event["kwargs"].get("speculative_config") or {}).get("class", "none") for event in inits]
    assert kinds[:5] == ["MTPDecodingConfig", "DraftTargetDecodingConfig", "none", "MTPDecodingConfig",
                         "DraftTargetDecodingConfig"]
    screened_builds = [row.extra["model_loads"] for row in screened]
    assert sum(screened_builds) == 2 and sorted(screened_builds) == [0, 0, 0, 0, 1, 1]
    listing = study_listing(sqlite_url, "gpu")
    assert sum(row["builds"] for row in listing.row_dicts()) == len(inits) - 3  # all but the timings'
    assert any(line.startswith("Builds (engine builds or model loads): ") for line in result.summary_lines())
    # The answer at --max-depth 1 says so, in the summary and in autotune trials.
    assert "mtp@1 sits at --max-depth 1: deeper may be faster; rerun with --max-depth 3." in result.summary_lines()
    assert any("sits at --max-depth 1" in line for line in listing.lines())
    page = render_html(load_study(sqlite_url, "gpu"), {})  # the report's page, without its plots
    assert "mtp@1 sits at --max-depth 1" in page and "Builds (engine builds or model loads): " in page
    assert list(result.search_space["excluded_drafts"]) == ["other-tokenizer"]
    assert studies_engine(sqlite_url) == ["trtllm"]
    assert any(line.startswith("Draft other-tokenizer left out by the preflight:") for line in result.summary_lines())
    assert result.profile is not None
    # Step costs were timed by the TensorRT-LLM runner at forced acceptance (issue 13, item 7), so the
    # performance model has a cost profile for this engine.
    assert {event["forced_accepted"] for event in inits} == {0, 1}  # timing builds at depth 1, trials at 0
    with open_database(sqlite_url) as database, database.session() as session:
        (costs,) = performance.cost_profiles(session)
        assert costs.engine == "trtllm" and costs.source == "timed"
        assert {(p["method"], p["concurrency"]) for p in costs.points} >= {("none", 1), ("mtp", 2), ("draft", 2)}
        assert all(p["verify_s"] > 0 and p["steps"] > 0 for p in costs.points)
        assert all(p["drafted_per_step"] == 1.0 for p in costs.points if p["method"] == "mtp")


def test_the_model_guided_search_runs_on_trtllm_timings(fake_trtllm, folders, gpu, sqlite_url) -> None:
    """With the runner's forced-acceptance timings (item 7) --sampler model works for TensorRT-LLM: a
    trial carries the prediction made before it ran, except a proposer's first run, which gives the
    model its acceptance profile (as with the embedded engine)."""
    options = trtllm_options(folders, gpu, db_url=sqlite_url, study_name="guided", methods=("none", "mtp"),
                             drafts=("builtin",), max_depth=1, sampler="model", n_trials=4, seed=0,
                             trial_timeout_s=120, confirm=False)
    result = tune(options)
    measured = sorted((row for row in result.rows if row.phase == "screening" and row.state == "complete"),
                      key=lambda row: row.trial_number)
    first_mtp = next(row for row in measured if row.method == "mtp")
    # No baseline is planned: the MTP calibration run comes first; the guided search may stop before
    # the budget once nothing left could win, but MTP at the other concurrency has no incumbent yet,
    # so it is measured; every later trial (a baseline only where it could lead) is predicted.
    others = [row for row in measured if row is not first_mtp]
    assert measured[0] is first_mtp and others and all(row.prediction is not None for row in others)


def studies_engine(db_url: str) -> list[str]:
    return [study.engine for study in list_studies(db_url)]
