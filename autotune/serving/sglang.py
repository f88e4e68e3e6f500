"""SGLang export: a ``python -m sglang.launch_server`` script. SGLang has no engine adapter here, so
this writer maps the profile to SGLang's flags itself.

Read in ``sglang/srt/server_args.py``: --speculative-algorithm NEXTN | STANDALONE | EAGLE3 | NGRAM,
--speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens,
--speculative-draft-model-path. SGLang has no per-concurrency speculation switch: what it cannot
express is said in a comment at the top of the script, with the measured draft length per concurrency.
"""

from __future__ import annotations

from autotune.models.kind import DRAFT_TARGET, EAGLE3
from autotune.profiles.analysis import ServingSchedule
from autotune.profiles.data import DeploymentProfile
from autotune.serving.header import builtin_notes, header
from autotune.serving.parallel import planned_parallelism
from autotune.serving.schedule import schedule_notes, unscheduled_notes
from autotune.serving.speculation import engine_kind, serving_model
from autotune.serving.text import ShellVar, option, script

# Speculative kind (method, or for method draft what the draft folder is) -> SGLang algorithm.
SGLANG_ALGORITHMS = {"mtp": "NEXTN", "ngram": "NGRAM", DRAFT_TARGET: "STANDALONE", EAGLE3: "EAGLE3"}


def sglang_script(profile: DeploymentProfile, schedule: ServingSchedule) -> str:
    """``python -m sglang.launch_server`` with the profile's speculative flags and batch limits."""
    lines = [
        ["python", "-m", "sglang.launch_server"],
        option("--model-path", serving_model(profile.target)),
        ["--max-running-requests", str(schedule.max_batch_size)],
        ["--cuda-graph-max-bs", str(schedule.max_batch_size)],
    ]
    parallel = planned_parallelism(profile)
    if parallel is not None:
        lines.append(["--tp-size", str(parallel.tp), *(["--ep-size", str(parallel.ep)] if parallel.ep > 1 else [])])
    notes = header(profile)
    if profile.method != "none":
        depth = schedule.max_draft_len
        kind = engine_kind(profile, "SGLang", SGLANG_ALGORITHMS)
        lines.append(["--speculative-algorithm", SGLANG_ALGORITHMS[kind]])
        if profile.method == "ngram":
            notes.append("NGRAM (SGLang >= 0.5) matches against a trie of past tokens: close to, not the same as, autotune's n-gram proposer.")
        else:
            # A chain of `depth` draft steps, one candidate per step.
            lines += [["--speculative-num-steps", str(depth)], ["--speculative-eagle-topk", "1"]]
        # SGLang counts the verified token among the draft tokens, hence depth + 1.
        lines.append(["--speculative-num-draft-tokens", str(depth + 1)])
        if profile.method == "draft":
            lines.append(option("--speculative-draft-model-path", serving_model(profile.draft)))
            if kind == DRAFT_TARGET:
                notes.append("STANDALONE (a separate draft model) needs SGLang >= 0.5.")
    lines.append([ShellVar("@")])
    unscheduled = unscheduled_notes(schedule, "SGLang", bool(profile.details.get("predicted")))
    return script(notes + unscheduled + schedule_notes(profile) + builtin_notes(profile), lines)
