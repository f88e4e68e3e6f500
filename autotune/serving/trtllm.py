"""TensorRT-LLM exports: the ``--extra_llm_api_options`` YAML for trtllm-serve and a trtllm-bench
script that re-measures the profile with the same YAML.

The speculative block is the engine adapter's own (:func:`autotune.engines.trtllm.mapping.yaml_speculative_config`,
what :func:`~autotune.engines.trtllm.mapping.llm_arguments` hands the LLM when it measures); this
writer adds the batch limits and the per-concurrency schedule (``draft_len_schedule`` or
``max_concurrency``) of the serving schedule as TensorRT-LLM serves it (:func:`autotune.serving.off_depths.deployed_schedule`
with the adapter's :data:`~autotune.engines.trtllm.mapping.TRTLLM_OFF_RULE`): one-model MTP and
EAGLE-3 never get a draft length of 0 nor ``max_concurrency``.

Where the names come from (checked against the sources, not guessed): YAML keys in
``tensorrt_llm/llmapi/llm_args.py`` — ``BaseLlmArgs`` (max_batch_size, max_num_tokens,
kv_cache_config, speculative_config), ``TorchLlmArgs`` (cuda_graph_config), ``KvCacheConfig``,
``CudaGraphConfig``, ``DecodingBaseConfig`` (max_concurrency, draft_len_schedule), read in
NVIDIA/TensorRT-LLM at the 1.0 release, the 1.2 release and main (commit 0004396, 2026); the
speculative configuration classes are listed in :mod:`autotune.engines.trtllm.mapping`. The YAML is
written for one TensorRT-LLM version (``--trtllm-version``, default
:data:`~autotune.engines.trtllm.versions.DEFAULT_TRTLLM_VERSION`); what differs between versions,
with the copy of ``llm_args.py`` each rule was read in, is in :mod:`autotune.engines.trtllm.versions`
and docs/trtllm.md. trtllm-bench flags: ``tensorrt_llm/commands/bench.py`` (--model, --model_path)
and ``tensorrt_llm/bench/benchmark/throughput.py`` (--backend, --dataset, --extra_llm_api_options,
--max_batch_size, --concurrency, --streaming, --report_json).
"""

from __future__ import annotations

import shlex
from typing import Any

from autotune.engines.limits import DEFAULT_MAX_NUM_TOKENS
from autotune.engines.trtllm.mapping import KV_CACHE_FRACTION, TRTLLM_OFF_RULE, yaml_speculative_config
from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION, TrtllmRules, trtllm_rules
from autotune.models.kind import EAGLE3
from autotune.profiles.analysis import ServingSchedule
from autotune.profiles.data import DeploymentProfile
from autotune.serving.header import builtin_notes, header
from autotune.serving.off_depths import deployed_schedule, off_notes
from autotune.serving.parallel import planned_parallelism
from autotune.serving.schedule import schedule_notes
from autotune.serving.speculation import engine_kind, max_ngram, measured_config, serving_model, speculative_kind
from autotune.serving.text import ShellVar, command, comments, option, slugify, yaml_text

# Block reuse stays off for draft-target, as in NVIDIA's draft-target serving examples (a
# measurement turns it off for every method: autotune.engines.trtllm.mapping.llm_arguments).
KV_BLOCK_REUSE = {"none": True, "mtp": True, "ngram": True, "draft": False}


def trtllm_yaml(profile: DeploymentProfile, schedule: ServingSchedule, rules: TrtllmRules) -> str:
    """The ``trtllm`` export: comments on how to serve and measure it, then :func:`trtllm_config`."""
    return comments(_trtllm_notes(profile, schedule, rules)) + yaml_text(trtllm_config(profile, schedule, rules.version))


