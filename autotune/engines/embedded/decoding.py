"""The decode loop: continuous batching with speculative verification (method none included).

``batch_size`` slots decode concurrently. A request is admitted into a free slot by a target
prefill over its prompt (which yields its first token); then every step

1. the proposer drafts up to ``depth`` tokens per row (none for method none),
2. the target verifies [pending token, drafts] of all rows in ONE forward pass,
3. each row keeps its accepted prefix plus the target's next token — rows advance by different
   amounts; caches are rolled back by setting their lengths,
4. a row that reached its ``max_tokens`` (extra accepted tokens are cut) or EOS frees its slot,
   and the next pending request is prefilled into it while the other rows keep their state.

Token ids in, token ids out: tokenization belongs to the engine. The only host-device
synchronisation per step is one copy of the accepted tokens to the host.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import torch

from autotune.analysis.match_runs import ChainCounter
from autotune.analysis.steady import RequestResult
from autotune.engines.embedded.acceptance import sample, token_probabilities, verify_greedy, verify_sampling
from autotune.engines.embedded.batch import DecodeState, Proposal, Rows
from autotune.engines.embedded.network import CausalLM
from autotune.engines.embedded.mtp import MtpProposer
from autotune.engines.embedded.ngram import NgramProposer
from autotune.engines.embedded.proposers import DraftModelProposer, Proposer
from autotune.engines.limits import DEFAULT_MAX_NGRAM


@dataclass(frozen=True)
class GenerationRequest:
    """Generate up to ``max_tokens`` tokens after ``prompt`` (token ids) at ``temperature``."""

    prompt: list[int]
    max_tokens: int
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if not self.prompt or self.max_tokens < 1 or self.temperature < 0:
            raise ValueError(
                f"a request needs a non-empty prompt, max_tokens >= 1 and temperature >= 0; got "
                f"{len(self.prompt)} prompt tokens, max_tokens {self.max_tokens}, temperature {self.temperature}"
            )


@dataclass
class DecodeStats:
    """Counters of one run, counted as decoding happens."""

    drafted_tokens: int = 0
    accepted_tokens: int = 0
    rejections: int = 0  # sequence-steps that ended at a rejected draft (not all drafts accepted)
    drafted_by_position: list[int] = field(default_factory=list)
    accepted_by_position: list[int] = field(default_factory=list)
    target_passes: int = 0  # batched verification passes (prefill excluded)
    sequence_steps: int = 0  # rows x verification passes
    propose_time_s: float = 0.0
    verify_time_s: float = 0.0
    prefill_time_s: float = 0.0
    chains: ChainCounter = field(default_factory=lambda: ChainCounter(0))  # the run's runs of matches, per request

    def count_step(self, drafted: list[int], accepted: list[int], requests: list[int]) -> None:
        """One verification pass: each row's drafted and accepted counts, and its request's index."""
        for request, g, a in zip(requests, drafted, accepted):
            self.chains.step(request, g, a)
        depth = max(drafted, default=0)
        if len(self.drafted_by_position) < depth:
            grow = depth - len(self.drafted_by_position)
            self.drafted_by_position += [0] * grow
            self.accepted_by_position += [0] * grow
        for g, a in zip(drafted, accepted):
            for i in range(g):
                self.drafted_by_position[i] += 1
            for i in range(a):
                self.accepted_by_position[i] += 1
        self.drafted_tokens += sum(drafted)
        self.accepted_tokens += sum(accepted)
        self.rejections += sum(a < g for g, a in zip(drafted, accepted))
        self.target_passes += 1
        self.sequence_steps += len(drafted)


@dataclass
class DecodeResult:
    """What :meth:`Decoder.run` returns: per-request results in request order, counters, timing."""

    results: list[RequestResult]
    stats: DecodeStats
    wall_time_s: float
    state_bytes: int  # KV caches and decoding buffers allocated for the run


@dataclass
class _Sequence:
    """Host-side bookkeeping of the request occupying a slot."""

    request_index: int
    max_tokens: int
    send_s: float  # when the request was admitted (sent to the engine), seconds since the run started
    generated: list[int] = field(default_factory=list)
    token_times_s: list[float] = field(default_factory=list)  # when each generated token was committed


def required_capacity(requests: list[GenerationRequest], depth: int) -> int:
    """Cache positions a run needs: the longest prompt + max_tokens plus room for ``depth`` drafts."""
    return max(len(r.prompt) + r.max_tokens for r in requests) + depth + 1


def build_proposer(
    method: str,
    depth: int,
    target: CausalLM,
    draft: CausalLM | None,
    batch_size: int,
    capacity: int,
    max_ngram: int = DEFAULT_MAX_NGRAM,
) -> Proposer | None:
    """The proposer for ``method`` (None for method none). The caller has validated the
    combination (a draft model for draft, MTP modules in the target for mtp)."""
    if method == "none":
        return None
    if method == "draft":
        if draft is None:
            raise ValueError("method draft needs a draft model")
        return DraftModelProposer(draft, depth, batch_size, capacity)
    if method == "mtp":
        return MtpProposer(target, depth, batch_size, capacity)
    if method == "ngram":
        return NgramProposer(depth, batch_size, max_ngram)
    raise ValueError(f"unknown method {method!r}")


@dataclass(frozen=True)
class Speculation:
    """How a run drafts: ``method`` (none, draft, mtp or ngram) proposing ``depth`` tokens per step,
    with the ``draft`` model for method draft and matches of up to ``max_ngram`` tokens for ngram."""

    method: str = "none"
    depth: int = 0
    draft: CausalLM | None = None
    max_ngram: int = DEFAULT_MAX_NGRAM


def decode(
    target: CausalLM,
    requests: list[GenerationRequest],
    speculation: Speculation = Speculation(),
    batch_size: int = 1,
    eos_id: int | None = None,
    seed: int = 0,
) -> DecodeResult:
    """Decode ``requests`` as ``speculation`` says; convenience over :class:`Decoder` for one run."""
    method, depth = speculation.method, speculation.depth
    capacity = required_capacity(requests, depth)
    proposer = build_proposer(method, depth, target, speculation.draft, batch_size, capacity, speculation.max_ngram)
    return Decoder(target, proposer, batch_size, capacity, eos_id, seed).run(requests)


class Decoder:
    """Runs requests through ``target`` with ``proposer`` drafting its ``depth`` tokens (see module doc).

    One decoder per run (its counters accumulate): it allocates the caches for ``batch_size``
    slots of ``capacity`` positions (see :func:`required_capacity`). ``forced_accepted`` makes every
    row accept that many of its drafts whatever the target says (step-cost timing runs, see
    :mod:`autotune.engines.embedded.timing`); the output is then not the target's.
    """

    def __init__(
        self,
        target: CausalLM,
        proposer: Proposer | None,
        batch_size: int,
        capacity: int,
        eos_id: int | None,
        seed: int = 0,
        forced_accepted: int | None = None,
    ) -> None:
        self.target = target
        self.forced_accepted = forced_accepted
        self.proposer = proposer
        self.depth = proposer.depth if proposer is not None else 0
        self.batch_size = batch_size
        self.eos_id = eos_id
        self.device = target.embed.weight.device
        self.cache = target.new_cache(batch_size, capacity)
        self.state = DecodeState.empty(batch_size, capacity + self.depth + 1, self.device, seed)
        self.sequences: dict[int, _Sequence] = {}  # slot -> request in it
        self.greedy_host = [True] * batch_size
        self.stats = DecodeStats(chains=ChainCounter(self.depth))
        self.start = 0.0  # perf_counter() at the start of the run: all requests' submission time

    def state_bytes(self) -> int:
        own = self.cache.nbytes() + self.state.tokens.nbytes
        return own + (self.proposer.nbytes() if self.proposer is not None else 0)

    @torch.inference_mode()
    def run(self, requests: list[GenerationRequest]) -> DecodeResult:
        """Decode all ``requests``, each sent when a slot frees (``batch_size`` in flight); results come
        back in request order."""
        results: list[RequestResult | None] = [None] * len(requests)
        pending = deque(enumerate(requests))
        self.start = time.perf_counter()
        while pending or self.sequences:
            free = [s for s in range(self.batch_size) if s not in self.sequences]
            if pending and free:
                admitted = [(slot, *pending.popleft()) for slot in free[: len(pending)]]
                self._release_finished(self._admit(admitted), results)
            if self.sequences:
                self._release_finished(self._step(), results)
        wall = time.perf_counter() - self.start
        return DecodeResult(results, self.stats, wall, self.state_bytes())  # type: ignore[arg-type]

    # -- admission --------------------------------------------------------------------------------

    def _admit(self, admitted: list[tuple[int, int, GenerationRequest]]) -> list[int]:
        """Prefill the requests into their slots; returns the slots whose request already finished."""
        t0 = time.perf_counter()
        sent = t0 - self.start
        slots = [slot for slot, _, _ in admitted]
        prompts = [request.prompt for _, _, request in admitted]
        lengths = [len(p) for p in prompts]
        for slot, _, request in admitted:
            self.state.committed[slot] = len(request.prompt)
            self.state.sequences[slot] = list(request.prompt)
            self.greedy_host[slot] = request.temperature == 0
        self.state.temperatures[slots] = torch.tensor([r.temperature for _, _, r in admitted], device=self.device)
        padded = torch.tensor([p + [0] * (max(lengths) - len(p)) for p in prompts], dtype=torch.long, device=self.device)
        rows = Rows.of(self.state, slots, [self.greedy_host[s] for s in slots])
        self.state.tokens[rows.index, : padded.shape[1]] = padded

        self.cache.lengths[rows.index] = 0
        n_new = torch.tensor(lengths, device=self.device)
        logits, hidden = self.target(padded, self.cache, n_new=n_new, slots=rows.slots_arg)  # (R, P, V), (R, P, C)
        last_logits = logits.gather(1, (n_new - 1)[:, None, None].expand(-1, 1, logits.shape[-1]))  # (R, 1, V)
        if rows.greedy:
            first = last_logits[:, 0].argmax(dim=-1)
        else:
            first = sample(token_probabilities(last_logits, rows.temperatures)[:, 0], self.state.generator)
        self.state.write_tokens(rows, n_new, first[:, None])
        first_host = first.tolist()
        now = time.perf_counter() - self.start

        finished = []
        for (slot, index, request), token in zip(admitted, first_host):
            self.sequences[slot] = _Sequence(index, request.max_tokens, sent)
            if self._append(slot, [token], now):
                finished.append(slot)
        if self.proposer is not None:
            self.proposer.admit(self.state, rows, hidden, lengths)
        self._sync()
        self.stats.prefill_time_s += time.perf_counter() - t0
        return finished

    # -- one speculative step ---------------------------------------------------------------------

    def _step(self) -> list[int]:
        """Draft, verify and commit one step for every active row; returns the finished slots."""
        t0 = time.perf_counter()
        slots = sorted(self.sequences)
        rows = Rows.of(self.state, slots, [self.greedy_host[s] for s in slots])
        proposal = self.proposer.propose(self.state, rows) if self.proposer is not None else Proposal.nothing(len(rows), self.device)
        self._sync()
        t1 = time.perf_counter()

        pending = self.state.gather_tokens(rows, rows.committed[:, None] - 1)  # (R, 1) t_{N-1}
        verify_tokens = torch.cat([pending, proposal.tokens], dim=1)  # (R, 1+G)
        starts = rows.committed - 1  # (R,) = cache lengths
        logits, hidden = self.target(verify_tokens, self.cache, n_new=proposal.counts + 1, slots=rows.slots_arg)
        if rows.greedy:
            n_accepted, next_token = verify_greedy(proposal.tokens, proposal.counts, logits)
        else:
            target_probs = token_probabilities(logits, rows.temperatures)
            n_accepted, next_token = verify_sampling(
                proposal.tokens, proposal.counts, proposal.probs, target_probs, self.state.generator
            )
        if self.forced_accepted is not None:
            # A fixed acceptance, as TensorRT-LLM's TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS: the
            # step costs the same work (the target verified every draft), whatever the drafts were.
            n_accepted = proposal.counts.clamp(max=self.forced_accepted)  # (R,)
            next_token = logits[torch.arange(len(rows), device=self.device), n_accepted].argmax(dim=-1)  # (R,)
        # New tokens per row: the accepted drafts, then next_token at column n_accepted.
        emitted = torch.cat([proposal.tokens, next_token[:, None]], dim=1)  # (R, G+1)
        emitted.scatter_(1, n_accepted[:, None], next_token[:, None])
        self.state.write_tokens(rows, rows.committed, emitted)
        self.cache.lengths[rows.index] = starts + n_accepted + 1
        host = torch.cat([emitted, n_accepted[:, None]], dim=1).tolist()  # the step's one sync
        now = time.perf_counter() - self.start
        n_accepted_host = [row[-1] for row in host]
        if self.proposer is not None:
            self.proposer.commit(self.state, rows, hidden, n_accepted_host)
        self.stats.count_step(proposal.counts_host, n_accepted_host, [self.sequences[s].request_index for s in slots])

        finished = [slot for slot, row, a in zip(slots, host, n_accepted_host) if self._append(slot, row[: a + 1], now)]
        self._sync()
        t2 = time.perf_counter()
        self.stats.propose_time_s += t1 - t0
        self.stats.verify_time_s += t2 - t1
        return finished

    def _append(self, slot: int, tokens: list[int], now: float) -> bool:
        """Commit ``tokens`` (arrived at ``now``) to the slot's request, cut at max_tokens and after EOS;
        True when it is done."""
        sequence = self.sequences[slot]
        tokens = tokens[: sequence.max_tokens - len(sequence.generated)]
        if self.eos_id is not None and self.eos_id in tokens:
            tokens = tokens[: tokens.index(self.eos_id) + 1]
            done = True
        else:
            done = len(sequence.generated) + len(tokens) >= sequence.max_tokens
        sequence.generated += tokens
        sequence.token_times_s += [now] * len(tokens)
        self.state.sequences[slot] += tokens
        self.state.committed[slot] += len(tokens)
        return done

    def _release_finished(self, slots: list[int], results: list[RequestResult | None]) -> None:
        now = time.perf_counter() - self.start
        for slot in slots:
            sequence = self.sequences.pop(slot)
            finish = sequence.token_times_s[-1] if sequence.token_times_s else now
            results[sequence.request_index] = RequestResult(sequence.generated, sequence.send_s,
                                                            sequence.token_times_s, finish)

    def _sync(self) -> None:
        """Wait for queued device work, so phase timings are true on asynchronous devices."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
