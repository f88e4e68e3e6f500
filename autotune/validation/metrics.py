"""The server's speculative-decoding counters from its Prometheus /metrics, read before and after
each run: what that run drafted and accepted, counted by vLLM rather than inferred.

Counter names as vLLM 0.32.0 exposes them (vllm/v1/metrics/loggers.py): ``vllm:spec_decode_num_drafts``,
``vllm:spec_decode_num_draft_tokens``, ``vllm:spec_decode_num_accepted_tokens`` (``_total`` suffixed
in the exposition); a server without speculation has none of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
SAMPLE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{.*\})?\s+(\S+)")


def counter(text: str, name: str) -> float | None:
    """The sum over label sets of counter ``name`` (with or without ``_total``); None when absent."""
    total, found = 0.0, False
    for line in text.splitlines():
        sample = SAMPLE.match(line)
        if sample and sample.group(1) in (name, f"{name}_total"):
            total += float(sample.group(2))
            found = True
    return total if found else None


@dataclass(frozen=True)
class SpecCounters:
    """The three counters at one moment (zero where the server exposes none)."""

    drafts: float
    draft_tokens: float
    accepted: float

    @classmethod
    def parse(cls, text: str) -> SpecCounters:
        return cls(*(counter(text, name) or 0.0 for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED)))

    def since(self, before: SpecCounters) -> SpecCounters:
        """What was counted between ``before`` and this reading."""
        return SpecCounters(self.drafts - before.drafts, self.draft_tokens - before.draft_tokens,
                            self.accepted - before.accepted)

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted over drafted tokens; None where nothing was drafted (no speculation, or K = 0)."""
        return self.accepted / self.draft_tokens if self.draft_tokens > 0 else None

    @property
    def acceptance_length(self) -> float | None:
        """Tokens per target pass of the drafting steps: 1 + accepted per draft."""
        return 1 + self.accepted / self.drafts if self.drafts > 0 else None
