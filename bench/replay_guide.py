"""Replay the model-guided search on a stored grid study: which points it would measure, in seconds.

The guide decides from the study's rows alone (:mod:`autotune.search.guide`), so a grid study that
screened every point once can stand in for the engine: each pick "measures" the grid's pass of that
point (its tokens/s, latencies and acceptance counts), the acceptance curves are pooled from the
picks only (as a fresh study pools its own trials), and the step costs are the grid study's timed
cost profile. A point past --max-depth has no grid pass; it is taken at its prediction (the edge
walk then goes on while the prediction says so).

What it cannot show: the noise of a fresh study's passes (each point has the grid's one pass, so
the replay is one realisation, not five seeds) and the confirmation. It shows how many points a
rule of the guide measures on a real grid, and which; the seeds of ``bench_model_guided.py``
remain the measurement.

    python bench/replay_guide.py sqlite:////tmp/bench-guided-xxxx/bench.db [--study grid] [--no-explore-beyond]
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from autotune.perfmodel.acceptance import AcceptanceCurve, proposer_key, row_counts
from autotune.perfmodel.cost import CostPoint, CostProfile
from autotune.perfmodel.model import PerformanceModel, config_key
from autotune.search import guide
from autotune.search.beyond import extended_model
from autotune.search.modeling import prompt_tokens
from autotune.search.objective import Slo
from autotune.search.space import BASELINE_METHOD, BEYOND_DEPTHS, Candidate, SearchSpace
from autotune.store import open_database, performance, results
from autotune.store.tables import StudyRecord
from autotune.workload import load_workload


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db_url", help="the database of a grid study (bench_model_guided.py prints it)")
    parser.add_argument("--study", default="grid", help="the grid study's name (default: grid)")
    parser.add_argument("--workload", help="the grid's JSONL workload (default: the built-in one)")
    parser.add_argument("--requests", type=int, help="the grid's --requests: the first N requests of the workload")
    parser.add_argument("--no-explore-beyond", dest="explore_beyond", action="store_false")
    return parser.parse_args()


def load(db_url: str, name: str) -> tuple[SearchSpace, list[Any], CostProfile]:
    """The grid's space, its complete screening rows and its cost profile."""
    with open_database(db_url) as database, database.session() as session:
        study = results.find_study(session, name)
        if study is None:
            raise SystemExit(f"no study named {name!r} in {db_url}")
        record = session.get(StudyRecord, study.id)
        stored = record.search_space
        space = SearchSpace(tuple(stored["methods"]), tuple(d["label"] for d in stored["drafts"]), stored["max_depth"],
                            tuple(stored["concurrencies"]))
        rows = [r for r in results.study_rows(session, study.id) if r.phase == "screening" and r.complete]
        profiles = performance.cost_profiles(session, target_model_id=record.target_model_id)
        if not profiles:
            raise SystemExit(f"study {name!r} has no timed step costs to replay with (a grid run with --sampler grid times them)")
        cost = CostProfile([CostPoint.from_dict(p) for p in profiles[0].points], profiles[0].source)
    return space, rows, cost


def replay(space: SearchSpace, grid: list[Any], cost: CostProfile, prompts: list[int],
           explore_beyond: bool = True) -> list[tuple[Candidate, float, float | None, str]]:
    """The guide's picks in order: (point, tokens/s taken, prediction, reason)."""
    by_point = {Candidate(r.method, r.depth, r.concurrency, r.draft): r for r in grid}
    lengths = list(((grid[0].extra or {}).get("measurement") or {}).get("request_tokens") or [])
    measured: list[Any] = []
    taken: list[dict[str, Any]] = []
    picks = []
    last = None
    while True:
        model = build_model(cost, measured, prompts, lengths)
        pick = guide.next_pick(space, guide.Guidance(model, measured), taken,
                               lambda c: c in by_point or c.depth > space.max_depth, Slo(), last,
                               explore_beyond=explore_beyond)
        if pick is None:
            return picks
        candidate = pick.candidate
        taken.append(SearchSpace.params(candidate))
        source = by_point.get(candidate)
        if source is None:  # past --max-depth: taken at the extended model's prediction
            wide = extended_model(model, space.max_depth + BEYOND_DEPTHS)
            value = wide.predict(candidate.method, candidate.draft, candidate.depth, candidate.concurrency).tokens_per_s
            source = SimpleNamespace(**{**vars_of(by_point[replace(candidate, depth=candidate.depth - 1)]),
                                        "depth": candidate.depth, "tokens_per_s": value})
            by_point[candidate] = source  # the next step deeper continues from this one
        stored = pick.prediction.to_dict() if pick.prediction is not None else None
        measured.append(SimpleNamespace(**{**vars_of(source), "prediction": stored}))
        picks.append((candidate, source.tokens_per_s, pick.prediction.tokens_per_s if pick.prediction else None,
                      pick.reason))
        last = candidate


def vars_of(row: Any) -> dict[str, Any]:
    return {name: getattr(row, name) for name in ("method", "draft", "depth", "concurrency", "state", "phase",
                                                 "tokens_per_s", "acceptance_by_position", "extra", "tpot_ms_p90",
                                                 "measurement_id")}


def build_model(cost: CostProfile, measured: list[Any], prompts: list[int], lengths: list[int]) -> PerformanceModel:
    """The study's model as of ``measured``: curves pooled from the measured speculative points only."""
    curves: dict[Any, AcceptanceCurve] = {}
    for row in measured:
        if row.method == BASELINE_METHOD:
            continue
        key = config_key(row.method, row.draft)
        counts = row_counts(row)
        if counts and counts[0].steps:
            curve = curves.get(key) or AcceptanceCurve.empty(proposer_key(row.method, row.draft))
            curves[key] = curve.pooled(counts, row.measurement_id)
    model = PerformanceModel(cost, curves, prompts, lengths)
    model.calibrate((r.method, r.draft, r.depth, r.concurrency, r.tokens_per_s) for r in measured)
    return model


def main() -> None:
    args = parse_args()
    space, grid, cost = load(args.db_url, args.study)
    workload = load_workload(args.workload)
    if args.requests:
        workload = workload.head(args.requests)
    picks = replay(space, grid, cost, prompt_tokens(workload), args.explore_beyond)
    for i, (candidate, value, predicted, reason) in enumerate(picks, 1):
        error = f"{predicted / value - 1:+.1%}" if predicted else "-"
        print(f"{i:3} {candidate.label:22} {value:8.1f} tok/s  predicted {predicted or math.nan:8.1f} ({error})  {reason}")
    print(f"{len(picks)} configurations measured (the grid: {len(grid)})")


if __name__ == "__main__":
    main()
