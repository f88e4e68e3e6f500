"""Study decisions (:mod:`autotune.analysis.decision`) on synthetic, seeded measurements.

Confirmation rows are built the way the protocol and the tuner store them: every configuration at
a concurrency (the baseline included) measured in the same rounds, each round sharing a machine
drift and adding a small independent per-pass noise; ``extra["samples"]``/``extra["rounds"]`` the
per-round tokens/s, ``intervals`` the Student-t mean and the paired speedup, ``speedup`` the paired
ratio's value. Every random draw comes from ``random.Random(seed)``, so each test is deterministic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from autotune.analysis.decision import (
    NO_SLO, PRACTICAL_MARGIN, SIMPLICITY, choose_profile, compare, config_label, decide_at, deciding_rows, method_verdicts,
    pareto_front, per_concurrency, simplicity,
)
from autotune.analysis.intervals import Estimate, mean_interval, paired_ratio_interval
from autotune.analysis.summary import summary_lines
from autotune.search.objective import Slo
from autotune.store.results import TrialRow

GIB = 1 << 30


@dataclass(frozen=True)
class Truth:
    """A configuration and the tokens/s it really has (what the noisy rounds scatter around)."""

    method: str
    depth: int = 0
    tokens: float = 1000.0
    memory: int = 10 * GIB
    draft: str | None = None
    tpot: float | None = None  # TPOT p50 = p90, ms (None: not measured)
    acceptance: float | None = None

    @property
    def stored_draft(self) -> str | None:
        return self.draft or ("builtin" if self.method == "draft" else None)


BASE = Truth("none", 0, 1000.0)


def confirmed(truths: list[Truth], concurrency: int, *, seed: int, rounds: int = 8, drift: float = 0.10,
              noise: float = 0.05, run: int = 1, screened: int = 12, first_number: int = 0,
              kept: dict[int, int] | None = None, extra: dict | None = None) -> list[TrialRow]:
    """One confirmation run's rows at ``concurrency``: ``truths`` (one of them the baseline) measured
    in ``rounds`` interleaved rounds. Round r scales every configuration by a shared drift factor
    (the machine's state in that window) and each pass by its own noise. ``kept``: index in
    ``truths`` -> rounds that configuration stayed for (racing dropped it after them)."""
    rng = random.Random(seed)
    factors = [1 + rng.uniform(-drift, drift) for _ in range(rounds)]
    samples = [[truth.tokens * factor * (1 + rng.gauss(0, noise)) for factor in factors] for truth in truths]
    base_index = next(i for i, truth in enumerate(truths) if truth.method == "none")
    base_rounds = list(range(rounds))
    rows = []
    for index, (truth, values) in enumerate(zip(truths, samples)):
        my_rounds = base_rounds[: (kept or {}).get(index, rounds)]
        values = values[: len(my_rounds)]
        tokens = mean_interval(values)
        intervals = {"tokens_per_s": tokens.to_dict()}
        if truth.method == "none":
            speedup = 1.0
        else:
            ratio = paired_ratio_interval(values, samples[base_index][: len(my_rounds)])
            intervals["speedup"] = ratio.to_dict()
            speedup = ratio.value
        rows.append(TrialRow(
            trial_number=first_number + index, method=truth.method, draft=truth.stored_draft, depth=truth.depth,
            concurrency=concurrency, state="complete", reason=None, tokens_per_s=tokens.value,
            tpot_ms_p50=truth.tpot, tpot_ms_p90=truth.tpot, peak_memory_bytes=truth.memory,
            acceptance_rate=truth.acceptance, speedup=speedup, phase="confirmation", repetitions=len(values),
            intervals=intervals,
            extra={"confirmation": {"run": run, "screened": screened, "concurrency": concurrency},
                   "samples": values, "rounds": my_rounds, **(extra or {})},
        ))
    return rows


def screening(truth: Truth, concurrency: int, number: int, tokens: float | None = None) -> TrialRow:
    """One screening pass (n = 1): no interval, no speedup (nothing paired it with a baseline)."""
    return TrialRow(
        trial_number=number, method=truth.method, draft=truth.stored_draft, depth=truth.depth, concurrency=concurrency,
        state="complete", reason=None, tokens_per_s=truth.tokens if tokens is None else tokens,
        tpot_ms_p50=truth.tpot, tpot_ms_p90=truth.tpot, peak_memory_bytes=truth.memory,
        acceptance_rate=truth.acceptance, phase="screening",
    )


def by_label(rows: list[TrialRow]) -> dict[str, TrialRow]:
    return {row.config_label: row for row in rows}


# -- the helper measures like the protocol ---------------------------------------------------------


def test_stored_speedup_is_the_paired_ratio_to_the_baseline():
    rows = by_label(confirmed([BASE, Truth("mtp", 2, 1300.0)], 4, seed=1))
    stored = rows["mtp@2"].estimate("speedup")
    paired = compare(rows["mtp@2"], rows["none"])
    assert stored.value == pytest.approx(paired.value) and stored.low == pytest.approx(paired.low)
    assert stored.high == pytest.approx(paired.high) and stored.n == paired.n == 8
    assert rows["mtp@2"].speedup == pytest.approx(stored.value)
    assert stored.low < 1.3 < stored.high and stored.low > 1.2  # 1.3x true: the drift cancels in the pairs
    assert compare(rows["none"], rows["mtp@2"]).value == pytest.approx(1 / paired.value)


def test_pairing_cancels_the_shared_drift():
    """30 % round-to-round drift, 0.5 % per-pass noise: the two means' intervals overlap widely,
    yet the paired ratio separates a 5 % difference."""
    rows = by_label(confirmed([BASE, Truth("mtp", 1, 1050.0)], 1, seed=3, drift=0.30, noise=0.005))
    a, b = rows["mtp@1"].estimate("tokens_per_s"), rows["none"].estimate("tokens_per_s")
    assert a.low < b.high  # unpaired: cannot tell them apart
    ratio = compare(rows["mtp@1"], rows["none"])
    assert ratio.excludes(1.0) and ratio.value == pytest.approx(1.05, abs=0.01)


def test_compare_pairs_only_shared_rounds_of_one_run_and_concurrency():
    rows = confirmed([BASE, Truth("mtp", 1, 1200.0), Truth("draft", 3, 900.0)], 2, seed=5, kept={2: 3})
    base, mtp, draft = rows
    assert compare(draft, base).n == 3  # racing dropped the draft after 3 rounds
    assert compare(mtp, draft).n == 3
    assert compare(mtp, mtp).value == 1.0
    other_run = confirmed([BASE, Truth("mtp", 1, 1200.0)], 2, seed=5, run=2)
    assert compare(mtp, other_run[0]) is None  # different runs: never paired
    other_batch = confirmed([BASE], 4, seed=5)
    assert compare(mtp, other_batch[0]) is None
    assert compare(screening(Truth("mtp", 1), 2, 0), screening(BASE, 2, 1)) is None


# -- ties and the simplicity order -----------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_percent_apart_with_five_percent_noise_is_a_tie_and_mtp_beats_draft(seed):
    rows = confirmed([BASE, Truth("draft", 7, 1515.0), Truth("mtp", 3, 1500.0)], 8, seed=seed)
    named = by_label(rows)
    ratio = compare(named["draft@7"], named["mtp@3"])
    assert ratio.low < 1.0 < ratio.high
    decision = decide_at(rows, 8)
    assert {config_label(row) for row in decision.tied} == {"draft@7", "mtp@3"}  # the baseline is far behind
    assert config_label(decision.recommended) == "mtp@3"
    assert decision.depth == 3 and decision.confirmed
    if decision.leader is not decision.recommended:
        assert decision.ratio_to_leader.low < 1.0 < decision.ratio_to_leader.high


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ngram_beats_mtp_when_tied(seed):
    rows = confirmed([BASE, Truth("mtp", 2, 1400.0), Truth("ngram", 4, 1386.0)], 8, seed=seed)
    decision = decide_at(rows, 8)
    assert [config_label(row) for row in decision.tied] == ["ngram@4", "mtp@2"]
    assert config_label(decision.recommended) == "ngram@4"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_speedup_within_noise_of_one_means_depth_zero(seed):
    """Speculation 1 % faster than the baseline with 5 % noise: its interval does not clear 1.0x,
    the baseline is tied with the leader and the concurrency runs without speculation."""
    rows = confirmed([BASE, Truth("mtp", 2, 1010.0)], 16, seed=seed)
    named = by_label(rows)
    speedup = named["mtp@2"].estimate("speedup")
    assert speedup.low < 1.0 < speedup.high
    decision = decide_at(rows, 16)
    assert decision.recommended is named["none"] and decision.depth == 0
    assert decision.tied[0] is named["none"] and len(decision.tied) == 2
    (best,) = per_concurrency(rows, [16], NO_SLO)
    assert best.depth == 0 and best.label == "none" and best.method == "none"
    assert best.speedup == 1.0 and best.confirmed and best.repetitions == 8
    assert set(best.tied) == {"none", "mtp@2"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_thirty_percent_faster_with_low_noise_wins_alone(seed):
    rows = confirmed([BASE, Truth("draft", 5, 1300.0), Truth("mtp", 3, 1000.0)], 8, seed=seed, noise=0.01)
    decision = decide_at(rows, 8)
    assert decision.tied == [decision.leader]
    assert config_label(decision.recommended) == "draft@5" and decision.depth == 5
    assert decision.tie_sentence() is None
    (best,) = per_concurrency(rows, [8], NO_SLO)
    assert best.label == "draft@5" and best.tied == ["draft@5"] and best.leader == "draft@5"
    assert best.speedup == pytest.approx(1.3, abs=0.03)
    assert best.speedup_low < best.speedup < best.speedup_high and best.speedup_low > 1.0


def test_the_full_preference_order():
    """Everything within noise of everything: none, then ngram, mtp, draft; then smaller depth; then
    less memory (a smaller draft at the same depth)."""
    truths = [
        Truth("draft", 7, 1000.0, memory=14 * GIB), Truth("draft", 3, 1000.0, memory=14 * GIB, draft="big"),
        Truth("draft", 3, 1000.0, memory=12 * GIB), Truth("mtp", 5, 1000.0, memory=11 * GIB),
        Truth("mtp", 2, 1000.0, memory=11 * GIB), Truth("ngram", 6, 1000.0), Truth("ngram", 1, 1000.0), BASE,
    ]
    rows = confirmed(truths, 4, seed=11, noise=0.02, drift=0.05)
    decision = decide_at(rows, 4)
    assert len(decision.tied) == len(rows)  # precondition: the paired comparison separates none of them
    assert [config_label(row) for row in decision.tied] == [
        "none", "ngram@1", "ngram@6", "mtp@2", "mtp@5", "draft@3", "draft:big@3", "draft@7",
    ]
    assert decision.recommended.method == "none" and decision.depth == 0
    assert [key for key, _ in sorted(SIMPLICITY.items(), key=lambda item: item[1])] == ["none", "ngram", "mtp", "draft"]
    assert sorted(rows, key=simplicity) == decision.tied


@pytest.mark.parametrize(("truths", "recommended", "reason"), [
    ([Truth("draft", 7, 1510.0), Truth("mtp", 3, 1500.0)], "mtp@3", "no second model to deploy"),
    ([Truth("draft", 7, 1500.0), Truth("mtp", 3, 1515.0)], "mtp@3", "no second model to deploy"),  # it leads too
    ([Truth("draft", 7, 1510.0), Truth("mtp", 3, 1500.0), Truth("mtp", 5, 1505.0)], "mtp@3",
     "no second model to deploy"),
    ([Truth("draft", 7, 1510.0), Truth("draft", 3, 1500.0)], "draft@3", "a smaller depth"),
    ([Truth("mtp", 2, 1510.0), Truth("ngram", 3, 1500.0)], "ngram@3", "no draft model or MTP heads to deploy"),
    ([Truth("draft", 3, 1510.0, memory=14 * GIB, draft="big"), Truth("draft", 3, 1500.0, memory=12 * GIB)],
     "draft@3", "less memory"),
])
def test_the_tie_sentence_names_both_and_the_reason(truths, recommended, reason):
    rows = confirmed([BASE, *truths], 8, seed=2, noise=0.02)  # the truths lie within 1 %: tied at this noise
    decision = decide_at(rows, 8)
    names = {config_label(row) for row in decision.tied}
    assert names == {truth_label for truth_label in map(config_label, rows[1:])}
    assert config_label(decision.recommended) == recommended
    sentence = decision.tie_sentence()
    head, tail = sentence.split(" are within noise of each other")
    assert head.startswith("at concurrency 8, ")
    assert all(name in head for name in names) and " and " in head
    assert tail.endswith(f": recommending {recommended} — {reason}")
    widths = [compare(r, decision.leader).relative_half_width for r in decision.tied if r is not decision.leader]
    assert f"(±{max(widths):.0%})" in tail  # the widest comparison with the leader


def test_summary_carries_the_tie_sentence():
    rows = confirmed([BASE, Truth("draft", 7, 1510.0), Truth("mtp", 3, 1500.0)], 8, seed=0)
    profile = choose_profile(rows, Slo())
    assert config_label(profile.row) == "mtp@3" and profile.slo_met
    lines = summary_lines(profile, per_concurrency(rows, [8], Slo()), method_verdicts(rows, ["mtp", "draft"]), Slo())
    assert lines[0].startswith("Recommended: mtp@3 c8 (") and "over none" in lines[0]
    tie = [line for line in lines if "within noise" in line]
    assert len(tie) == 1 and tie[0].startswith("At concurrency 8, ") and tie[0].endswith("no second model to deploy.")
    assert "draft@7" in tie[0] and "mtp@3" in tie[0]
    assert not any("screening figures" in line for line in lines)
    assert profile.to_dict()["tied_with"] == ["mtp@3", "draft@7"] and profile.to_dict()["confirmed"] is True


# -- which rows decide -----------------------------------------------------------------------------


def screening_study() -> list[TrialRow]:
    return [
        screening(BASE, 1, 0, 400.0), screening(Truth("mtp", 2), 1, 1, 620.0), screening(Truth("draft", 4), 1, 2, 580.0),
        screening(BASE, 4, 3, 1200.0), screening(Truth("mtp", 2), 4, 4, 1500.0), screening(Truth("ngram", 3), 4, 5, 1250.0),
    ]


def test_screening_only_figures_have_no_speedup():
    rows = screening_study()
    assert deciding_rows(rows) == rows
    table = per_concurrency(rows, [1, 4], NO_SLO)
    for best in table:
        assert best.label == "mtp@2" and best.speedup is None and best.speedup_low is None and best.speedup_high is None
        assert not best.confirmed and best.repetitions == 1 and best.tokens_per_s_low is None and best.trials == 3
        assert best.tied == ["mtp@2"]  # one pass each: nothing is paired, nothing is tied
    assert [b.baseline_tokens_per_s for b in table] == [400.0, 1200.0]
    profile = choose_profile(rows, Slo())
    assert profile.row.concurrency == 4 and config_label(profile.row) == "mtp@2" and not profile.decision.confirmed
    verdicts = method_verdicts(rows, ["mtp", "draft", "ngram"])
    assert all(v.speedup is None and not v.confirmed for v in verdicts)
    lines = summary_lines(profile, table, verdicts, Slo())
    assert lines[0] == "Recommended: mtp@2 c4 (1500.0 tokens/s, one run)."
    assert "These are screening figures (one run each, no interval): the confirmation phase did not run." in lines
    assert "mtp: not among the finalists; best screened mtp@2 c4 at 1500.0 tokens/s (one run)." in lines
    assert lines[-1] == "Schedule by concurrency: c1 mtp@2; c4 mtp@2."
    assert not any("x [" in line for line in lines)  # no speedup anywhere


def test_screening_rows_never_decide_once_a_confirmation_exists():
    rows = [*screening_study(), screening(Truth("draft", 4), 4, 6, 5000.0)]  # a wild screening pass
    rows += confirmed([BASE, Truth("mtp", 2, 1500.0), Truth("draft", 4, 1100.0)], 4, seed=4, noise=0.01)
    rows += confirmed([Truth("none", 0, 400.0), Truth("mtp", 2, 600.0)], 1, seed=5, noise=0.01, first_number=10)
    deciding = deciding_rows(rows)
    assert deciding and all(row.phase == "confirmation" for row in deciding)
    profile = choose_profile(rows, Slo())
    assert config_label(profile.row) == "mtp@2" and profile.row.concurrency == 4 and profile.row.phase == "confirmation"
    table = per_concurrency(rows, [1, 4], NO_SLO)
    assert [b.label for b in table] == ["mtp@2", "mtp@2"] and all(b.confirmed for b in table)
    assert table[1].trials == 4  # screening trials there; confirmation rows are not trials
    assert table[1].speedup == pytest.approx(1.5, abs=0.03) and table[1].speedup_low > 1.4


def test_the_latest_confirmation_run_decides():
    run1 = confirmed([BASE, Truth("draft", 5, 1600.0), Truth("mtp", 3, 1300.0)], 8, seed=6, noise=0.01, run=1)
    run2 = confirmed([BASE, Truth("draft", 5, 1300.0), Truth("mtp", 3, 1600.0)], 8, seed=7, noise=0.01, run=2,
                     first_number=3, screened=20)
    for rows in (run1 + run2, run2 + run1):
        assert deciding_rows(rows) == run2
        profile = choose_profile(rows, Slo())
        assert config_label(profile.row) == "mtp@3" and profile.row.extra["confirmation"]["run"] == 2
        (best,) = per_concurrency(rows, [8], NO_SLO)
        assert best.label == "mtp@3" and best.speedup == pytest.approx(1.6, abs=0.03)


def test_a_failed_later_run_leaves_the_earlier_one_deciding():
    run1 = confirmed([BASE, Truth("mtp", 3, 1300.0)], 8, seed=6, noise=0.01)
    failed = TrialRow(trial_number=9, method="none", draft=None, depth=0, concurrency=8, state="failed",
                      reason="worker died", phase="confirmation", extra={"confirmation": {"run": 2, "concurrency": 8}})
    assert deciding_rows([*run1, failed]) == run1


# -- the neighbour check ---------------------------------------------------------------------------


def test_an_implausible_concurrency_is_never_recommended_and_withholds_its_speedup():
    reason = "baseline 40 % below concurrency 4's"
    rows = confirmed([BASE, Truth("mtp", 2, 1400.0)], 4, seed=8, noise=0.01)
    rows += confirmed([Truth("none", 0, 600.0), Truth("mtp", 2, 2400.0)], 8, seed=9, noise=0.01, first_number=2,
                      extra={"implausible": reason})
    profile = choose_profile(rows, Slo())
    assert profile.row.concurrency == 4 and config_label(profile.row) == "mtp@2"
    table = per_concurrency(rows, [4, 8], NO_SLO)
    assert table[0].speedup is not None and table[0].note is None
    assert table[1].label == "mtp@2" and table[1].tokens_per_s > 2000
    assert table[1].speedup is None and table[1].speedup_low is None and table[1].speedup_high is None
    assert table[1].note == reason
    (mtp,) = method_verdicts(rows, ["mtp"])
    assert mtp.best_concurrency == 4 and mtp.confirmed and mtp.speedup == pytest.approx(1.4, abs=0.03)
    lines = summary_lines(profile, table, [mtp], Slo())
    assert lines[-1].startswith("Schedule by concurrency: c4 mtp@2 1.4") and lines[-1].endswith(f"c8 mtp@2 ({reason}).")


def test_only_implausible_rows_means_no_profile():
    rows = confirmed([BASE, Truth("mtp", 2, 1400.0)], 4, seed=8, extra={"implausible": "suspect"})
    assert choose_profile(rows, Slo()) is None
    assert summary_lines(None, [], [], Slo()) == ["No trial has completed yet."]


# -- the profile -----------------------------------------------------------------------------------


def test_choose_profile_takes_the_concurrency_with_the_fastest_leader_and_its_simplest_tie():
    rows = confirmed([BASE, Truth("mtp", 2, 1500.0)], 2, seed=10, noise=0.01)
    rows += confirmed([Truth("none", 0, 2000.0), Truth("draft", 6, 2820.0), Truth("mtp", 2, 2800.0)], 8, seed=0,
                      first_number=3)
    rows += confirmed([Truth("none", 0, 2500.0), Truth("mtp", 2, 2700.0)], 16, seed=12, noise=0.01, first_number=6)
    profile = choose_profile(rows, Slo())
    assert profile.row.concurrency == 8
    assert profile.decision.leader is not profile.row or config_label(profile.row) == "mtp@2"
    assert config_label(profile.row) == "mtp@2" and profile.slo_met and profile.violation == 0
    assert {config_label(row) for row in profile.decision.tied} == {"draft@6", "mtp@2"}


def test_choose_profile_respects_the_slo():
    slo = Slo(tpot_ms=20.0)
    rows = confirmed([Truth("none", 0, 1000.0, tpot=15.0), Truth("mtp", 2, 1400.0, tpot=12.0),
                      Truth("draft", 6, 1700.0, tpot=24.0)], 4, seed=13, noise=0.01)
    rows += confirmed([Truth("none", 0, 2200.0, tpot=30.0), Truth("mtp", 2, 3000.0, tpot=22.0)], 16, seed=14,
                      noise=0.01, first_number=3)
    profile = choose_profile(rows, slo)
    assert profile.row.concurrency == 4 and config_label(profile.row) == "mtp@2"  # draft@6 is faster, but too slow per token
    assert profile.slo_met and profile.violation == 0
    table = per_concurrency(rows, [4, 16], slo)
    assert table[0].label == "mtp@2" and table[0].slo_met
    assert table[1].label == "mtp@2" and not table[1].slo_met  # nothing meets it there: the closest miss
    lines = summary_lines(profile, table, method_verdicts(rows, ["mtp", "draft"]), slo)
    assert lines[0].startswith("Recommended, meeting tpot_ms_p90 <= 20: mtp@2 c4 (")


def test_when_nothing_meets_the_slo_the_closest_miss_is_chosen():
    slo = Slo(tpot_ms=10.0)
    rows = confirmed([Truth("none", 0, 1000.0, tpot=15.0), Truth("mtp", 2, 1400.0, tpot=12.0)], 4, seed=15, noise=0.01)
    rows += confirmed([Truth("none", 0, 2200.0, tpot=30.0), Truth("mtp", 2, 3000.0, tpot=22.0)], 16, seed=16,
                      noise=0.01, first_number=2)
    profile = choose_profile(rows, slo)
    assert profile.row.concurrency == 4 and config_label(profile.row) == "mtp@2"
    assert not profile.slo_met and profile.violation == pytest.approx(0.2)
    lines = summary_lines(profile, per_concurrency(rows, [4, 16], slo), [], slo)
    assert lines[0].startswith("No configuration meets tpot_ms_p90 <= 10; the closest is mtp@2 c4 (tpot_ms_p90 = 12.0;")


# -- per-method verdicts ---------------------------------------------------------------------------


def test_method_verdicts_confirmed_and_screened_only():
    rows = [screening(BASE, 4, 0, 1000.0), screening(Truth("mtp", 2), 4, 1, 1450.0),
            screening(Truth("draft", 5), 4, 2, 1380.0), screening(Truth("ngram", 3), 4, 3, 1050.0),
            screening(Truth("ngram", 5), 4, 4, 1080.0)]
    rows += confirmed([Truth("none", 0, 1000.0, memory=10 * GIB), Truth("mtp", 2, 1450.0, memory=11 * GIB, acceptance=0.7),
                       Truth("draft", 5, 1250.0, memory=12 * GIB)], 4, seed=17, noise=0.01, first_number=10)
    mtp, draft, ngram = method_verdicts(rows, ["mtp", "draft", "ngram"])
    assert mtp.confirmed and mtp.best_label == "mtp@2 c4" and mtp.best_depth == 2 and mtp.trials == 1
    assert mtp.speedup == pytest.approx(1.45, abs=0.02) and mtp.speedup_low < mtp.speedup < mtp.speedup_high
    assert mtp.memory_overhead_bytes == GIB and mtp.wins_at == [4] and mtp.acceptance_rate == 0.7
    assert mtp.by_concurrency[0]["repetitions"] == 8 and mtp.by_concurrency[0]["speedup_low"] is not None
    assert draft.confirmed and draft.speedup == pytest.approx(1.25, abs=0.02) and draft.wins_at == []
    assert not ngram.confirmed and ngram.speedup is None and ngram.speedup_low is None
    assert ngram.best_label == "ngram@5 c4" and ngram.tokens_per_s == 1080.0 and ngram.trials == 2
    lines = summary_lines(choose_profile(rows, Slo()), per_concurrency(rows, [4], NO_SLO), [mtp, draft, ngram], Slo())
    assert any(line.startswith("mtp: best 1.4") and "(mtp@2 c4, acceptance 70%, +1024.0 MiB)." in line for line in lines)
    assert "ngram: not among the finalists; best screened ngram@5 c4 at 1080.0 tokens/s (one run)." in lines


def test_a_draft_with_a_label_gets_a_verdict_of_its_own():
    rows = confirmed([BASE, Truth("draft", 3, 1300.0, draft="small"), Truth("draft", 3, 1200.0)], 2, seed=18, noise=0.01)
    small, builtin = method_verdicts(rows, ["draft:small", "draft"])
    assert small.best_label == "draft:small@3 c2" and small.speedup == pytest.approx(1.3, abs=0.02)
    assert small.wins_at == [2] and builtin.wins_at == []
    assert builtin.best_label == "draft@3 c2" and builtin.speedup == pytest.approx(1.2, abs=0.02)


# -- the Pareto front ------------------------------------------------------------------------------


def test_pareto_front():
    points = [screening(Truth("mtp", d, tpot=tpot), 4, d, tokens) for d, (tokens, tpot) in enumerate(
        [(1000.0, 10.0), (1200.0, 12.0), (1100.0, 13.0), (1500.0, 20.0), (900.0, 9.0), (1500.0, 25.0)])]
    points.append(screening(Truth("mtp", 9), 4, 9, 3000.0))  # no TPOT: not on the plane
    assert [(row.tokens_per_s, row.tpot_ms_p50) for row in pareto_front(points)] == [
        (900.0, 9.0), (1000.0, 10.0), (1200.0, 12.0), (1500.0, 20.0)]


def test_estimates_read_back_from_the_rows():
    (row,) = [r for r in confirmed([BASE, Truth("mtp", 1, 1100.0)], 1, seed=19) if r.method == "mtp"]
    assert isinstance(row.estimate("tokens_per_s"), Estimate) and row.estimate("tokens_per_s").n == 8
    assert row.estimate("acceptance_rate") is None
    assert screening(BASE, 1, 0).estimate("tokens_per_s") == Estimate.single(1000.0)


def test_a_tied_configuration_whose_speedup_does_not_clear_one_is_not_recommended():
    # draft@2 is measured in 3 rounds only with large noise: tied with the leader, but its own
    # interval reaches below 1.0x, so the simplest tied configuration that clears 1.0x wins.
    rows = confirmed([BASE, Truth("draft", 7, 1600.0), Truth("draft", 2, 1300.0)], 2, seed=0, noise=0.15, kept={2: 3})
    decision = decide_at(rows, 2)
    labels = by_label(rows)
    weak = labels["draft@2"]
    assert compare(weak, decision.leader).high >= 1  # tied with the leader ...
    assert weak.estimate("speedup").low <= 1  # ... but not clearly faster than no speculation
    assert config_label(decision.recommended) == "draft@7"


def test_a_configuration_5_percent_behind_is_not_tied_although_its_interval_reaches_one():
    """Two guided seeds recommended draft@4 over draft@7 on a 0.956 ratio whose interval reached 1;
    draft@4 was 8.6 % slower (docs/benchmarks.md). The baseline keeps the plain rule."""
    rows = confirmed([Truth("none", 0, 1440.0), Truth("draft", 7, 1500.0), Truth("draft", 4, 1430.0)], 8, seed=1,
                     rounds=5, noise=0.06)
    base, deep, shallow = rows
    for row in (base, shallow):  # precondition: five rounds cannot separate them from the leader
        ratio = compare(row, deep)
        assert ratio.low < 1 < ratio.high and ratio.value < 1 - PRACTICAL_MARGIN
    decision = decide_at(rows, 8)
    assert decision.leader is deep
    assert shallow not in decision.tied and base in decision.tied
