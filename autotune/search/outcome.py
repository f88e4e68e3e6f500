"""The outcome of a tuning run: progress while it runs, the result and its analysis at the end."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from autotune.analysis.decision import (
    BASELINE,
    ConcurrencyBest,
    MethodVerdict,
    ProfileChoice,
    baselines,
    choose_profile,
    deciding_rows,
    method_verdicts,
    pareto_front,
    per_concurrency,
)
from autotune.analysis.edges import Edge, row_edges, space_edges, study_edges
from autotune.analysis.prediction import prediction_error
from autotune.analysis.summary import summary_lines
from autotune.engines.base import MAX_DEPTH
from autotune.search.objective import Objective
from autotune.search.samplers import SAMPLERS, Sampler
from autotune.search.screening import LOADED_ATTR, THREADS_ATTR
from autotune.store.results import TrialRow


@dataclass(frozen=True)
class TuneProgress:
    """Sent to the progress callback. ``kind``: ``trial`` when a trial starts (``finished`` None) and
    when it ends; ``phase`` when the study enters a step that is not a trial (step timings, a
    confirmation concurrency, the time budget running out); ``note`` for what happens within one
    (a disturbed pass measured again)."""

    trials_done: int  # finished trials of the study (every worker's), this one included when finished
    trials_total: int
    current: str  # the trial's configuration label, e.g. "draft@3 c4" ("... (attempt 2, retrying trial 5)")
    finished: str | None = None  # complete | failed | infeasible, once the trial ended
    reason: str | None = None
    best: str | None = None  # best configuration so far, e.g. "mtp@2 c8 (812.3 tokens/s, 1.41x)"
    kind: str = "trial"
    tokens_per_s: float | None = None  # a finished trial's measured figure
    predicted_tokens_per_s: float | None = None  # what the model predicted for it before it ran
    builds: int | None = None  # engine builds (model loads) of this process's run so far


@dataclass(frozen=True)
class TrialCounts:
    """Measured trials by state (``total`` is what the budget counts), how many times the sampler
    repeated a finished configuration (answered from the earlier result, not measured), and how many
    of the measured trials were retries of failed ones."""

    complete: int = 0
    failed: int = 0
    infeasible: int = 0
    repeated: int = 0
    retried: int = 0

    @classmethod
    def of(cls, rows: list[TrialRow], repeated: int = 0) -> TrialCounts:
        screened = [row for row in rows if row.phase == "screening"]
        states = [row.state for row in screened]
        retried = sum(1 for row in screened if row.extra.get("retry_of") is not None)
        return cls(states.count("complete"), states.count("failed"), states.count("infeasible"), repeated, retried)

    @property
    def total(self) -> int:
        return self.complete + self.failed + self.infeasible


@dataclass(frozen=True)
class StudyAnalysis:
    """The study's answer computed from its stored trials (see :mod:`autotune.analysis.decision`)."""

    profile: ProfileChoice | None
    per_concurrency: list[ConcurrencyBest]
    verdict: list[MethodVerdict]
    pareto_front: list[TrialRow]
    summary: list[str]
    counts: TrialCounts
    model_loads: int  # engine builds / model loads of the study's trials and confirmations
    edges: list[Edge] = field(default_factory=list)

    @classmethod
    def of(
        cls, rows: list[TrialRow], objective: Objective, concurrencies: list[int], method_names: list[str], repeated: int = 0,
        max_depth: int | None = None,
    ) -> StudyAnalysis:
        """The analysis of ``rows``; with ``max_depth``, answers on the edge of the space are named too."""
        profile = choose_profile(rows, objective.slo)
        table = per_concurrency(rows, concurrencies, objective.slo)
        verdict = method_verdicts(rows, method_names)
        edges = [] if max_depth is None else study_edges(rows, max_depth, concurrencies, MAX_DEPTH, objective.slo)
        return cls(
            profile=profile,
            per_concurrency=table,
            verdict=verdict,
            pareto_front=pareto_front(deciding_rows(rows))[::-1] if objective.kind == "pareto" else [],
            summary=(summary_lines(profile, table, verdict, objective.slo) + [edge.message for edge in edges]
                     + failure_lines(rows, concurrencies)),
            counts=TrialCounts.of(rows, repeated),
            model_loads=sum(int(row.extra.get("model_loads", 0)) for row in rows),
            edges=edges,
        )

    @property
    def best_label(self) -> str | None:
        if self.profile is None:
            return None
        row = self.profile.row
        speedup = f", {row.speedup:.2f}x" if row.speedup else ""
        return f"{row.label} ({row.tokens_per_s:.1f} tokens/s{speedup}{'' if row.confirmed else ', one run'})"


