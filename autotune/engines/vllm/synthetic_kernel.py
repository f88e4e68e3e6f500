"""vLLM's synthetic-acceptance rule, in plain torch (no import of vllm), for
:mod:`autotune.engines.vllm.synthetic_cpu`, which runs it where vLLM's CPU backend has no kernel
for it: the greedy kernel's rule and the random kernel's (the engine's warm-up runs the latter once
on dummy inputs when the engine is compiled; timing runs themselves are greedy)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DraftBatch:
    """The tensors both rejection kernels share: the step's drafts, draws and bonus tokens, and
    ``output_token_ids`` that the synthetic rule writes into."""

    output_token_ids: torch.Tensor  # [batch, max_spec_len + 1], filled with the placeholder id
    cu_num_draft_tokens: torch.Tensor  # [batch]: cumulative draft tokens per request
    draft_token_ids: torch.Tensor  # [num_tokens]
    bonus_token_ids: torch.Tensor  # [batch, 1]
    uniform_probs: torch.Tensor  # [num_tokens], draws in [0, 1)
    conditional_rates: torch.Tensor  # [num_speculative_tokens]


def synthetic_greedy_sample(
    batch: DraftBatch,
    target_argmax: torch.Tensor,  # [num_tokens]
    is_greedy: torch.Tensor | None,  # [batch], None when every request is greedy
) -> None:
    """``rejection_greedy_sample_kernel`` in synthetic mode (``vllm/v1/sample/rejection_sampler.py``
    l. 726-780, vLLM 0.32.0), writing into ``batch.output_token_ids``: per greedy request, draft
    position i is accepted when its draw is below conditional rate i and the draft token is real
    (>= 0); the first rejection emits the target's argmax and stops; with none, the bonus token
    follows. Rows of sampled requests are left to the random kernel."""
    greedy = None if is_greedy is None else is_greedy.tolist()
    _synthetic_rows(batch, target_argmax, lambda row: greedy is None or greedy[row])


def synthetic_random_sample(
    batch: DraftBatch,
    recovered_token_ids: torch.Tensor,  # [num_tokens]: what a rejected position emits
    is_greedy: torch.Tensor,  # [batch]
) -> None:
    """``rejection_random_sample_kernel`` in synthetic mode (``vllm/v1/sample/rejection_sampler.py``
    l. 829-900, vLLM 0.32.0): the greedy kernel's rule for the rows of sampled requests, a rejected
    position emitting its recovered token; greedy rows are left to the greedy kernel."""
    greedy = is_greedy.tolist()
    _synthetic_rows(batch, recovered_token_ids, lambda row: not greedy[row])


def _synthetic_rows(batch: DraftBatch, rejected_token_ids: torch.Tensor, applies: Callable[[int], bool]) -> None:
    """Per row ``applies`` to: draft position i accepted when its draw is below conditional rate i and
    the draft token is real (>= 0); the first rejection emits ``rejected_token_ids`` there and stops;
    with none, the bonus token follows."""
    drafts, rejected, draws = batch.draft_token_ids.tolist(), rejected_token_ids.tolist(), batch.uniform_probs.tolist()
    rates, bonus = batch.conditional_rates.tolist(), batch.bonus_token_ids.view(-1).tolist()
    output_token_ids = batch.output_token_ids
    start = 0
    for row, end in enumerate(batch.cu_num_draft_tokens.tolist()):
        if applies(row):
            tokens = []
            for i in range(start, end):
                accepted = draws[i] < rates[i - start] and drafts[i] >= 0
                tokens.append(drafts[i] if accepted else rejected[i])
                if not accepted:
                    break
            else:
                tokens.append(bonus[row])
            output_token_ids[row, :len(tokens)] = torch.tensor(tokens, dtype=output_token_ids.dtype)
        start = end
