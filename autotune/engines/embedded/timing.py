"""Step-cost timing runs: what one decoding step costs, apart from what the workload accepts.

The performance model (:mod:`autotune.perfmodel`) splits a configuration's throughput into an
acceptance part (tokens per step, a property of target, proposer and workload) and a cost part
(seconds per step, a property of hardware, engine and models). This module measures the cost part
with short runs in which every row accepts all its drafts (``Decoder(forced_accepted=depth)``, the
embedded twin of TensorRT-LLM's ``TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS``): each step then
verifies ``depth + 1`` tokens per row, whatever the drafts were.

One run per (proposer, depth, concurrency): ``concurrency`` rows (the workload's prompts, cycled)
admitted in one prefill, then ``steps`` steps with every row active, EOS ignored. It reports per
step the proposing and verifying wall time (the decoder's own phase timers, so host bookkeeping is
included as it is in a real run), the prefill time, and the tokens drafted per row per step (the
n-gram proposer drafts only where it finds a match). Rounds repeat the whole set, so a disturbance
shows up as one slow round rather than in one point: at least three rounds
(:data:`~autotune.perfmodel.cost.MIN_ROUNDS`), so the cost profile can drop a round slower than
1.3x the point's fastest and take the median of the rest. A round costs its steps plus a prefill
and set-up worth ~3-9 steps (measured here), so three rounds of three steps cost about what two
rounds of six did (docs/statistics.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from autotune.engines.base import EngineConfig
from autotune.engines.embedded.decoding import Decoder, GenerationRequest, build_proposer, required_capacity
from autotune.perfmodel.cost import MIN_ROUNDS

DEFAULT_TIMING_STEPS = 3
DEFAULT_TIMING_ROUNDS = MIN_ROUNDS


@dataclass(frozen=True)
class TimingPoint:
    """One timing run: seconds per step spent proposing and verifying at ``concurrency`` active rows,
    the prefill of ``concurrency`` prompts, and the tokens each row drafted per step."""

    method: str
    draft: str | None
    depth: int
    concurrency: int
    round: int
    steps: int
    propose_s: float
    verify_s: float
    prefill_s: float
    drafted_per_step: float
    prefill_tokens: int  # rows x the longest prompt: the padded prefill's size

    def to_dict(self) -> dict:
        return asdict(self)


def timing_requests(prompts: Sequence[list[int]], concurrency: int, depth: int, steps: int) -> list[GenerationRequest]:
    """``concurrency`` greedy requests long enough for ``steps`` fully accepted steps of ``depth`` drafts
    (the first token comes from the prefill)."""
    max_tokens = steps * (depth + 1) + 1
    return [GenerationRequest(list(prompts[i % len(prompts)]), max_tokens, 0.0) for i in range(concurrency)]


def time_configuration(engine, config: EngineConfig, prompts: Sequence[list[int]], concurrency: int, steps: int,  # noqa: ANN001
                       round_index: int = 0, seed: int = 0) -> TimingPoint:
    """One timing run of ``config`` on ``engine`` (an :class:`EmbeddedEngine` with ``config`` loadable)."""
    engine.load(config)
    requests = timing_requests(prompts, concurrency, config.depth, steps)
    capacity = required_capacity(requests, config.depth)
    draft = engine._draft(config.draft_model) if config.draft_model is not None else None  # noqa: SLF001 - same package
    proposer = build_proposer(config.method, config.depth, engine.target, draft, concurrency, capacity, engine.max_ngram)
    decoder = Decoder(engine.target, proposer, concurrency, capacity, eos_id=None, seed=seed,
                      forced_accepted=config.depth)
    result = decoder.run(requests)
    stats = result.stats
    passes = max(stats.target_passes, 1)
    return TimingPoint(
        method=config.method, draft=config.draft_model, depth=config.depth, concurrency=concurrency, round=round_index,
        steps=stats.target_passes, propose_s=stats.propose_time_s / passes, verify_s=stats.verify_time_s / passes,
        prefill_s=stats.prefill_time_s, drafted_per_step=stats.drafted_tokens / max(stats.sequence_steps, 1),
        prefill_tokens=len(requests) * max(len(r.prompt) for r in requests),
    )


def time_steps(engine, configs: Sequence[EngineConfig], prompts: Sequence[list[int]], concurrencies: Sequence[int],  # noqa: ANN001
               steps: int = DEFAULT_TIMING_STEPS, rounds: int = DEFAULT_TIMING_ROUNDS) -> list[TimingPoint]:
    """Time every configuration at every concurrency, ``rounds`` times (see the module doc). One
    untimed warm-up run per configuration comes first (first calls allocate and pick kernels)."""
    points = []
    for config in configs:
        time_configuration(engine, config, prompts, 1, 1)
    for round_index in range(rounds):
        order = list(configs) if round_index % 2 == 0 else list(reversed(configs))  # drift hits both ends alike
        for config in order:
            for concurrency in concurrencies:
                points.append(time_configuration(engine, config, prompts, concurrency, steps, round_index))
    return points