def failure_lines(rows: list[TrialRow], concurrencies: list[int]) -> list[str]:
    """Sentences for what failures cost the answer: each concurrency left without a baseline (so
    without any speedup) because measuring it failed, and the retries of failed trials."""
    found = baselines(rows)
    lines = []
    for concurrency in concurrencies:
        failed = [row for row in rows if row.method == BASELINE and row.concurrency == concurrency and row.state == "failed"]
        if concurrency in found or not failed:
            continue
        last = failed[-1]
        times = sum(1 for row in failed if row.phase == last.phase)
        lines.append(f"No speedup at concurrency {concurrency}: its baseline (method none) failed "
                     f"{'once' if times == 1 else f'{times} times'} in {last.phase} (last: {last.reason}).")
    retries = [row for row in rows if row.phase == "screening" and row.extra.get("retry_of") is not None]
    if retries:
        recovered = sum(1 for row in retries if row.state == "complete")
        lines.append(f"Retried {len(retries)} failed trial(s); {recovered} completed on retry.")
    return lines


def build_line(rows: list[TrialRow], this_run: int | None = None) -> str:
    """What the study cost in engine builds (model loads on the embedded engine): its screening
    trials', its confirmations', and (``this_run``) this process's, step timings included."""
    by_phase = {phase: sum(int(row.extra.get("model_loads", 0)) for row in rows if row.phase == phase)
                for phase in ("screening", "confirmation")}
    run = "" if this_run is None else f"; {this_run} by this run, step timings included"
    return (f"Builds (engine builds or model loads): {by_phase['screening'] + by_phase['confirmation']} "
            f"({by_phase['screening']} in screening, {by_phase['confirmation']} in confirmation{run}).")


@dataclass(frozen=True)
class TrialListing:
    """A stored study's trials as ``autotune trials`` shows them, with its builds and the edges of
    its answer (:mod:`autotune.analysis.edges`)."""

    rows: list[TrialRow]
    edges: list[Edge]

    @classmethod
    def of(cls, rows: list[TrialRow], search_space: dict[str, Any], slo: Any) -> TrialListing:
        return cls(rows, space_edges(rows, search_space, MAX_DEPTH, slo))

    def lines(self) -> list[str]:
        """What goes under the table: the builds, then each edge."""
        return [build_line(self.rows)] + [edge.message for edge in self.edges]

    def row_dicts(self) -> list[dict[str, Any]]:
        """``autotune trials --json``: each row with ``builds`` (what the trial, or a confirmation
        concurrency's first row, built) and ``edges`` (the edge messages about its configuration)."""
        return [{**row.to_dict(), "builds": int(row.extra.get("model_loads", 0)), "edges": row_edges(self.edges, row)}
                for row in self.rows]


