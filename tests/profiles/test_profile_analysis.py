"""Reading trials: serving schedule (draft_len_schedule / max_concurrency), Pareto front."""

from __future__ import annotations

from dataclasses import replace

import profile_factory as factory
from autotune.profiles import analysis
from autotune.analysis.decision import pareto_front
from autotune.store.results import TrialRow


def trial(method: str, depth: int, concurrency: int, tokens_per_s: float, tpot: float | None = None, *,
          number: int = 0, state: str = "complete") -> TrialRow:
    """A screening row: one pass, no interval, no speedup."""
    return TrialRow(trial_number=number, method=method, depth=depth, concurrency=concurrency, state=state,
                    tokens_per_s=tokens_per_s if state == "complete" else None, tpot_ms_p50=tpot)


def confirmed(method: str, depth: int, concurrency: int, tokens_per_s: float, speedup: float | None = None,
              interval: tuple[float, float] | None = None) -> TrialRow:
    """A confirmation row with its paired speedup (the baseline's is 1) and, if given, its interval."""
    row = trial(method, depth, concurrency, tokens_per_s)
    value = 1.0 if method == "none" else speedup
    intervals = {"tokens_per_s": {"value": tokens_per_s, "low": 0.98 * tokens_per_s, "high": 1.02 * tokens_per_s, "n": 5}}
    if interval is not None:
        intervals["speedup"] = {"value": value, "low": interval[0], "high": interval[1], "n": 5}
    return replace(row, phase="confirmation", repetitions=5, speedup=value, intervals=intervals,
                   extra={"confirmation": {"run": 1, "screened": 10, "concurrency": concurrency}})


def test_schedule_from_the_per_batch_table() -> None:
    profile = factory.profile_data("mtp", 4, 1, {1: ("mtp", 4), 4: ("mtp", 2), 8: ("none", 0), 16: ("none", 0)})
    schedule = analysis.serving_schedule(profile)
    assert schedule.draft_len_schedule == {1: 4, 4: 2, 8: 0}  # zeros after the first add nothing
    assert schedule.max_concurrency is None
    assert schedule.max_draft_len == 4 and schedule.max_batch_size == 16
    assert schedule.cuda_graph_batch_sizes == [1, 4, 8, 16]


def test_constant_depth_that_switches_off_becomes_max_concurrency() -> None:
    profile = factory.profile_data("ngram", 2, 2, {1: ("ngram", 2), 2: ("ngram", 2), 4: ("ngram", 2), 8: ("none", 0)})
    schedule = analysis.serving_schedule(profile)
    assert schedule.max_concurrency == 4
    assert schedule.draft_len_schedule is None


def test_constant_depth_everywhere_needs_neither() -> None:
    schedule = analysis.serving_schedule(factory.profile_data("mtp", 2, 4, {1: ("mtp", 2), 4: ("mtp", 2), 8: ("mtp", 2)}))
    assert schedule.max_concurrency is None and schedule.draft_len_schedule is None
    assert schedule.depths == {1: 2, 4: 2, 8: 2}


def test_schedule_is_made_non_increasing_keeping_the_profiles_own_depth() -> None:
    # Noise: depth 2 measured best at batch 1 but 3 at batch 4 (the profile's operating point).
    profile = factory.profile_data("mtp", 3, 4, {1: ("mtp", 2), 4: ("mtp", 2), 8: ("mtp", 1)})
    schedule = analysis.serving_schedule(profile)
    assert schedule.depths == {1: 3, 4: 3, 8: 1}
    assert schedule.draft_len_schedule == {1: 3, 4: 3, 8: 1}
    assert schedule.max_draft_len == 3


def test_missing_concurrency_one_is_added_with_the_smallest_measured_depth() -> None:
    schedule = analysis.serving_schedule(factory.profile_data("mtp", 3, 2, {2: ("mtp", 3), 8: ("mtp", 1)}))
    assert schedule.draft_len_schedule == {1: 3, 2: 3, 8: 1}


