"""Exports: every key a serving engine reads is one its source defines, the values obey the engine's
own validation rules, the scripts run, and files are written atomically and never clobbered."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

import profile_factory as factory
from autotune import serving
from autotune.errors import ConfigurationError
from autotune.profiles import OutputExistsError, ProfileNotFoundError, show_profile
from autotune.engines.vllm.mapping import VLLM_OFF_RULE
from autotune.profiles.analysis import serving_schedule
from autotune.serving.off_depths import deployed_schedule
from autotune.serving.vllm import vllm_batch_schedule

# Field names per class, read in NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py (1.0 release, 1.2
# release, main at commit 0004396 of 2026); only the fields autotune may write are listed per class.
TRTLLM_FIELDS = {
    "TorchLlmArgs": {"max_batch_size", "max_num_tokens", "kv_cache_config", "cuda_graph_config", "speculative_config"},
    "KvCacheConfig": {"enable_block_reuse", "free_gpu_memory_fraction", "max_tokens", "enable_partial_reuse"},
    "CudaGraphConfig": {"batch_sizes", "max_batch_size", "enable_padding"},
    # DecodingBaseConfig (+ the decoding_type discriminator). speculative_model_dir: 1.0's field name,
    # a validation alias of speculative_model since 1.2.
    "DecodingBaseConfig": {"decoding_type", "max_draft_len", "speculative_model_dir", "max_concurrency",
                           "draft_len_schedule", "allow_advanced_sampling"},
    "MTPDecodingConfig": {"num_nextn_predict_layers", "use_relaxed_acceptance_for_thinking", "relaxed_topk",
                          "relaxed_delta", "use_mtp_vanilla"},
    "NGramDecodingConfig": {"max_matching_ngram_size", "is_keep_all", "is_use_oldest", "is_public_pool"},
    "DraftTargetDecodingConfig": set(),
}
# decoding_type spellings: MTP and NGram everywhere; DraftTarget in 1.0's dispatch table and NVIDIA's
# 1.2/1.3 serving examples, Draft_Target as the 1.2+ class literal.
TRTLLM_DECODING_TYPES = {"mtp": {"MTP"}, "ngram": {"NGram"}, "draft": {"DraftTarget", "Draft_Target"}}
SPEC_CLASS = {"mtp": "MTPDecodingConfig", "ngram": "NGramDecodingConfig", "draft": "DraftTargetDecodingConfig"}
# tensorrt_llm/commands/bench.py and tensorrt_llm/bench/benchmark/throughput.py
TRTLLM_BENCH_FLAGS = {"--model", "--model_path", "--backend", "--dataset", "--extra_llm_api_options", "--max_batch_size",
                      "--max_num_tokens", "--concurrency", "--streaming", "--report_json", "--num_requests", "--warmup"}
# vllm/config/speculative.py SpeculativeConfig, and the serve flags of vllm/engine/arg_utils.py (vLLM 0.32.0)
VLLM_SPEC_FIELDS = {"method", "model", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min",
                    "draft_tensor_parallel_size", "num_speculative_tokens_per_batch_size"}
VLLM_METHODS = {"ngram", "draft_model", "mtp", "deepseek_mtp", "eagle", "eagle3", "medusa"}
VLLM_FLAGS = {"--max-num-seqs", "--max-num-batched-tokens", "--speculative-config", "--gpu-memory-utilization"}
# sglang/srt/server_args.py
SGLANG_FLAGS = {"--model-path", "--max-running-requests", "--cuda-graph-max-bs", "--speculative-algorithm",
                "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                "--speculative-draft-model-path"}
SGLANG_ALGORITHMS = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"}

SCHEDULED = {1: ("mtp", 4), 2: ("mtp", 4), 4: ("mtp", 2), 8: ("none", 0), 16: ("none", 0)}
PROFILES = {
    "mtp": factory.profile_data("mtp", 4, 1, SCHEDULED),
    "draft": factory.profile_data("draft", 2, 2, {1: ("draft", 2), 2: ("draft", 2), 8: ("none", 0)}),
    "ngram": factory.profile_data("ngram", 3, 1, {1: ("ngram", 3), 4: ("ngram", 3)}, details={"max_ngram": 4}),
    "none": factory.profile_data("none", 0, 8, {1: ("mtp", 2), 8: ("none", 0)}),
}


def trtllm(profile) -> dict:  # noqa: ANN001
    return yaml.safe_load(serving.export_profile(profile, "trtllm"))


def check_trtllm_rules(config: dict, method: str) -> None:
    """The checks TensorRT-LLM's validators apply, plus autotune's max_num_tokens rule."""
    assert set(config) <= TRTLLM_FIELDS["TorchLlmArgs"]
    assert set(config["kv_cache_config"]) <= TRTLLM_FIELDS["KvCacheConfig"]
    assert 0 < config["kv_cache_config"]["free_gpu_memory_fraction"] <= 1
    graphs = config["cuda_graph_config"]
    assert set(graphs) <= TRTLLM_FIELDS["CudaGraphConfig"]
    assert graphs["max_batch_size"] == max(graphs["batch_sizes"]) == config["max_batch_size"]
    spec = config.get("speculative_config")
    if method == "none":
        assert spec is None
        return
    assert set(spec) <= TRTLLM_FIELDS["DecodingBaseConfig"] | TRTLLM_FIELDS[SPEC_CLASS[method]]
    assert spec["decoding_type"] in TRTLLM_DECODING_TYPES[method]
    assert spec["max_draft_len"] >= 1
    assert config["max_num_tokens"] >= config["max_batch_size"] * (1 + spec["max_draft_len"])
    assert not ("max_concurrency" in spec and "draft_len_schedule" in spec)  # mutually exclusive on main
    schedule = spec.get("draft_len_schedule")
    if schedule is not None:
        assert schedule[1] == schedule[min(schedule)] == spec["max_draft_len"]
        assert all(0 <= d <= spec["max_draft_len"] for d in schedule.values())
        assert set(schedule) <= set(graphs["batch_sizes"])


@pytest.mark.parametrize("method", sorted(PROFILES))
def test_trtllm_yaml_uses_only_documented_fields_and_passes_their_rules(method: str) -> None:
    config = trtllm(PROFILES[method])
    check_trtllm_rules(config, method)


def test_trtllm_mtp_writes_both_depth_names_and_the_schedule() -> None:
    spec = trtllm(PROFILES["mtp"])["speculative_config"]
    # Where none won (8, 16), one-model MTP runs at its floor, draft length 1 (TensorRT-LLM PR #16888).
    assert spec == {"decoding_type": "MTP", "max_draft_len": 4, "num_nextn_predict_layers": 4,
                    "draft_len_schedule": {1: 4, 2: 4, 4: 2, 8: 1, 16: 1},
                    "allow_advanced_sampling": True}  # 1.2 (the default) samples one-model MTP only with it


def test_trtllm_draft_target_names_the_draft_and_switches_off_with_max_concurrency() -> None:
    config = trtllm(PROFILES["draft"])
    assert config["speculative_config"] == {"decoding_type": "Draft_Target", "max_draft_len": 2,
                                            "speculative_model_dir": "/models/tiny-draft", "max_concurrency": 2}
    assert config["kv_cache_config"] == {"free_gpu_memory_fraction": 0.8, "enable_block_reuse": False}


def test_trtllm_ngram_fields_describe_autotunes_proposer() -> None:
    spec = trtllm(PROFILES["ngram"])["speculative_config"]
    assert spec == {"decoding_type": "NGram", "max_draft_len": 3, "max_matching_ngram_size": 4, "is_keep_all": True,
                    "is_use_oldest": False, "is_public_pool": False}


def test_trtllm_header_documents_the_profile_and_builtin_models() -> None:
    profile = replace(factory.profile_data("draft", 2, 2, {2: ("draft", 2)}, draft_source="builtin:draft"), chosen_trial=5)
    text = serving.export_profile(profile, "trtllm")
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("deployment profile 7, trial 5: draft@2 with draft tiny-draft (dddd000011112222) at concurrency 2" in line
               for line in header)
    assert any(line.endswith("measured: 123.4 tokens/s, 1.50x vs none, TPOT p50 8.10 ms (one screening run, no interval)")
               for line in header)
    assert any("trtllm-serve MODEL --backend pytorch --extra_llm_api_options THIS_FILE" in line for line in header)
    assert any("NOTE: tiny-draft is autotune's built-in draft (builtin:draft)" in line for line in header)
    assert trtllm(profile)["speculative_config"]["speculative_model_dir"] == "tiny-draft"


def header_of(text: str) -> list[str]:
    return [line.removeprefix("# ") for line in text.splitlines() if line.startswith("#")]


@pytest.mark.parametrize("fmt", ["trtllm", "trtllm-bench", "vllm", "sglang"])
def test_header_states_the_figures_with_their_intervals(fmt: str) -> None:
    profile = factory.profile_data("mtp", 4, 1, {1: ("mtp", 4, 2.19, 1.89, 2.53), 4: ("mtp", 2, 1.31, 1.22, 1.40),
                                                  8: ("none", 0)}, confirmed=True,
                                   details={"tied_with": ["mtp@4", "mtp@3"]})
    header = header_of(serving.export_profile(profile, fmt))
    assert ("measured: 841.8 tokens/s ±8.4 % (n=7), 2.19x [1.89, 2.53] vs none, TPOT p50 4.20 ms ±2.0 %, "
            "95 % intervals") in header
    assert "within noise of mtp@3 at concurrency 1: mtp@4 is the simplest of them to operate" in header
    if fmt != "trtllm-bench":
        assert "  concurrency 1: depth 4 (mtp@4, 2.19x [1.89, 2.53], n=7)" in header
        assert "  concurrency 4: depth 2 (mtp@2, 1.31x [1.22, 1.40], n=7)" in header
        assert "  concurrency 8: depth 0 (none, one screening run)" in header


def test_header_of_an_unconfirmed_profile_says_one_screening_run() -> None:
    profile = replace(factory.profile_data("mtp", 4, 1, {1: ("mtp", 4), 8: ("none", 0)}), speedup=None)
    header = header_of(serving.export_profile(profile, "trtllm"))
    assert "measured: 123.4 tokens/s, TPOT p50 8.10 ms (one screening run, no interval)" in header
    assert "  concurrency 1: depth 4 (mtp@4, one screening run, no speedup measured)" in header
    assert not any("within noise" in line or "±" in line for line in header)


def test_header_of_a_stored_confirmed_profile(stored) -> None:  # noqa: ANN001
    url, profile_id = stored
    profile = show_profile(url, profile_id)
    header = header_of(serving.export_profile(profile, "trtllm"))
    tokens, speedup = profile.estimate("tokens_per_s"), profile.estimate("speedup")
    measured = next(line for line in header if line.startswith("measured: "))
    assert measured.startswith(f"measured: {tokens.value:.1f} tokens/s ±{100 * tokens.relative_half_width:.1f} % "
                               f"(n={factory.ROUNDS}), {speedup.value:.2f}x [{speedup.low:.2f}, {speedup.high:.2f}] vs none")
    assert measured.endswith("95 % intervals")
    assert f"deployment profile {profile_id}, confirmation row {profile.chosen_trial}: mtp@2 at concurrency 4" in header[0]
    assert "within noise of mtp@3 at concurrency 4: mtp@2 is the simplest of them to operate" in header
    schedule = [line for line in header if line.startswith("  concurrency ") and ": depth " in line]
    assert len(schedule) == len(factory.CONCURRENCIES)
    # Studied on the embedded engine: what TensorRT-LLM runs where none won is floored and unmeasured.
    assert ("  concurrency 16: draft length 1: unmeasured (the profile was measured on the embedded engine, "
            "not TensorRT-LLM)") in header
    assert schedule[-1].startswith("  concurrency 16: depth 0 (none, no speculation measured faster")
    row = next(r for r in profile.per_concurrency if r["concurrency"] == 4)
    assert (f"  concurrency 4: depth 2 (mtp@2, {row['speedup']:.2f}x [{row['speedup_low']:.2f}, "
            f"{row['speedup_high']:.2f}], n={factory.ROUNDS}; within noise of mtp@3)") in schedule


def command_words(script: str, program: str) -> list[str]:
    """The words of the script's command that runs ``program`` (continuation lines joined)."""
    joined = script.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if program in line.split()[:2])
    return shlex.split(line.removeprefix("exec "))


