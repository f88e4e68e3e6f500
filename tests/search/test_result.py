"""Choosing the profile, the per-batch-size table and the method verdict from stored trial rows."""

from __future__ import annotations

from autotune.search.objective import Objective, Slo
from autotune.search.report import StudyAnalysis
from autotune.search.result import choose_profile, method_verdicts, pareto_front, per_batch_size
from autotune.store.results import TrialRow

MIB = 1 << 20


def row(number, method, depth, batch, tps, tpot=10.0, state="complete", draft=None, memory=100 * MIB, acceptance=None):
    if state != "complete":
        return TrialRow(number, method, draft, depth, batch, state, "why not")
    return TrialRow(
        number, method, draft, depth, batch, state, None, tokens_per_s=tps, tpot_ms_p50=tpot, tpot_ms_p90=tpot * 1.2,
        acceptance_rate=acceptance, peak_memory_bytes=memory, extra={"model_loads": 1},
    )


# Speculation wins at batch 1 (draft), MTP at batch 2, nothing at batch 4.
ROWS = [
    row(0, "none", 0, 1, 100.0, tpot=10.0),
    row(1, "none", 0, 2, 180.0, tpot=11.0),
    row(2, "none", 0, 4, 300.0, tpot=13.0),
    row(3, "draft", 3, 1, 160.0, tpot=6.0, draft="builtin", memory=130 * MIB, acceptance=0.7),
    row(4, "mtp", 2, 1, 150.0, tpot=6.5, memory=110 * MIB, acceptance=0.8),
    row(5, "mtp", 2, 2, 230.0, tpot=8.5, memory=110 * MIB, acceptance=0.8),
    row(6, "draft", 2, 4, 270.0, tpot=14.0, draft="builtin", memory=140 * MIB, acceptance=0.6),
    row(7, "ngram", 4, 4, 0.0, state="failed"),
    row(8, "mtp", 8, 4, 0.0, state="infeasible"),
]


def test_throughput_profile_is_the_fastest_trial() -> None:
    choice = choose_profile(ROWS, Objective("throughput"))
    assert choice.row.trial_number == 2 and choice.slo_met and choice.violation == 0


def test_slo_excludes_trials_that_miss_it() -> None:
    choice = choose_profile(ROWS, Objective("throughput", Slo(tpot_ms=11.0, percentile=90)))
    # tpot p90 = 1.2 x tpot: only rows with tpot <= 9.17 qualify; the fastest of them is mtp@2 b2.
    assert choice.row.trial_number == 5 and choice.slo_met


def test_an_unmet_slo_reports_the_closest_configuration() -> None:
    choice = choose_profile(ROWS, Objective("throughput", Slo(tpot_ms=6.0, percentile=90)))
    assert not choice.slo_met
    assert choice.row.trial_number == 3  # tpot p90 7.2 ms: the smallest excess (20 %)
    assert abs(choice.violation - 0.2) < 1e-9
    analysis = StudyAnalysis.of(ROWS, Objective("throughput", Slo(tpot_ms=6.0, percentile=90)), [1, 2, 4], ["none"])
    assert analysis.summary[0].startswith("No configuration meets tpot_ms_p90 <= 6; the closest is draft@3 b1")


def test_no_complete_trial_means_no_profile() -> None:
    assert choose_profile(ROWS[7:], Objective()) is None


def test_per_batch_size_table_has_the_best_with_its_speedup() -> None:
    table = {entry.batch_size: entry for entry in per_batch_size(ROWS, [1, 2, 4, 8], Slo())}
    assert (table[1].label, round(table[1].speedup, 3)) == ("draft@3", 1.6)
    assert (table[2].label, round(table[2].speedup, 3)) == ("mtp@2", round(230 / 180, 3))
    assert (table[4].label, table[4].speedup, table[4].trials) == ("none", 1.0, 4)
    assert table[8].label is None and table[8].trials == 0


def test_verdict_compares_methods_across_batch_sizes() -> None:
    verdicts = {v.name: v for v in method_verdicts(ROWS, ["none", "mtp", "draft", "ngram"])}
    mtp, draft, ngram = verdicts["mtp"], verdicts["draft"], verdicts["ngram"]
    assert (mtp.best_label, round(mtp.speedup, 2), mtp.acceptance_rate) == ("mtp@2 b1", 1.5, 0.8)
    assert mtp.memory_overhead_bytes == 10 * MIB
    assert [entry["batch_size"] for entry in mtp.by_batch_size] == [1, 2]
    assert mtp.wins_at == [2]
    assert (draft.best_label, draft.wins_at, draft.memory_overhead_bytes) == ("draft@3 b1", [1], 30 * MIB)
    assert verdicts["none"].wins_at == [4]
    assert ngram.speedup is None and ngram.trials == 1


def test_pareto_front_keeps_the_non_dominated_trials() -> None:
    front = [r.trial_number for r in pareto_front(ROWS)]
    # (tokens/s, tpot): 300/13, 230/8.5, 160/6 are on the front; 150/6.5 is dominated by 160/6.
    assert front == [2, 5, 3]


def test_summary_answers_which_method_where() -> None:
    analysis = StudyAnalysis.of(ROWS, Objective(), [1, 2, 4], ["none", "mtp", "draft", "ngram"])
    assert analysis.summary[0] == "Best configuration: none b4 (300.0 tokens/s)."
    assert any(line.startswith("mtp: best 1.50x (mtp@2 b1, acceptance 80%, +10.0 MiB)") for line in analysis.summary)
    assert analysis.summary[-1] == "Fastest by batch size: b1 draft@3 1.60x; b2 mtp@2 1.28x; b4 none."
    assert (analysis.counts.complete, analysis.counts.failed, analysis.counts.infeasible) == (7, 1, 1)
    assert (analysis.counts.repeated, analysis.counts.total) == (0, 9)
    assert analysis.model_loads == 7