def test_another_speculative_winner_falls_back_to_the_profiles_method_trials() -> None:
    # At batch 4 the draft model won; MTP's own fastest confirmed row there (depth 1) clears 1.0x at 95 %.
    trials = (confirmed("none", 0, 4, 100.0), confirmed("mtp", 1, 4, 120.0, 1.2, (1.1, 1.3)),
              confirmed("mtp", 2, 4, 110.0, 1.1, (1.02, 1.18)), confirmed("draft", 2, 4, 130.0, 1.3, (1.2, 1.4)))
    profile = factory.profile_data("mtp", 3, 1, {1: ("mtp", 3), 4: ("draft", 2)}, measurements=trials)
    assert analysis.speculation_depths(profile) == {1: 3, 4: 1}


def test_fallback_needs_a_speedup_that_clears_one_at_95_percent() -> None:
    within_noise = (confirmed("none", 0, 4, 100.0), confirmed("mtp", 1, 4, 104.0, 1.04, (0.97, 1.11)),
                    confirmed("draft", 2, 4, 130.0, 1.3, (1.2, 1.4)))
    profile = factory.profile_data("mtp", 3, 1, {1: ("mtp", 3), 4: ("draft", 2)}, measurements=within_noise)
    assert analysis.speculation_depths(profile) == {1: 3, 4: 0}
    # Screening passes have no paired speedup: one faster pass is no reason to speculate.
    screened = (trial("none", 0, 4, 100.0), trial("mtp", 1, 4, 120.0), trial("draft", 2, 4, 130.0))
    profile = factory.profile_data("mtp", 3, 1, {1: ("mtp", 3), 4: ("draft", 2)}, measurements=screened)
    assert analysis.speculation_depths(profile) == {1: 3, 4: 0}


def test_method_none_has_no_schedule() -> None:
    schedule = analysis.serving_schedule(factory.profile_data("none", 0, 8, {1: ("mtp", 2), 8: ("none", 0)}))
    assert (schedule.max_draft_len, schedule.depths, schedule.draft_len_schedule, schedule.max_concurrency) == (0, {}, None, None)
    assert schedule.max_batch_size == 8


def test_max_num_tokens_covers_every_sequence_verifying_its_drafts() -> None:
    schedule = analysis.serving_schedule(factory.profile_data("mtp", 4, 1, {1: ("mtp", 4), 4096: ("mtp", 1)}))
    assert schedule.max_num_tokens(8192) == 4096 * (1 + 4)
    assert schedule.max_num_tokens(8192) >= schedule.max_batch_size * (1 + schedule.max_draft_len)


def test_pareto_front_keeps_only_undominated_trials() -> None:
    trials = [trial("none", 0, 1, 100, 10.0, number=1), trial("mtp", 2, 1, 180, 5.0, number=2),
              trial("mtp", 2, 8, 500, 16.0, number=3), trial("draft", 2, 8, 400, 20.0, number=4),
              trial("none", 0, 8, 450, 18.0, number=5), trial("draft", 1, 1, 150, 6.0, number=6),
              trial("draft", 9, 1, 0, None, number=7, state="failed")]
    assert [m.trial_number for m in pareto_front(trials)] == [2, 3]


def test_a_table_row_of_another_draft_model_is_not_the_profiles() -> None:
    # The table and the profile's details name drafts by the tuner's label: at concurrency 4 another
    # draft model won, so its depth is not the profile's draft's (and no trial of it was loaded).
    profile = factory.profile_data("draft", 3, 1, {1: ("draft", 3), 4: ("draft", 2)})
    assert analysis.speculation_depths(profile) == {1: 3, 4: 2}
    rows = [{**row, "draft": "other-draft"} if row["concurrency"] == 4 else row for row in profile.per_concurrency]
    assert analysis.speculation_depths(replace(profile, per_concurrency=rows)) == {1: 3}
