"""The parallelism a plan's export serves with: the tensor-parallel GPUs per replica and, for a
MoE, how many of them split the experts (``autotune plan --tp / --ep``).

A measured profile holds none (its engines ran one GPU), so its exports stay as they were; a plan's
profile carries them in ``details`` (:meth:`autotune.planning.DeploymentPlan.to_profile`). Each
writer spells them in its engine's words: TensorRT-LLM's LLM API ``tensor_parallel_size`` /
``moe_expert_parallel_size`` (``tensorrt_llm/llmapi/llm_args.py`` ``BaseLlmArgs``) and
trtllm-bench's ``--tp`` / ``--ep``, vLLM's ``--tensor-parallel-size`` and
``--enable-expert-parallel`` (``vllm/engine/arg_utils.py``: the experts then split over all TP x DP
GPUs, so only ep = tp is expressible), SGLang's ``--tp-size`` / ``--ep-size``
(``sglang/srt/server_args.py``).
"""

from __future__ import annotations

from typing import NamedTuple

from autotune.profiles.data import DeploymentProfile


class Parallelism(NamedTuple):
    tp: int
    ep: int


def planned_parallelism(profile: DeploymentProfile) -> Parallelism | None:
    """The plan's parallelism (module doc), or None for a measured profile."""
    tp = profile.details.get("tensor_parallel_size")
    if not profile.details.get("predicted") or not tp:
        return None
    return Parallelism(int(tp), int(profile.details.get("expert_parallel_size") or 1))
