"""vLLM's synthetic-acceptance rule for greedy requests, in plain torch (no import of vllm), for
:mod:`autotune.engines.vllm.synthetic_cpu`, which runs it where vLLM's CPU backend has no kernel
for it."""

from __future__ import annotations

import torch


def synthetic_greedy_sample(
    output_token_ids: torch.Tensor,  # [batch, max_spec_len + 1], filled with the placeholder id
    cu_num_draft_tokens: torch.Tensor,  # [batch]: cumulative draft tokens per request
    draft_token_ids: torch.Tensor,  # [num_tokens]
    target_argmax: torch.Tensor,  # [num_tokens]
    bonus_token_ids: torch.Tensor,  # [batch, 1]
    is_greedy: torch.Tensor | None,  # [batch], None when every request is greedy
    uniform_probs: torch.Tensor,  # [num_tokens], draws in [0, 1)
    conditional_rates: torch.Tensor,  # [num_speculative_tokens]
) -> None:
    """``rejection_greedy_sample_kernel`` in synthetic mode (``vllm/v1/sample/rejection_sampler.py``
    l. 726-780, vLLM 0.32.0), writing into ``output_token_ids``: per greedy request, draft position i
    is accepted when its draw is below conditional rate i and the draft token is real (>= 0); the
    first rejection emits the target's argmax and stops; with none, the bonus token follows. Rows of
    sampled requests are left to the random kernel."""
    drafts, argmax, draws = draft_token_ids.tolist(), target_argmax.tolist(), uniform_probs.tolist()
    rates, bonus = conditional_rates.tolist(), bonus_token_ids.view(-1).tolist()
    greedy = None if is_greedy is None else is_greedy.tolist()
    start = 0
    for row, end in enumerate(cu_num_draft_tokens.tolist()):
        if greedy is None or greedy[row]:
            tokens = []
            for i in range(start, end):
                accepted = draws[i] < rates[i - start] and drafts[i] >= 0
                tokens.append(drafts[i] if accepted else argmax[i])
                if not accepted:
                    break
            else:
                tokens.append(bonus[row])
            output_token_ids[row, :len(tokens)] = torch.tensor(tokens, dtype=output_token_ids.dtype)
        start = end
