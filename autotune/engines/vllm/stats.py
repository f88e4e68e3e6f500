"""Turn what vLLM reports into a :class:`~autotune.engines.base.Measurement`. Pure: no import of vllm.

One counted source, nothing inferred from the configured depth: per engine step, what vLLM hands
every stat logger of the server's engine client (``StatLoggerBase.record(scheduler_stats,
iteration_stats, ...)``, ``vllm/v1/metrics/loggers.py``, vLLM 0.32.0; ``AsyncLLM``'s output handler
calls it once per batch of engine-core outputs, i.e. once per engine step that gave some request a
token). A stat logger of ours in the server (:mod:`autotune.engines.vllm.serve_main`) writes each as
one JSON line (:func:`step_entry`) to a file that :class:`StepLogReader` reads after each run:

* the scheduler's ``SpecDecodingStats`` (``vllm/v1/spec_decode/metrics.py``: ``num_drafts``,
  ``num_draft_tokens``, ``num_accepted_tokens``, ``num_accepted_tokens_per_pos``,
  ``num_draft_tokens_per_pos``), what vLLM's Prometheus counters ``vllm:spec_decode_num_drafts`` /
  ``_num_draft_tokens`` / ``_num_accepted_tokens`` / ``_num_accepted_tokens_per_pos`` add up (the
  drafts per position, which n-gram's shorter drafts need, are not among those counters);
* the step's ``IterationStats`` (``vllm/v1/metrics/stats.py``): one ``inter_token_latencies_iter``
  entry per request that got tokens after its first (a decode row);
* when the outputs arrived (``time.perf_counter``, the system's monotonic clock, which the server and
  the runner read alike): a step lasts from the previous step's arrival (or the run's start) to its
  own, as the engine client sees it.

Definitions (the embedded engine's, see ``Measurement``): ``drafted_tokens`` / ``accepted_tokens``
are the sums of ``num_draft_tokens`` / ``num_accepted_tokens``; ``acceptance_by_position[i]`` =
accepted at position i / drafts that reached position i (``drafted_by_position[i]``);
``sequence_steps`` = decode rows summed over steps; ``acceptance_length`` = tokens after the first /
``sequence_steps``; ``target_passes`` = steps with a decode row; ``acceptance_alpha`` = accepted /
(accepted + rejections), counted only when every draft had the full depth (then a draft without a
rejection is one accepted at its last position). Time: vLLM does not time drafting apart from
verification, so ``propose_time_s`` is 0 and ``verify_time_s`` is the whole of the decode steps
(drafting included); ``prefill_time_s`` is the steps without a decode row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.analysis.steady import RequestResult
from autotune.engines.base import RunCounters

MEMORY_KIND_CPU = "vllm_cpu_weights_and_kv_space"
NO_MEMORY_KIND = "unavailable"


@dataclass
class SpecDecodingCounts:
    """Sums of vLLM's per-step speculative-decoding statistics over one run."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_by_position: list[int] = field(default_factory=list)
    drafted_by_position: list[int] = field(default_factory=list)

    def add(self, stats: Mapping[str, Any]) -> None:
        """Add one step's ``SpecDecodingStats`` (its fields by name, :data:`SPEC_FIELDS`)."""
        self.drafts += int(stats["num_drafts"])
        self.draft_tokens += int(stats["num_draft_tokens"])
        self.accepted_tokens += int(stats["num_accepted_tokens"])
        _add_into(self.accepted_by_position, stats["num_accepted_tokens_per_pos"])
        _add_into(self.drafted_by_position, stats.get("num_draft_tokens_per_pos") or [])

    def alpha(self) -> float | None:
        """Per-position acceptance probability (module doc), None when it cannot be counted."""
        if not self.drafts or not self.drafted_by_position or self.drafted_by_position[-1] != self.drafts:
            return None
        rejections = self.drafts - self.accepted_by_position[-1]
        total = self.accepted_tokens + rejections
        return self.accepted_tokens / total if total else None


def _add_into(sums: list[int], values: Any) -> None:
    values = [int(v) for v in values]
    sums.extend([0] * (len(values) - len(sums)))
    for i, value in enumerate(values):
        sums[i] += value