def trtllm_config(profile: DeploymentProfile, schedule: ServingSchedule | None = None,
                  version: str = DEFAULT_TRTLLM_VERSION) -> dict[str, Any]:
    """The ``--extra_llm_api_options`` mapping (LLM API arguments) for ``profile``, for TensorRT-LLM
    ``version``; ``schedule``: by default the profile's as TensorRT-LLM serves it."""
    rules = trtllm_rules(version)
    schedule = schedule or deployed_schedule(profile, TRTLLM_OFF_RULE)
    graph_sizes = schedule.cuda_graph_batch_sizes
    graphs: dict[str, Any] = {"enable_padding": True, "batch_sizes": graph_sizes}
    if rules.graph_max_batch_size:
        graphs["max_batch_size"] = max(graph_sizes)  # CudaGraphConfig: must equal max(batch_sizes)
    config: dict[str, Any] = {
        "max_batch_size": schedule.max_batch_size,
        "max_num_tokens": schedule.max_num_tokens(DEFAULT_MAX_NUM_TOKENS),
        "kv_cache_config": {
            "free_gpu_memory_fraction": KV_CACHE_FRACTION[profile.method],
            "enable_block_reuse": KV_BLOCK_REUSE[profile.method],
        },
        "cuda_graph_config": graphs,
    }
    if profile.method != "none":
        config["speculative_config"] = trtllm_speculative_config(profile, schedule, rules.version)
    parallel = planned_parallelism(profile)
    if parallel is not None:
        config["tensor_parallel_size"] = parallel.tp
        if parallel.ep > 1:
            config["moe_expert_parallel_size"] = parallel.ep
    return config


def trtllm_speculative_config(profile: DeploymentProfile, schedule: ServingSchedule,
                              version: str = DEFAULT_TRTLLM_VERSION) -> dict[str, Any]:
    """``speculative_config``: the engine adapter's block for the profile's configuration at the
    schedule's draft length, then the per-concurrency schedule this ``version`` can read."""
    rules = trtllm_rules(version)
    kind = engine_kind(profile, "TensorRT-LLM", rules.decoding_types)
    # Without draft_len_schedule (1.0) one draft length serves every concurrency: the profile's own.
    depth = schedule.max_draft_len if rules.schedule else profile.depth
    spec = yaml_speculative_config(measured_config(profile, depth), kind, max_ngram(profile), rules.version)
    draft_lens = trtllm_draft_len_schedule(schedule, rules.version)
    if draft_lens is not None:
        spec["draft_len_schedule"] = draft_lens
    else:  # never both: main refuses max_concurrency with draft_len_schedule
        cutoff = schedule.max_concurrency if rules.schedule else _last_speculative_concurrency(schedule)
        if cutoff is not None:
            spec["max_concurrency"] = cutoff
    return spec


def trtllm_draft_len_schedule(schedule: ServingSchedule, version: str = DEFAULT_TRTLLM_VERSION) -> dict[int, int] | None:
    """``draft_len_schedule`` for ``schedule`` (None where the draft length does not vary, or the
    version has no such field).

    One key per concurrency the profile covers (every concurrency the study measured, and those of
    the schedule's depths), up to the first where speculation is off: each key's value is the depth
    measured there, or between two measured depths the smaller concurrency's one (as vLLM fills its
    gaps). 1.2 reads a key from its concurrency up and requires key 1; main reads it up to its
    concurrency and gives 0 above the largest key. With a key at every covered concurrency both read the
    measured depth at each of them, and the largest key is the schedule's largest concurrency (or the
    first zero), so no covered concurrency falls to main's implicit 0; 1 is always a key and maps to
    ``max_draft_len`` (1.2: schedule[1], main: the smallest key).
    """
    if trtllm_rules(version).schedule is None or schedule.draft_len_schedule is None:
        return None
    measured = sorted(schedule.depths)
    draft_lens: dict[int, int] = {}
    for concurrency in sorted({1, *schedule.concurrencies, *schedule.depths}):
        depth = schedule.depths[max(b for b in measured if b <= concurrency)]
        draft_lens[concurrency] = depth
        if depth == 0:
            break
    return draft_lens


def _last_speculative_concurrency(schedule: ServingSchedule) -> int | None:
    """The largest concurrency below the first one where speculation is off (None if it never is)."""
    speculative = [b for b, d in schedule.depths.items() if d > 0]
    return max(speculative) if speculative and len(speculative) < len(schedule.depths) else None


