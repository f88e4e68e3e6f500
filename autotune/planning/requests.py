"""The requests a plan replays, as token counts: each request's prompt and output tokens, from a
workload's text (no tokenizer is loaded) or ``--isl/--osl``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.planning.inputs import Deployment
from autotune.workload import Workload

# Without the tokenizer at hand: ~4 bytes per token for BPE vocabularies on English and code.
BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class Requests:
    """Prompt and output tokens of each request a plan replays (as a steady-state stream)."""

    prompts: list[int]
    lengths: list[int]

    @property
    def context(self) -> float:
        """The mean context of a decoding step: the prompt and half the output."""
        return sum(p + n / 2 for p, n in zip(self.prompts, self.lengths)) / len(self.prompts)

    @property
    def row_tokens(self) -> int:
        """The most positions one row's caches hold: the longest prompt and the longest output."""
        return max(self.prompts) + max(self.lengths)


def prompt_tokens(prompt: str, byte_level: bool) -> int:
    """``prompt``'s tokens with BOS: one per byte for a byte-level target, else estimated."""
    size = len(prompt.encode("utf-8"))
    return size + 1 if byte_level else math.ceil(size / BYTES_PER_TOKEN) + 1


def workload_requests(work: Workload, deployment: Deployment, byte_level: bool, measured: list[int] | None) -> Requests:
    """The workload's prompts and output lengths (``measured``: a stored run's, else the requests'
    max_tokens), each replaced by ``--isl`` / ``--osl`` when given."""
    prompts = [deployment.isl or prompt_tokens(request.prompt, byte_level) for request in work.requests]
    lengths = [deployment.osl or n for n in (measured or [request.max_tokens for request in work.requests])]
    return Requests(prompts, lengths)
