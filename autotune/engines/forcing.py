"""What the folder engines' step-cost timing runs share (TensorRT-LLM: :mod:`autotune.engines.trtllm.timing`,
vLLM: :mod:`autotune.engines.vllm.timing`): the point one timing run reports, and the check that the
engine's forcing switch really made it accept every draft.

Each engine forces acceptance by its own switch, and a release may lack it, ignore it, or implement it
differently; the step costs are only the cost half of the performance model if every draft was
accepted, so the engine's own accepted-token counters decide, never the switch having been set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autotune.engines.base import EngineConfig
from autotune.errors import EngineError


def require_all_accepted(engine: str, accepted: int, drafted: int, switch: str) -> None:
    """EngineError (one line, naming ``engine`` with its version and the ``switch`` used) unless the
    timing run accepted every one of its ``drafted`` draft tokens."""
    if accepted != drafted:
        raise EngineError(
            f"{engine} accepted {accepted} of {drafted} draft tokens with {switch}: this version does not force "
            "acceptance, so step costs cannot be timed apart from the workload"
        )


@dataclass(frozen=True)
class TimingTotals:
    """One timing run's totals over its ``steps`` decode steps with every row active: ``step_s``
    their wall time, ``propose_s`` the part the engine timed as drafting (0 when it does not time
    drafting apart), ``drafted`` their draft tokens; ``prefill_s`` and ``prefill_tokens`` the rows'
    prefill."""

    steps: int
    step_s: float
    propose_s: float
    prefill_s: float
    drafted: int
    prefill_tokens: int


def timing_point(config: EngineConfig, concurrency: int, round_index: int, totals: TimingTotals) -> dict[str, Any]:
    """One timing run's point (the keys of :class:`autotune.perfmodel.cost.CostPoint`) from its
    ``totals`` with all ``concurrency`` rows active."""
    steps = totals.steps
    return {
        "method": config.method, "draft": config.draft_model, "depth": config.depth, "concurrency": concurrency,
        "round": round_index, "steps": steps, "propose_s": totals.propose_s / steps,
        "verify_s": (totals.step_s - totals.propose_s) / steps, "prefill_s": totals.prefill_s,
        "drafted_per_step": totals.drafted / (steps * concurrency), "prefill_tokens": totals.prefill_tokens,
    }


def timing_rows(prompts: Sequence[str], concurrency: int) -> tuple[list[str], int]:
    """``concurrency`` prompts of the workload (cycled) for one timing run, and their prefill tokens
    counted as :mod:`autotune.search.modeling` counts them (UTF-8 bytes + BOS, times the rows, at the
    longest prompt)."""
    rows = [prompts[i % len(prompts)] for i in range(concurrency)]
    return rows, concurrency * max(len(prompt.encode("utf-8")) + 1 for prompt in rows)


def timing_max_tokens(depth: int, steps: int) -> int:
    """Tokens per row for ``steps`` fully accepted steps of ``depth`` drafts (the first token comes
    from the prefill)."""
    return steps * (depth + 1) + 1
