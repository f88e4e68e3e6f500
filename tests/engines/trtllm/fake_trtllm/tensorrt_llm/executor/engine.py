"""The stand-in's executor: continuous batching on the CPU, scheduled as the PyTorch backend's
executor schedules (NVIDIA/TensorRT-LLM; no such module in the real package, whose executor runs in
processes of its own):

* ``generate_async`` only **enqueues** the request (``ExecutorRequestQueue._enqueue_impl``,
  ``tensorrt_llm/_torch/pyexecutor/executor_request_queue.py`` at a98a906); at the start of every
  iteration the executor moves what was enqueued to its waiting queue and activates at most
  ``max_num_active_requests - active`` of them (``_fetch_and_process_requests`` /
  ``_get_from_waiting_queue``; ``max_num_active_requests`` = the model engine's
  ``get_max_num_sequences()``, ``max_batch_size`` without pipeline parallelism), the rest wait, so
  a request submitted during an iteration joins the next one at the earliest;
* an activated request's first iteration is its context step (the first token), every later one a
  generation step yielding 1 + accepted draft tokens; ``decoding_iter`` counts both
  (``TorchSampler.update_requests``, ``tensorrt_llm/_torch/pyexecutor/sampler.py`` at 28edbcd);
* after each iteration every request that got tokens is sent one response with the tokens since
  its previous one (``PyExecutor._handle_responses`` with ``stream_interval`` 1, ``py_executor.py``
  at 9521caf; ``LlmRequest::createResult``, see :mod:`tensorrt_llm.executor.result`), then the
  iteration's statistics are queued.

Tokens arrive when the iteration has run: the engine sleeps the iteration's simulated latency,
then responds. Every request's engine-side times are kept in :attr:`SimulatedEngine.traces`
(perf_counter seconds), the stand-in's own account for tests to check a reader against.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

from tensorrt_llm.executor.result import GenerationResult, IterationResult, Response

# Simulated latency of an iteration: a fixed part (FAKE_TRTLLM_ITERATION_MS, default 1 ms) plus
# 0.05 ms per token produced, plus a two-model drafter's time.
DEFAULT_ITERATION_MS = 1.0
PER_TOKEN_MS = 0.05
DRAFT_MS_PER_TOKEN = 0.2


@dataclass
class RequestTrace:
    """The engine's account of one request: when it was submitted, when each token was produced
    (the end of the iteration that produced it) and when it finished."""

    request_id: int
    submitted_s: float
    token_times_s: list[float] = field(default_factory=list)
    finished_s: float | None = None


@dataclass(frozen=True)
class Speculation:
    """How the simulated engine drafts: ``depth`` tokens per step (0: no speculation), none on
    every other step for n-gram (no match), ``forced`` accepted per step when
    TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS is set, ``drafting_timed`` for a two-model drafter."""

    depth: int = 0
    every_other_step: bool = False
    forced: int = 0
    drafting_timed: bool = False


@dataclass(frozen=True)
class DeviceFigures:
    """What the statistics report of the device: memory in use before any sequence, KV pool blocks."""

    base_bytes: int
    max_num_blocks: int
    tokens_per_block: int


class _Sequence:
    """The engine's side of one request (the real one's LlmRequest)."""

    def __init__(self, result: GenerationResult, vocab_size: int) -> None:
        self.result = result
        self.params = result.sampling_params
        self.vocab_size = vocab_size
        self.rng = random.Random(self.params.seed or 0)
        self.produced: list[int] = []
        self.decoding_iter = 0
        self.drafted_steps = 0
        self.trace = RequestTrace(result.request_id, time.perf_counter())

    @property
    def done(self) -> bool:
        return len(self.produced) >= self.params.max_tokens

    def generate(self, count: int, greedy: bool) -> list[int]:
        """Up to ``count`` more tokens (never past max_tokens): a deterministic function of the
        sequence when greedy, seeded draws otherwise."""
        sequence = self.result.prompt_token_ids + self.produced
        tokens = []
        for _ in range(min(count, self.params.max_tokens - len(self.produced))):
            if greedy:
                token = (sequence[-1] * 31 + len(sequence) * 17 + 5) % self.vocab_size
            else:
                token = self.rng.randrange(self.vocab_size)
            tokens.append(token)
            sequence.append(token)
        self.produced += tokens
        return tokens


class SimulatedEngine:
    """Runs submitted requests ``max_batch_size`` at a time on the event loop of the first submission."""

    def __init__(self, max_batch_size: int, vocab_size: int, speculation: Speculation, greedy_only: bool,
                 stats_enabled: bool, device: DeviceFigures) -> None:
        self.max_batch_size = max_batch_size
        self.vocab_size = vocab_size
        self.speculation = speculation
        self.greedy_only = greedy_only
        self.stats_enabled = stats_enabled
        self.device = device
        self.iteration_ms = float(os.environ.get("FAKE_TRTLLM_ITERATION_MS", DEFAULT_ITERATION_MS))
        self.traces: list[RequestTrace] = []
        self.stats: IterationResult | None = None
        self._enqueued: collections.deque[_Sequence] = collections.deque()
        self._waiting: collections.deque[_Sequence] = collections.deque()
        self._active: list[_Sequence] = []
        self._loop_task: asyncio.Task | None = None
        self._iteration = 0

    def submit(self, result: GenerationResult) -> None:
        """Enqueue a request: it is scheduled at the start of a later iteration (RuntimeError
        outside a running event loop: the results are asyncio queues)."""
        loop = asyncio.get_running_loop()
        sequence = _Sequence(result, self.vocab_size)
        self.traces.append(sequence.trace)
        self._enqueued.append(sequence)
        if self.stats is None:
            self.stats = IterationResult()
        self.stats.mark_undone()
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = loop.create_task(self._serve())

    async def _serve(self) -> None:
        while self._enqueued or self._waiting or self._active:
            self._waiting.extend(self._enqueued)
            self._enqueued.clear()
            admitted = []
            while self._waiting and len(self._active) + len(admitted) < self.max_batch_size:
                admitted.append(self._waiting.popleft())
            generating = list(self._active)
            produced, counts = self._produce(admitted, generating)
            latency_ms = self._latency_ms(produced, counts["drafted"], len(generating))
            await asyncio.sleep(latency_ms / 1e3)
            self._respond(admitted + generating, produced)
            self._active = [s for s in generating + admitted if not s.done]
            self._record(latency_ms, len(admitted), len(generating), counts)

    def _produce(self, admitted: list[_Sequence], generating: list[_Sequence]) -> tuple[dict[int, list[int]], dict[str, int]]:
        """What the iteration generates per request id: the first token of each admitted request
        (its context step), 1 + accepted draft tokens of each generating one."""
        produced: dict[int, list[int]] = {}
        counts = {"drafted": 0, "accepted": 0, "with_drafts": 0}
        for sequence in admitted:
            sequence.decoding_iter += 1
            produced[sequence.result.request_id] = sequence.generate(1, self._greedy(sequence))
        for sequence in generating:
            draft = self._draft_length(sequence)
            hits = self._accepted(sequence, draft)
            counts["drafted"] += draft
            counts["accepted"] += hits
            counts["with_drafts"] += draft > 0
            sequence.decoding_iter += 1
            sequence.drafted_steps += 1
            produced[sequence.result.request_id] = sequence.generate(hits + 1, self._greedy(sequence))
        return produced, counts

    def _greedy(self, sequence: _Sequence) -> bool:
        return sequence.params.greedy or self.greedy_only

    def _draft_length(self, sequence: _Sequence) -> int:
        if self.speculation.every_other_step and sequence.drafted_steps % 2:
            return 0
        return self.speculation.depth

    def _accepted(self, sequence: _Sequence, draft: int) -> int:
        if self.speculation.forced:  # SpecWorkerBase._apply_force_accepted_tokens: min(forced + 1, draft + 1) tokens
            return min(self.speculation.forced, draft)
        return (sequence.result.request_id + sequence.drafted_steps) % (draft + 1) if draft else 0

    def _latency_ms(self, produced: dict[int, list[int]], drafted: int, generating: int) -> float:
        return self.iteration_ms + PER_TOKEN_MS * sum(map(len, produced.values())) + self._draft_ms(drafted, generating)

    def _draft_ms(self, drafted: int, generating: int) -> float:
        return DRAFT_MS_PER_TOKEN * drafted / max(1, generating)

    def _respond(self, sequences: list[_Sequence], produced: dict[int, list[int]]) -> None:
        """One response per request with new tokens, at the end of the iteration."""
        now = time.perf_counter()
        for sequence in sequences:
            tokens = produced[sequence.result.request_id]
            sequence.trace.token_times_s += [now] * len(tokens)
            if sequence.done:
                sequence.trace.finished_s = now
            sequence.result.put(Response(tokens, sequence.decoding_iter, sequence.done,
                                         "length" if sequence.done else None))

    def _record(self, latency_ms: float, context: int, generation: int, counts: dict[str, int]) -> None:
        """The iteration's statistics, shaped like IterationStats (see the package doc)."""
        self._iteration += 1
        if not self.stats_enabled:
            return
        active = len(self._active)
        stat: dict[str, Any] = {
            "iter": self._iteration, "iterLatencyMS": latency_ms,
            "gpuMemUsage": self.device.base_bytes + 1_000_000 * active,
            "kvCacheStats": {"maxNumBlocks": self.device.max_num_blocks, "tokensPerBlock": self.device.tokens_per_block,
                             "usedNumBlocks": active, "freeNumBlocks": self.device.max_num_blocks - active},
            "inflightBatchingStats": {"numContextRequests": context, "numGenRequests": generation},
        }
        if self.speculation.depth:
            with_drafts = counts["with_drafts"]
            draft_ms = self._draft_ms(counts["drafted"], generation)
            stat["specDecodingStats"] = {
                "numDraftTokens": counts["drafted"], "numAcceptedTokens": counts["accepted"],
                "numRequestsWithDraftTokens": with_drafts,
                "acceptanceLength": (counts["accepted"] + with_drafts) / with_drafts if with_drafts else 0.0,
                "iterLatencyMS": draft_ms if self.speculation.drafting_timed else 0.0,
            }
        self.stats.put(stat)