@dataclass(frozen=True)
class TimedStep:
    """One engine step: its wall time as the engine client saw it, the requests that got a token after
    their first (``decoded_rows``), and the draft tokens it verified and accepted."""

    seconds: float
    decoded_rows: int
    drafted: int = 0
    accepted: int = 0


# The SpecDecodingStats fields a step's entry keeps (the last is missing in vLLMs that do not count it).
SPEC_FIELDS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos",
               "num_draft_tokens_per_pos")


def step_entry(scheduler_stats: Any, iteration_stats: Any, at_s: float) -> dict[str, Any] | None:
    """One stat-logger call as a JSON-ready entry (module doc): ``at`` (when its outputs arrived),
    ``decoded`` (its decode rows; None when no request got a token: not a step the client saw) and
    ``spec`` (its ``SpecDecodingStats`` fields, None without speculation); None when it carries neither."""
    stats = getattr(scheduler_stats, "spec_decoding_stats", None)
    if stats is None and iteration_stats is None:
        return None
    spec = None if stats is None else {
        name: [int(v) for v in value] if isinstance(value, (list, tuple)) else int(value)
        for name in SPEC_FIELDS if (value := getattr(stats, name, None)) is not None}
    decoded = None if iteration_stats is None else len(getattr(iteration_stats, "inter_token_latencies_iter", ()))
    return {"at": at_s, "decoded": decoded, "spec": spec}


class StepLogReader:
    """Reads the step entries a server's stat logger appends to ``path`` (one JSON line each)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def take(self, start: float) -> tuple[SpecDecodingCounts, list[TimedStep]]:
        """The sums and the steps of the entries written since the last take, each step timed from the
        one before it (the first from ``start``, a ``perf_counter`` reading). The entries of a run are
        all written once its last request has its last token."""
        with self.path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        complete = data[:data.rfind(b"\n") + 1]
        self._offset += len(complete)
        counts, steps, before = SpecDecodingCounts(), [], start
        for line in complete.splitlines():
            entry = json.loads(line)
            spec = entry.get("spec")
            if spec is not None:
                counts.add(spec)
            if entry.get("decoded") is None:
                continue
            steps.append(TimedStep(max(0.0, entry["at"] - before), entry["decoded"],
                                   spec["num_draft_tokens"] if spec else 0, spec["num_accepted_tokens"] if spec else 0))
            before = entry["at"]
        return counts, steps


@dataclass(frozen=True)
class StepTimes:
    """What the steps of a run add up to: steps with a decode row (``target_passes``), decode rows
    summed (``sequence_steps``), the wall time of those steps and of the steps without one."""

    target_passes: int
    sequence_steps: int
    decode_s: float
    prefill_s: float

    @classmethod
    def of(cls, steps: Sequence[TimedStep]) -> StepTimes:
        decoding = [step for step in steps if step.decoded_rows]
        return cls(len(decoding), sum(step.decoded_rows for step in decoding), sum(step.seconds for step in decoding),
                   sum(step.seconds for step in steps if not step.decoded_rows))


def run_counters(
    counts: SpecDecodingCounts, requests: Sequence[RequestResult], steps: StepTimes, memory_bytes: int | None,
) -> RunCounters:
    """The counters of one run (module doc); ``memory_bytes`` None: not known (GPU)."""
    sequence_steps = steps.sequence_steps
    after_first = sum(max(0, len(r.tokens) - 1) for r in requests)
    positions = len(counts.drafted_by_position)
    return RunCounters(
        drafted_tokens=counts.draft_tokens,
        accepted_tokens=counts.accepted_tokens,
        acceptance_alpha=counts.alpha(),
        acceptance_length=max(1.0, after_first / sequence_steps) if sequence_steps else 1.0,
        acceptance_by_position=[
            counts.accepted_by_position[i] / counts.drafted_by_position[i] if counts.drafted_by_position[i] else 0.0
            for i in range(positions)
        ],
        drafted_by_position=list(counts.drafted_by_position),
        target_passes=steps.target_passes,
        sequence_steps=sequence_steps,
        propose_time_s=0.0,
        verify_time_s=steps.decode_s,
        prefill_time_s=steps.prefill_s,
        peak_memory_bytes=memory_bytes or 0,
        memory_kind=MEMORY_KIND_CPU if memory_bytes is not None else NO_MEMORY_KIND,
    )
