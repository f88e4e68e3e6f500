"""Step-cost timing with TensorRT-LLM at a fixed acceptance: the cost half of the performance model
(:mod:`autotune.perfmodel`), apart from what the workload accepts. Pure but for the environment.

``TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS`` (``FORCE_NUM_ACCEPTED_TOKENS_ENV_VAR`` of
``tensorrt_llm/_torch/speculative/interface.py``): N > 0 makes every generation request accept
min(N, draft length) draft tokens per step, plus the target's own token (``SpecWorkerBase.
_apply_force_accepted_tokens``: ``min(force + 1, runtime_draft_len + 1)`` tokens); 0, unset or
unparsable: off. It is read once, when the one-model worker (``SpecWorkerBase.__init__``: MTP, EAGLE-3)
or the two-model sampler (``TorchSampler.__init__``: draft model, n-gram) is built, so it must be in
the environment before ``LLM(...)`` is constructed. Read in the 1.2-era copy of ``interface.py`` (the one
whose ``SpecMetadata`` has ``allow_advanced_sampling``; integer only) and in main's (``get_force_num_
accepted_tokens`` for the two-model path, integer; ``get_force_num_accepted_tokens_float`` for the
one-model path, where a fraction is the probability of one more token). Not found in the 1.0-line
copies read; :func:`timing_point` therefore checks that acceptance was in fact forced.

autotune forces acceptance of every draft (N = depth), as the embedded engine's timing runs do
(:mod:`autotune.engines.embedded.timing`): each step then verifies depth + 1 tokens per row.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from autotune.engines.base import EngineConfig
from autotune.engines.forcing import TimingTotals, require_all_accepted, timing_point as forced_point
from autotune.engines.trtllm.stats import parse_stat
from autotune.errors import EngineError

FORCE_ACCEPTED_ENV = "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"


@contextmanager
def forced_acceptance(accepted: int) -> Iterator[None]:
    """``TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=accepted`` while the block runs (build the LLM in
    it); 0 sets nothing. The previous value is restored, so later LLMs measure real acceptance."""
    if accepted < 0:
        raise ValueError(f"forced accepted tokens must be >= 0, got {accepted}")
    previous = os.environ.get(FORCE_ACCEPTED_ENV)
    if accepted:
        os.environ[FORCE_ACCEPTED_ENV] = str(accepted)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(FORCE_ACCEPTED_ENV, None)
        else:
            os.environ[FORCE_ACCEPTED_ENV] = previous


def timing_point(
    stats: Iterable[dict[str, Any] | str],
    config: EngineConfig,
    concurrency: int,
    round_index: int,
    prefill_tokens: int,
    drafter_timed: bool,
) -> dict[str, Any]:
    """One timing run's point (the keys of :class:`autotune.perfmodel.cost.CostPoint`) from its
    iteration statistics.

    Steps are the iterations with all ``concurrency`` rows in generation and none in context, so the
    point is the cost at ``concurrency`` active rows. ``propose_s`` is the two-model drafter's own
    latency (``drafter_timed``), else 0 with the whole step in ``verify_s`` (one-model drafting runs
    inside the target's forward pass and is not timed apart: see :mod:`autotune.engines.trtllm.stats`).
    Raises EngineError when no such step was seen or acceptance was not forced
    (:func:`autotune.engines.forcing.require_all_accepted`)."""
    step_ms = propose_ms = prefill_ms = 0.0
    steps = drafted = accepted = 0
    for stat in map(parse_stat, stats):
        batch = stat.get("inflightBatchingStats") or {}
        spec = stat.get("specDecodingStats") or {}
        latency_ms = float(stat.get("iterLatencyMS") or 0.0)
        if int(batch.get("numContextRequests") or 0) > 0:
            prefill_ms += latency_ms
        elif int(batch.get("numGenRequests") or 0) == concurrency:
            steps += 1
            step_ms += latency_ms
            propose_ms += float(spec.get("iterLatencyMS") or 0.0) if drafter_timed else 0.0
            drafted += int(spec.get("numDraftTokens") or 0)
            accepted += int(spec.get("numAcceptedTokens") or 0)
    if steps == 0:
        raise EngineError(f"no TensorRT-LLM iteration ran {concurrency} sequences in generation; cannot time {config.label()}")
    require_all_accepted("TensorRT-LLM", accepted, drafted, f"{FORCE_ACCEPTED_ENV}={config.depth}")
    totals = TimingTotals(steps=steps, step_s=step_ms / 1e3, propose_s=propose_ms / 1e3, prefill_s=prefill_ms / 1e3,
                          drafted=drafted, prefill_tokens=prefill_tokens)
    return forced_point(config, concurrency, round_index, totals)
