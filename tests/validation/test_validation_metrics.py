"""Acceptance from vLLM's /metrics counters, read before and after a run."""

from __future__ import annotations

import pytest

from autotune.validation.metrics import SpecCounters, counter

EXPOSITION = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 562.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 1124.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 941.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 500.0
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_counters_sum_their_label_sets_and_ignore_neighbours() -> None:
    assert counter(EXPOSITION, "vllm:spec_decode_num_accepted_tokens") == 941.0  # not the _per_pos one
    assert counter(EXPOSITION + 'vllm:spec_decode_num_drafts_total{engine="1"} 8.0\n',
                   "vllm:spec_decode_num_drafts") == 570.0
    assert counter(EXPOSITION, "vllm:absent") is None


def test_a_run_counts_what_changed_during_it() -> None:
    before = SpecCounters(100, 200, 150)
    run = SpecCounters.parse(EXPOSITION).since(before)
    assert (run.drafts, run.draft_tokens, run.accepted) == (462, 924, 791)
    assert run.acceptance_rate == pytest.approx(791 / 924)
    assert run.acceptance_length == pytest.approx(1 + 791 / 462)


def test_a_server_without_speculation_has_no_acceptance() -> None:
    idle = SpecCounters.parse("vllm:num_requests_running 0.0\n")
    assert idle == SpecCounters(0, 0, 0)
    assert idle.acceptance_rate is None and idle.acceptance_length is None
