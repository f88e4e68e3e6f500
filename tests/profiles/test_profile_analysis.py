"""Reading trials: serving plan (schedule / max_concurrency), Pareto front, MTP-versus-draft verdict."""

from __future__ import annotations

import pytest

import profile_factory as factory
from autotune.profiles import analysis
from autotune.profiles.data import MeasurementInfo
from autotune.store.results import pareto_front


def trial(method: str, depth: int, batch_size: int, tokens_per_s: float, tpot: float | None = None, *,
          number: int = 0, state: str = "complete", memory: int | None = None, acceptance: float | None = None) -> MeasurementInfo:
    return MeasurementInfo(trial_number=number, method=method, depth=depth, batch_size=batch_size, state=state,
                           tokens_per_s=tokens_per_s if state == "complete" else None, tpot_ms_p50=tpot,
                           peak_memory_bytes=memory, acceptance_rate=acceptance)


def test_schedule_from_the_per_batch_table() -> None:
    profile = factory.profile_data("mtp", 4, 1, {1: ("mtp", 4), 4: ("mtp", 2), 8: ("none", 0), 16: ("none", 0)})
    plan = analysis.serving_plan(profile)
    assert plan.draft_len_schedule == {1: 4, 4: 2, 8: 0}  # zeros after the first add nothing
    assert plan.max_concurrency is None
    assert plan.max_draft_len == 4 and plan.max_batch_size == 16
    assert plan.cuda_graph_batch_sizes == [1, 4, 8, 16]


def test_constant_depth_that_switches_off_becomes_max_concurrency() -> None:
    profile = factory.profile_data("ngram", 2, 2, {1: ("ngram", 2), 2: ("ngram", 2), 4: ("ngram", 2), 8: ("none", 0)})
    plan = analysis.serving_plan(profile)
    assert plan.max_concurrency == 4
    assert plan.draft_len_schedule is None


def test_constant_depth_everywhere_needs_neither() -> None:
    plan = analysis.serving_plan(factory.profile_data("mtp", 2, 4, {1: ("mtp", 2), 4: ("mtp", 2), 8: ("mtp", 2)}))
    assert plan.max_concurrency is None and plan.draft_len_schedule is None
    assert plan.depths == {1: 2, 4: 2, 8: 2}


def test_schedule_is_made_non_increasing_keeping_the_profiles_own_depth() -> None:
    # Noise: depth 2 measured best at batch 1 but 3 at batch 4 (the profile's operating point).
    profile = factory.profile_data("mtp", 3, 4, {1: ("mtp", 2), 4: ("mtp", 2), 8: ("mtp", 1)})
    plan = analysis.serving_plan(profile)
    assert plan.depths == {1: 3, 4: 3, 8: 1}
    assert plan.draft_len_schedule == {1: 3, 4: 3, 8: 1}
    assert plan.max_draft_len == 3


def test_missing_batch_size_one_is_added_with_the_smallest_measured_depth() -> None:
    plan = analysis.serving_plan(factory.profile_data("mtp", 3, 2, {2: ("mtp", 3), 8: ("mtp", 1)}))
    assert plan.draft_len_schedule == {1: 3, 2: 3, 8: 1}


def test_another_speculative_winner_falls_back_to_the_profiles_method_trials() -> None:
    # At batch 4 the draft model won; MTP's own fastest trial there (depth 1) beats the baseline.
    trials = (trial("none", 0, 4, 100.0), trial("mtp", 1, 4, 120.0), trial("mtp", 2, 4, 110.0), trial("draft", 2, 4, 130.0))
    profile = factory.profile_data("mtp", 3, 1, {1: ("mtp", 3), 4: ("draft", 2)}, measurements=trials)
    assert analysis.speculation_depths(profile) == {1: 3, 4: 1}


def test_method_none_has_no_schedule() -> None:
    plan = analysis.serving_plan(factory.profile_data("none", 0, 8, {1: ("mtp", 2), 8: ("none", 0)}))
    assert (plan.max_draft_len, plan.depths, plan.draft_len_schedule, plan.max_concurrency) == (0, {}, None, None)
    assert plan.max_batch_size == 8


def test_max_num_tokens_covers_every_sequence_verifying_its_drafts() -> None:
    plan = analysis.serving_plan(factory.profile_data("mtp", 4, 1, {1: ("mtp", 4), 4096: ("mtp", 1)}))
    assert plan.max_num_tokens(8192) == 4096 * (1 + 4)
    assert plan.max_num_tokens(8192) >= plan.max_batch_size * (1 + plan.max_draft_len)


def test_pareto_front_keeps_only_undominated_trials() -> None:
    trials = [trial("none", 0, 1, 100, 10.0, number=1), trial("mtp", 2, 1, 180, 5.0, number=2),
              trial("mtp", 2, 8, 500, 16.0, number=3), trial("draft", 2, 8, 400, 20.0, number=4),
              trial("none", 0, 8, 450, 18.0, number=5), trial("draft", 1, 1, 150, 6.0, number=6),
              trial("draft", 9, 1, 0, None, number=7, state="failed")]
    assert [m.trial_number for m in pareto_front(trials)] == [2, 3]


def test_verdict_names_the_faster_method_with_its_numbers() -> None:
    gib = 2**30
    trials = [trial("none", 0, b, 100.0 * b, memory=gib) for b in (1, 8)] + [
        trial("mtp", 2, 1, 200.0, memory=int(1.02 * gib), acceptance=0.8),
        trial("mtp", 1, 8, 880.0, memory=int(1.02 * gib), acceptance=0.8),
        trial("draft", 3, 1, 150.0, memory=int(1.3 * gib), acceptance=0.6),
        trial("draft", 1, 8, 720.0, memory=int(1.3 * gib), acceptance=0.6),
    ]
    verdict = analysis.mtp_versus_draft(trials)
    assert verdict.winner == "mtp"
    assert verdict.mtp.speedup == {1: 2.0, 8: 1.1} and verdict.draft.wins == 1
    assert verdict.mtp.geomean_speedup == pytest.approx((2.0 * 1.1) ** 0.5)
    assert verdict.draft.memory_overhead[8] == pytest.approx(0.3, abs=1e-6)
    assert "MTP wins" in verdict.text and "1.48x" in verdict.text and "+30%" in verdict.text


def test_verdict_when_speculation_never_pays_or_one_method_is_missing() -> None:
    base = [trial("none", 0, 1, 100.0)]
    losing = analysis.mtp_versus_draft(base + [trial("mtp", 1, 1, 90.0), trial("draft", 1, 1, 80.0)])
    assert losing.winner is None and losing.text.startswith("Neither pays off")
    only = analysis.mtp_versus_draft(base + [trial("mtp", 1, 1, 150.0)])
    assert only.winner is None and only.draft is None and "Only MTP" in only.text
    assert analysis.mtp_versus_draft(base).text.startswith("Neither MTP nor")