@dataclass(frozen=True)
class TuneResult:
    """The outcome of :func:`autotune.search.tune`.

    ``status``: complete (the study's budget is spent and every trial finished), running (budget
    left, e.g. after ``timeout_s``, or other workers still busy). ``worker_starts`` and
    ``model_loads_this_run`` count this process only; ``analysis.model_loads`` the whole study.
    ``notes``: what this run could not do, e.g. concurrency levels left unconfirmed when the time budget ran out.
    """

    study_name: str
    database: str
    status: str
    objective: str
    slo: dict[str, Any]
    n_trials: int
    hardware: str
    search_space: dict[str, Any]
    analysis: StudyAnalysis
    trials_this_run: int
    worker_starts: int
    model_loads_this_run: int
    elapsed_s: float
    rows: list[TrialRow] = field(default_factory=list)
    sampler: Sampler = SAMPLERS["model"]
    notes: list[str] = field(default_factory=list)
    # How the search ended, when it ended on its own: what the model-guided search ruled out and at
    # what confidence (:meth:`autotune.search.guide.RuledOut.sentence`).
    search_note: str = ""

    @property
    def profile(self) -> ProfileChoice | None:
        return self.analysis.profile

    @property
    def slo_met(self) -> bool | None:
        return None if self.profile is None else self.profile.slo_met

    def summary_lines(self) -> list[str]:
        """The analysis' summary, the performance model's record, what the study cost in trials and
        model loads, then the drafts the preflight left out and why, then this run's notes."""
        excluded = self.search_space.get("excluded_drafts") or {}
        return (self.analysis.summary + self.category_lines() + self.load_lines() + self.model_lines()
                + [f"Draft {label} left out by the preflight: {reason}" for label, reason in excluded.items()]
                + self.notes)

    def category_lines(self) -> list[str]:
        """Where the best configuration differs between request categories beyond the noise, or the
        recommended one's acceptance does (analysis/category_best.py); [] without categories."""
        from autotune.analysis.category_best import category_lines

        profile = self.profile
        return [] if profile is None else category_lines(self.rows, profile.row.concurrency, profile.row)

    def load_lines(self) -> list[str]:
        """One line when screening passes were measured under a load that persisted (search/screening.py)."""
        screened = [row for row in self.rows if row.phase == "screening" and row.state == "complete"]
        loaded = [row for row in screened if row.extra.get(LOADED_ATTR)]
        if not loaded:
            return []
        threads = loaded[-1].extra.get(THREADS_ATTR)
        on = "" if threads is None else f", its engine on the {threads} core(s) the load left"
        return [f"Other processes kept the machine busy through {len(loaded)} of {len(screened)} screening passes "
                f"(the last: {loaded[-1].extra[LOADED_ATTR]}): the study measured under that load{on}, so its "
                "absolute figures are the loaded machine's; speedups are paired against none under the same load."]

    def model_lines(self) -> list[str]:
        error, count = prediction_error(self.rows)
        counts = self.analysis.counts
        lines = [f"Measured {counts.total} screening trials ({self.sampler.name} sampler)"
                 + (self.search_note if self.status == "complete" else "") + ".",
                 build_line(self.rows, self.model_loads_this_run)]
        if error is not None:
            lines.append(f"Performance model: median |predicted / measured - 1| = {error:.1%} over {count} trials "
                         "predicted before they ran.")
        return lines

    def to_dict(self) -> dict[str, Any]:
        analysis = self.analysis
        return {
            "study_name": self.study_name,
            "database": self.database,
            "status": self.status,
            "objective": self.objective,
            "slo": self.slo,
            "n_trials": self.n_trials,
            "hardware": self.hardware,
            "search_space": self.search_space,
            "profile": analysis.profile.to_dict() if analysis.profile else None,
            "slo_met": self.slo_met,
            "per_concurrency": [row.to_dict() for row in analysis.per_concurrency],
            "verdict": [row.to_dict() for row in analysis.verdict],
            "pareto_front": [row.to_dict() for row in analysis.pareto_front],
            "summary": analysis.summary,
            "counts": {**asdict(analysis.counts), "total": analysis.counts.total},
            "model_loads": analysis.model_loads,
            "edges": [edge.to_dict() for edge in analysis.edges],
            "trials_this_run": self.trials_this_run,
            "worker_starts": self.worker_starts,
            "model_loads_this_run": self.model_loads_this_run,
            "elapsed_s": self.elapsed_s,
            "sampler": self.sampler.name,
            "notes": list(self.notes),
            "search_note": self.search_note,
            "prediction_error": dict(zip(("median_abs", "trials"), prediction_error(self.rows))),
            "trials": [row.to_dict() for row in self.rows],
        }