def _trtllm_notes(profile: DeploymentProfile, schedule: ServingSchedule, rules: TrtllmRules) -> list[str]:
    measure = (f"autotune export {profile.id} --format trtllm-bench" if not profile.details.get("predicted")
               else "trtllm-bench --extra_llm_api_options THIS_FILE, or `autotune tune` on the machine")
    notes = header(profile) + [
        "Serve:    trtllm-serve MODEL --backend pytorch --extra_llm_api_options THIS_FILE",
        f"Measure:  {measure}  (trtllm-bench reads the same file)",
        f"MODEL = {shlex.quote(serving_model(profile.target))}",  # quoted as the shell needs it, ready to paste
        f"Written for TensorRT-LLM {rules.version} (autotune export --trtllm-version: 1.0, 1.2 or main); keys and values",
        f"follow its tensorrt_llm/llmapi/llm_args.py: {rules.source}; see autotune/serving/trtllm.py.",
    ]
    spec = trtllm_speculative_config(profile, schedule, rules.version) if profile.method != "none" else {}
    if "draft_len_schedule" in spec:
        reading = ("a key holds from its concurrency up to the next key" if rules.schedule == "lower" else
                   "a key holds from the previous key + 1 up to its concurrency; none above the largest key")
        notes += [
            f"draft_len_schedule: draft length at every concurrency the study covers (TensorRT-LLM {rules.version}: {reading}).",
            "Other versions read the keys differently between them but the same at them: export for the version you run.",
        ]
    elif schedule.draft_len_schedule is not None:
        notes += [
            f"TensorRT-LLM {rules.version} has no draft_len_schedule: draft length {spec.get('max_draft_len')} (the profile's own)",
            "at every concurrency; the measured draft length per concurrency is listed below.",
        ]
    if "max_concurrency" in spec:
        notes.append(f"max_concurrency: speculation off above concurrency {spec['max_concurrency']} (it did not beat none there).")
    if speculative_kind(profile) == EAGLE3 and rules.version == "1.0":
        notes.append("EAGLE-3 draft: TensorRT-LLM 1.0 has no Eagle3 decoding type; Eagle with eagle3_one_model runs it.")
    return notes + schedule_notes(profile) + _off_notes(profile, schedule, rules) + builtin_notes(profile)


def _off_notes(profile: DeploymentProfile, schedule: ServingSchedule, rules: TrtllmRules) -> list[str]:
    """What runs where none won: the off state per concurrency, except on a version without
    draft_len_schedule, where a kind that cannot be switched off runs the profile's own depth there."""
    floored = sorted(b for b, state in schedule.off_states.items() if state.depth > 0)
    if rules.schedule is None and floored:
        return [f"Where none won ({', '.join(map(str, floored))}), TensorRT-LLM {rules.version} serves draft length "
                f"{profile.depth} too, unmeasured against none there: {TRTLLM_OFF_RULE.source}."]
    return off_notes(profile, schedule, TRTLLM_OFF_RULE)


def trtllm_bench_script(profile: DeploymentProfile, schedule: ServingSchedule, version: str = DEFAULT_TRTLLM_VERSION) -> str:
    """A bash script that writes the YAML and re-measures the profile with ``trtllm-bench``."""
    target = profile.target
    lines = [["trtllm-bench", *option("--model", target.name)]]
    if not target.is_builtin:
        lines.append(option("--model_path", target.source))
    lines += [
        ["throughput"], ["--backend", "pytorch"], ["--dataset", ShellVar("DATASET")],
        ["--extra_llm_api_options", ShellVar("CONFIG")], ["--max_batch_size", str(schedule.max_batch_size)],
        ["--concurrency", str(profile.concurrency)], ["--streaming"], ["--report_json", ShellVar("REPORT_JSON")],
    ]
    parallel = planned_parallelism(profile)
    if parallel is not None:
        lines.append(["--tp", str(parallel.tp), *(["--ep", str(parallel.ep)] if parallel.ep > 1 else [])])
    notes = header(profile) + [
        f"Re-measures the profile at concurrency {profile.concurrency} with trtllm-bench (TensorRT-LLM, PyTorch backend).",
        "DATASET: a trtllm-bench dataset, one JSON object per line:",
        '  {"task_id": 0, "prompt": "...", "output_tokens": 128}  (from an autotune workload: prompt, max_tokens)',
        "Compare the report's per-user output speed and token throughput with the figures above.",
        f"The YAML below is written for TensorRT-LLM {trtllm_rules(version).version} (autotune export --trtllm-version).",
    ] + builtin_notes(profile)
    report = f"trtllm-bench-{slugify(profile.target.name)}-{profile.label().replace('@', '-d')}-c{profile.concurrency}.json"
    return "\n".join([
        "#!/usr/bin/env bash",
        comments(notes).rstrip("\n"),
        "set -euo pipefail",
        ': "${DATASET:?set DATASET to a trtllm-bench dataset file (see above)}"',
        f'REPORT_JSON="${{REPORT_JSON:-{report}}}"',
        'CONFIG="$(mktemp --suffix=.yaml)"',
        "trap 'rm -f \"$CONFIG\"' EXIT",
        "cat > \"$CONFIG\" <<'YAML'",
        yaml_text(trtllm_config(profile, schedule, version)).rstrip("\n"),
        "YAML",
        command(lines),
        "",
    ])
