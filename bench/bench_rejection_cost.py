"""What a step costs with rejections against with every draft accepted (issue 21's draft bias).

Step-cost timing forces every draft to be accepted; if a rejection cost more (rollback, the draft
re-reading what the target emitted) the model would under-price real runs. For one configuration
this prints, as medians of 3 runs on the first 6 requests of the built-in workload: the real run's
propose and verify time per step (real acceptance), the same forced to accept k = 0, depth / 2
and depth drafts per step (the timing's k = depth), and the requests' steady-state stream (the 6
requests cycled to 4 per slot, :mod:`autotune.analysis.steady`) replayed with the real run's
acceptance length and step cost against the real run of that stream (its last finish)::

    python bench/bench_rejection_cost.py draft 8 1      # method depth concurrency; figures in docs/statistics.md
"""

from __future__ import annotations

import statistics
import sys

from autotune.analysis.steady import stream_indices
from autotune.engines.base import BUILTIN_DRAFT, EngineConfig
from autotune.engines.embedded.decoding import Decoder, GenerationRequest, build_proposer, required_capacity
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.embedded.timing import DEFAULT_TIMING_STEPS, timing_requests
from autotune.perfmodel.simulate import simulate
from autotune.workload import builtin_workload


def run(engine: EmbeddedEngine, config: EngineConfig, concurrency: int, requests: list[GenerationRequest],
        forced: int | None = None):  # noqa: ANN201
    engine.load(config)
    capacity = required_capacity(requests, config.depth)
    draft = engine._draft(config.draft_model) if config.draft_model else None  # noqa: SLF001
    proposer = build_proposer(config.method, config.depth, engine.target, draft, concurrency, capacity, engine.max_ngram)
    eos = None if forced is not None else engine.tokenizer.eos_id
    return Decoder(engine.target, proposer, config.depth, concurrency, capacity, eos, 0, forced_accepted=forced).run(requests)


def main(method: str, depth: int, concurrency: int) -> None:
    engine = EmbeddedEngine()
    workload = engine.generation_requests(builtin_workload())[:6]
    requests = [workload[i] for i in stream_indices(len(workload), concurrency)]
    config = EngineConfig(method, depth, BUILTIN_DRAFT if method == "draft" else None)
    run(engine, config, 1, requests[:1])  # warm-up
    levels = sorted({0, depth // 2, depth})
    real, forced = [], {k: [] for k in levels}
    for _ in range(3):  # interleaved, so drift hits real and forced runs alike
        result = run(engine, config, concurrency, requests)
        stats = result.stats
        real.append(((stats.propose_time_s + stats.verify_time_s) / stats.target_passes, stats.target_passes,
                     stats.prefill_time_s, result.wall_time_s, stats.accepted_tokens / stats.sequence_steps))
        for k in levels:
            timed = run(engine, config, concurrency, timing_requests([r.prompt for r in requests], concurrency, depth,
                                                                   DEFAULT_TIMING_STEPS), forced=k).stats
            forced[k].append((timed.propose_time_s + timed.verify_time_s) / timed.target_passes)
    step, passes, prefill, wall, accepted = (statistics.median(column) for column in zip(*real))
    print(f"{config.method}@{depth} c{concurrency}: real {step * 1e3:.1f} ms/step ({accepted:.2f} accepted per step)")
    for k in levels:
        print(f"  forced k={k}: {statistics.median(forced[k]) * 1e3:.1f} ms/step")
    lengths = [len(r.tokens) for r in result.results][: len(workload)]
    replay = simulate([len(r.prompt) for r in workload], lengths, concurrency, 1 + accepted, lambda _rows: step,
                      lambda _tokens: prefill / len(requests))  # a steady state admits one request at a time
    last_finish = max(r.finish_s for r in replay.requests)
    print(f"  replay with the real acceptance and step: {last_finish:.2f} s against {wall:.2f} s "
          f"({passes:.0f} steps measured)")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