def flags(words: list[str]) -> set[str]:
    return {w for w in words if w.startswith("--")}


def run_script(script: str, tmp_path: Path, program: str, env: dict[str, str] | None = None,
               args: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """Run ``script`` (with ``args``) with a fake ``program`` on PATH that records its arguments (and
    the config file)."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    fake = fake_bin / program
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\0" "$@" > "$RECORD"\n'
                    'for a in "$@"; do [[ "$a" == *.yaml ]] && cat "$a" > "$RECORD.yaml"; done; exit 0\n')
    fake.chmod(0o755)
    path = tmp_path / "script.sh"
    path.write_text(script)
    record = tmp_path / "record"
    run_env = {"PATH": f"{fake_bin}:{os.environ['PATH']}", "RECORD": str(record), **(env or {})}
    subprocess.run(["bash", str(path), *args], check=True, env=run_env, cwd=tmp_path, capture_output=True, timeout=30)
    config = Path(f"{record}.yaml")
    # Bytes, not read_text(): universal newlines would turn a "\r\n" inside an argument into "\n".
    return record.read_bytes().decode().split("\0")[:-1], config.read_bytes().decode() if config.exists() else ""


@pytest.mark.parametrize("method", sorted(PROFILES))
def test_trtllm_bench_script_remeasures_with_the_same_yaml(method: str, tmp_path: Path) -> None:
    profile = PROFILES[method]
    script = serving.export_profile(profile, "trtllm-bench")
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    assert flags(command_words(script, "trtllm-bench")) <= TRTLLM_BENCH_FLAGS
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text('{"task_id": 0, "prompt": "def f():", "output_tokens": 16}\n')
    args, config = run_script(script, tmp_path, "trtllm-bench", {"DATASET": str(dataset), "REPORT_JSON": "r.json"})
    assert args[:3] == ["--model", "tiny-target", "--model_path"] and "throughput" in args
    assert args[args.index("--concurrency") + 1] == str(profile.concurrency)
    assert args[args.index("--dataset") + 1] == str(dataset) and args[args.index("--report_json") + 1] == "r.json"
    assert yaml.safe_load(config) == trtllm(profile)


def test_trtllm_bench_script_demands_a_dataset(tmp_path: Path) -> None:
    script = serving.export_profile(PROFILES["mtp"], "trtllm-bench")
    with pytest.raises(subprocess.CalledProcessError) as failure:
        run_script(script, tmp_path, "trtllm-bench")
    assert b"set DATASET" in failure.value.stderr


def vllm_lookup(schedule: list[list[int]], max_num_seqs: int, max_depth: int) -> dict[int, int]:
    """Concurrency -> draft length as vLLM 0.32.0 reads ``num_speculative_tokens_per_batch_size``
    (vllm/v1/spec_decode/dynamic/utils.py), with its validation: inclusive ranges, sorted, disjoint,
    the first starting at 1, depths >= 0; gaps and the tail carry the previous depth; clamped to
    ``num_speculative_tokens``."""
    assert schedule and schedule[0][0] == 1
    assert all(len(entry) == 3 and 0 < entry[0] <= entry[1] and entry[2] >= 0 for entry in schedule)
    assert all(a[1] < b[0] for a, b in zip(schedule, schedule[1:]))
    lookup = {}
    for concurrency in range(1, max_num_seqs + 1):
        depth = [d for first, _, d in schedule if first <= concurrency][-1]  # its range's, or carried forward
        lookup[concurrency] = min(depth, max_depth)
    return lookup


@pytest.mark.parametrize("method", sorted(PROFILES))
def test_vllm_script(method: str, tmp_path: Path) -> None:
    profile = PROFILES[method]
    script = serving.export_profile(profile, "vllm")
    args, _ = run_script(script, tmp_path, "vllm", args=("--host", "127.0.0.1", "--port", "8123"))
    assert args[:2] == ["serve", "/models/tiny-target"]
    assert args[-4:] == ["--host", "127.0.0.1", "--port", "8123"]  # the script's arguments go on to vllm serve
    args = args[:-4]
    assert flags(args) <= VLLM_FLAGS
    deployed = deployed_schedule(profile, VLLM_OFF_RULE)
    assert args[args.index("--max-num-seqs") + 1] == str(deployed.max_batch_size)
    if method == "none":
        assert "--speculative-config" not in args
        return
    spec = json.loads(args[args.index("--speculative-config") + 1])
    assert set(spec) <= VLLM_SPEC_FIELDS and spec["method"] in VLLM_METHODS
    assert spec["num_speculative_tokens"] == deployed.max_draft_len
    expected = {"mtp": {}, "draft": {"model": "/models/tiny-draft"}, "ngram": {"prompt_lookup_max": 4, "prompt_lookup_min": 1}}
    rest = {k: v for k, v in spec.items() if k not in ("method", "num_speculative_tokens", "num_speculative_tokens_per_batch_size")}
    assert rest == expected[method]
    schedule = spec.get("num_speculative_tokens_per_batch_size")
    if schedule is None:
        assert len(set(deployed.depths.values())) == 1
        return
    # Every concurrency up to --max-num-seqs lies in a range (none is left to vLLM's gap rule), and
    # vLLM reads the measured depth at each measured concurrency.
    covered = [b for first, last, _ in schedule for b in range(first, last + 1)]
    assert covered == list(range(1, deployed.max_batch_size + 1))
    lookup = vllm_lookup(schedule, deployed.max_batch_size, spec["num_speculative_tokens"])
    assert {b: lookup[b] for b in deployed.depths} == deployed.depths


def test_vllm_schedules_the_draft_length_per_concurrency() -> None:
    """The measured draft length per concurrency (mtp: {1: 4, 2: 4, 4: 2, 8: 0, 16: 0}) as vLLM's
    inclusive ranges, each depth held up to the next measured concurrency; where none won and K = 0
    was not measured, depth 1 (K = 0 still runs the drafter: tests/serving/test_off_depths.py)."""
    def schedule(name: str):  # noqa: ANN202
        spec = json.loads(command_words(serving.export_profile(PROFILES[name], "vllm"), "vllm")[-2])
        return spec.get("num_speculative_tokens_per_batch_size")

    assert schedule("mtp") == [[1, 3, 4], [4, 7, 2], [8, 16, 1]]
    assert schedule("draft") == [[1, 7, 2], [8, 8, 1]]  # none won from concurrency 8: floored, K = 0 unmeasured
    assert schedule("ngram") is None  # depth 3 at every measured concurrency
    one = factory.profile_data("mtp", 3, 1, {4: ("mtp", 3), 8: ("mtp", 1)})
    assert vllm_batch_schedule(serving_schedule(one)) == [[1, 7, 3], [8, 8, 1]]  # concurrency 1 added by the schedule
    text = serving.export_profile(PROFILES["mtp"], "vllm")
    assert "speculates at every concurrency" not in text and "num_speculative_tokens_per_batch_size: [first" in text


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_accepts_the_exported_arguments(vllm_python: Path, tmp_path: Path) -> None:
    """vLLM 0.32.0's own ``vllm serve`` parser and SpeculativeConfig fields take every exported
    script's arguments, and its schedule lookup gives the measured depths."""
    from vllm_support import vllm_env

    exported = {}
    for method, profile in PROFILES.items():
        words = command_words(serving.export_profile(profile, "vllm"), "vllm")
        assert words[:2] == ["vllm", "serve"] and words[-1] == "$@"
        exported[method] = words[2:-1]
    check = r"""
import dataclasses, json, sys
from vllm.config.speculative import SpeculativeConfig
from vllm.engine.arg_utils import EngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
out = {}
for method, argv in json.loads(sys.argv[1]).items():
    args = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(argv)
    engine = EngineArgs.from_cli_args(args)
    spec = engine.speculative_config or {}
    schedule = spec.get("num_speculative_tokens_per_batch_size")
    out[method] = {
        "model": args.model_tag, "max_num_seqs": engine.max_num_seqs, "unknown": sorted(set(spec) - fields),
        "lookup": build_dynamic_sd_schedule_lookup(schedule, engine.max_num_seqs, spec["num_speculative_tokens"])
        if schedule else None,
    }
print(json.dumps(out))
"""
    result = subprocess.run([str(vllm_python), "-c", check, json.dumps(exported)], capture_output=True, text=True,
                            timeout=300, env=vllm_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    for method, profile in PROFILES.items():
        deployed = deployed_schedule(profile, VLLM_OFF_RULE)
        assert parsed[method]["model"] == "/models/tiny-target"
        assert parsed[method]["max_num_seqs"] == deployed.max_batch_size and parsed[method]["unknown"] == []
        lookup = parsed[method]["lookup"]
        if lookup is not None:
            assert {b: lookup[b] for b in deployed.depths} == deployed.depths


def test_every_exported_value_is_shell_quoted(tmp_path: Path) -> None:
    """A path with spaces, quotes, ``$(...)``, a backtick and line breaks (one before the YAML
    here-document's end word) reaches the engine as written, runs nothing, and breaks no comment."""
    hostile = "/models/it's a \"$(touch pwned)\" `touch pwned2` $HOME\nYAML\nrm -rf x"
    profile = factory.profile_data("draft", 2, 2, {1: ("draft", 2), 2: ("draft", 2), 8: ("none", 0)},
                                   draft_source=hostile)
    profile = replace(profile, target=replace(profile.target, source=hostile + "-target"))
    for fmt, program in (("vllm", "vllm"), ("sglang", "python"), ("trtllm-bench", "trtllm-bench")):
        script = serving.export_profile(profile, fmt)
        header = script.split("set -euo pipefail")[0].splitlines()[1:]
        assert header and all(line.startswith("#") for line in header)
        env = {"DATASET": "d.jsonl"} if fmt == "trtllm-bench" else None
        args, config = run_script(script, tmp_path, program, env)
        if fmt == "vllm":
            assert args[1] == hostile + "-target"
            assert json.loads(args[args.index("--speculative-config") + 1])["model"] == hostile
        elif fmt == "sglang":
            assert args[args.index("--model-path") + 1] == hostile + "-target"
            assert args[args.index("--speculative-draft-model-path") + 1] == hostile
        else:
            assert args[args.index("--model_path") + 1] == hostile + "-target"
            assert yaml.safe_load(config)["speculative_config"]["speculative_model_dir"] == hostile
    assert not list(tmp_path.glob("pwned*"))


@pytest.mark.parametrize("method", sorted(PROFILES))
def test_sglang_script(method: str, tmp_path: Path) -> None:
    profile = PROFILES[method]
    script = serving.export_profile(profile, "sglang")
    args, _ = run_script(script, tmp_path, "python")
    assert args[:2] == ["-m", "sglang.launch_server"]
    assert flags(args) <= SGLANG_FLAGS
    if method == "none":
        assert "--speculative-algorithm" not in args
        return
    assert args[args.index("--speculative-algorithm") + 1] in SGLANG_ALGORITHMS
    depth = serving_schedule(profile).max_draft_len
    assert args[args.index("--speculative-num-draft-tokens") + 1] == str(depth + 1)
    assert ("--speculative-draft-model-path" in args) == (method == "draft")


def test_engines_without_a_batch_switch_say_so() -> None:
    text = serving.export_profile(PROFILES["mtp"], "sglang")
    assert "speculates at every concurrency" in text and "{1: 4, 2: 4, 4: 2, 8: 0, 16: 0}" in text
    assert "speculates at every concurrency" not in serving.export_profile(PROFILES["none"], "sglang")


def test_json_export_is_the_whole_profile() -> None:
    document = json.loads(serving.export_profile(PROFILES["draft"], "json"))
    assert document["profile"]["method"] == "draft" and document["profile"]["draft"]["source"] == "/models/tiny-draft"


def test_unknown_format_is_refused_before_the_database_is_opened() -> None:
    with pytest.raises(ConfigurationError, match="unknown export format 'toml'; choose one of trtllm, trtllm-bench"):
        serving.write_export("sqlite:////nonexistent/folder/a.db", 1, "toml")
    with pytest.raises(ConfigurationError, match="unknown export format"):
        serving.export_profile(PROFILES["mtp"], "yaml")


def test_default_path_is_built_from_hardware_model_and_method() -> None:
    path = serving.default_export_path(PROFILES["mtp"], "trtllm")
    assert path == Path("profiles/1x-nvidia-h100-80gb-hbm3__tiny-target__mtp-d4-c1.trtllm.yaml")
    assert serving.default_export_path(PROFILES["none"], "vllm").name.endswith("__none-c8.vllm.sh")
    assert serving.slugify("  ÄÖ // ") == "unnamed"


@pytest.fixture
def stored(sqlite_url: str) -> tuple[str, int]:
    return sqlite_url, factory.populate(sqlite_url)["h100-old"]


def test_write_export_default_path_atomic_and_no_clobber(stored, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    url, profile_id = stored
    monkeypatch.chdir(tmp_path)
    path = serving.write_export(url, profile_id, "trtllm")
    assert path == Path("profiles/1x-nvidia-h100-80gb-hbm3__tiny-target__mtp-d2-c4.trtllm.yaml")
    expected = serving.export_profile(show_profile(url, profile_id), "trtllm")
    assert path.read_text() == expected
    check_trtllm_rules(yaml.safe_load(expected), "mtp")
    assert os.listdir(tmp_path / "profiles") == [path.name]  # no temporary file left behind

    path.write_text("edited by hand\n")
    with pytest.raises(OutputExistsError, match="exists; pass --force to overwrite it"):
        serving.write_export(url, profile_id, "trtllm")
    assert path.read_text() == "edited by hand\n"
    assert serving.write_export(url, profile_id, "trtllm", force=True).read_text() == expected


def test_write_export_to_a_chosen_file(stored, tmp_path: Path) -> None:  # noqa: ANN001
    url, profile_id = stored
    script = serving.write_export(url, profile_id, "vllm", output=tmp_path / "new" / "serve.sh")
    assert script.read_text().startswith("#!/usr/bin/env bash")
    assert script.stat().st_mode & stat.S_IXUSR
    json_path = serving.write_export(url, profile_id, "json", output=tmp_path / "p.json")
    assert not json_path.stat().st_mode & stat.S_IXUSR
    assert json.loads(json_path.read_text())["profile"]["study"]["name"] == "h100-old"
    with pytest.raises(ConfigurationError, match="is a folder"):
        serving.write_export(url, profile_id, "json", output=tmp_path)


def test_write_export_of_an_unknown_profile(stored) -> None:  # noqa: ANN001
    url, _ = stored
    with pytest.raises(ProfileNotFoundError, match="no deployment profile with id 4242"):
        serving.write_export(url, 4242, "trtllm")
