"""A study's performance model: its inputs taken from, and kept in, the database.

* **Cost profile** (per hardware, engine, target and drafts): timed once, before the first trial,
  in a fresh worker (:meth:`EngineWorker.time_steps`, forced acceptance) and stored in
  ``autotune_cost_profiles``; a later study with the same key reuses it. The timed depths are 1, 2,
  4, ... and the maximum (the cost profile interpolates between them); concurrency 1 is always timed,
  since a workload's tail runs at fewer rows than the concurrency.
* **Acceptance profiles** (per target, proposer and workload): pooled from every measured
  speculative trial, across studies, in ``autotune_acceptance_profiles``.
* **The model** (:class:`~autotune.perfmodel.model.PerformanceModel`) is rebuilt from these and
  the study's rows whenever it is asked: the corrections follow the measurements as they arrive,
  and every worker of a distributed study sees the same model.

When the timing fails (an engine release that cannot force acceptance, a crash), the model-guided
search stops the study with that one line rather than search without its model: ``--sampler tpe``
is the user's choice to make. Other samplers go on, their trials stored without a prediction.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

from autotune.engines import noise
from autotune.engines.base import EngineConfig
from autotune.engines.worker import EngineWorker, WorkerFailure
from autotune.errors import EngineError
from autotune.perfmodel.acceptance import AcceptanceCurve, proposer_key, row_counts
from autotune.perfmodel.cost import MIN_ROUNDS, CostPoint, CostProfile
from autotune.perfmodel.model import ConfigKey, PerformanceModel
from autotune.search.screening import MachineLoad
from autotune.search.setup import StudySetup
from autotune.search.space import BASELINE_METHOD, Candidate
from autotune.store import Database, performance
from autotune.store.tables import StudyRecord
from autotune.store.results import TrialRow
from autotune.workload import Workload, first_cycle

# Three rounds of three steps: the cost profile's median and slow-round cut need three rounds
# (perfmodel/cost.py), and each round also pays a prefill worth ~3-9 steps, so the steps per
# round are kept few (docs/statistics.md).
TIMING_STEPS = 3
TIMING_ROUNDS = MIN_ROUNDS
# A load already there before the timing: read over half a second with nothing measured (the
# kernel's counters tick at 100 Hz, so 50 ticks a core: a busy loop reads as 1.0 +- 0.05 cores).
START_READING_S = 0.5


def timed_depths(max_depth: int) -> list[int]:
    """1, 2, 4, ... up to and including ``max_depth``."""
    depths, depth = [], 1
    while depth < max_depth:
        depths.append(depth)
        depth *= 2
    return depths + [max_depth]


def prompt_tokens(workload: Workload) -> list[int]:
    """Each request's prompt length in the model's tokens, as the performance model replays it: BOS
    and one token per UTF-8 byte (the built-in byte tokenizer)."""
    return [len(request.prompt.encode("utf-8")) + 1 for request in workload.requests]


class StudyModeling:
    """The performance model of one study (see the module doc)."""

    def __init__(self, setup: StudySetup, database: Database, study_id: int) -> None:
        self.setup = setup
        self.database = database
        self.study_id = study_id
        self.cost: CostProfile | None = None
        with database.session() as session:
            study = session.get(StudyRecord, study_id)
            self.hardware_id, self.target_id = study.hardware_id, study.target_model_id
        self.prompts = prompt_tokens(setup.workload)

    # -- cost ---------------------------------------------------------------------------------------

    def timing_configs(self) -> list[tuple[EngineConfig, ConfigKey]]:
        """What the timing runs load: the baseline, and every proposer at the timed depths its
        engine runs."""
        space = self.setup.space
        configs: list[tuple[EngineConfig, ConfigKey]] = [(EngineConfig(BASELINE_METHOD), (BASELINE_METHOD, None))]
        for method, draft in space.proposers():
            for depth in timed_depths(space.max_depth):
                if self.setup.depth_refusal(method, depth):
                    continue  # the engine would refuse to build it (and the study never runs it)
                configs.append((Candidate(method, depth, 1, draft).engine_config(self.setup.draft_engine_args),
                                (method, draft)))
        return configs

    def timing_concurrencies(self) -> list[int]:
        return sorted({1, *self.setup.space.concurrencies})

    def cost_key(self, threads: int | None = None) -> str:
        """The cost profile's key; ``threads``: timed on that many threads under a load (screening.py)."""
        record = {
            "target": self.setup.target.fingerprint,
            "drafts": {label: draft.fingerprint for label, draft in sorted(self.setup.drafts.items())},
            "methods": list(self.setup.space.methods), "depths": timed_depths(self.setup.space.max_depth),
            "batch_sizes": self.timing_concurrencies(), "workload": self.setup.workload.sha256,
            "steps": TIMING_STEPS, "rounds": TIMING_ROUNDS, "device": self.setup.hardware.device_type,
        }
        # "batch_sizes": the key the digest had before issue 38 named the axis concurrency; kept, so
        # that cost profiles stored before are found under the same key and not timed again.
        if threads is not None:
            record["threads"] = threads
        return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:32]

    def prepare(self, worker: EngineWorker, machine: MachineLoad, progress: Any = lambda _text: None) -> None:
        """The cost profile: the stored one for this key, or timed now and stored. A load already
        there when it must be timed (read here over ``START_READING_S``, before any engine starts) has it timed on the
        cores the load leaves (``machine``, :meth:`MachineLoad.at_start`), under a key of its own. The
        caller holds the study lock, so concurrent workers time once. A failed timing raises
        EngineError for the model-guided search (module doc) and leaves no model for the other samplers."""
        if self._stored(self.cost_key()):
            return
        if machine.can_limit:
            machine.at_start(noise.while_waiting(START_READING_S), progress)
            worker.limit_threads(machine.threads)
            if machine.threads is not None and self._stored(self.cost_key(machine.threads)):
                return
        profile_key = performance.CostProfileKey(self.hardware_id, self.setup.engine, self.target_id,
                                                 self.cost_key(machine.threads))
        configs = self.timing_configs()
        progress(f"timing step costs: {len(configs)} configurations x {len(self.timing_concurrencies())} concurrency levels")
        started = time.monotonic()
        try:
            points = worker.time_steps([config for config, _ in configs], self.setup.workload, self.timing_concurrencies(),
                                       steps=TIMING_STEPS, rounds=TIMING_ROUNDS)
        except WorkerFailure as failure:
            if self.setup.sampler.guided:
                raise EngineError(f"the model-guided search needs step-cost timings, and timing failed ({failure.reason}); "
                                  "pass --sampler tpe to tune without them") from failure
            progress(f"no step-cost timings ({failure.kind}: {failure.reason}): trials are stored without predictions")
            return
        label_of = {config: key for config, key in configs}
        labelled = []
        for point in points:
            config = EngineConfig(point["method"], point["depth"], point["draft"] if point["method"] == "draft" else None)
            method, draft = label_of.get(config, (point["method"], None))
            labelled.append({**point, "draft": draft})
        self.cost = CostProfile([CostPoint.from_dict(p) for p in labelled], "timed")
        with self.database.session() as session:
            performance.save_cost_profile(
                session, profile_key, source="timed", points=labelled, duration_s=time.monotonic() - started,
                settings={"steps": TIMING_STEPS, "rounds": TIMING_ROUNDS, "depths": timed_depths(self.setup.space.max_depth),
                          "concurrencies": self.timing_concurrencies(), "forced_acceptance": "all drafts",
                          "dropped_rounds": self.cost.dropped_rounds, "spread": self.cost.spread,
                          "threads": machine.threads},
            )

    def _stored(self, key: str) -> bool:
        """Take the cost profile stored under ``key``, if any."""
        with self.database.session() as session:
            stored = performance.find_cost_profile(
                session, performance.CostProfileKey(self.hardware_id, self.setup.engine, self.target_id, key))
            if stored is not None:
                self.cost = CostProfile([CostPoint.from_dict(p) for p in stored.points], stored.source)
        return stored is not None

    # -- acceptance -----------------------------------------------------------------------------------

    def _proposer(self, method: str, draft: str | None) -> str:
        return proposer_key(method, self.setup.drafts[draft].fingerprint if method == "draft" else None)

    def curves(self) -> dict[ConfigKey, AcceptanceCurve]:
        """The stored acceptance curves of this study's proposers on its workload."""
        wanted = {self._proposer(method, draft): (method, draft) for method, draft in self.setup.space.proposers()}
        with self.database.session() as session:
            records = performance.acceptance_profiles(session, target_model_id=self.target_id,
                                                      workload_fingerprint=self.setup.workload.sha256)
            return {wanted[r.proposer]: AcceptanceCurve.from_positions(r.proposer, r.positions, r.sources)
                    for r in records if r.proposer in wanted}

    def record_acceptance(self, row: TrialRow, draft_model_id: int | None) -> None:
        """Pool a complete speculative trial into its proposer's stored curve."""
        if row.method == BASELINE_METHOD or row.state != "complete":
            return
        counts = row_counts(row)
        if not counts or counts[0].steps == 0:
            return
        proposer = self._proposer(row.method, row.draft)
        key = performance.AcceptanceKey(self.target_id, proposer, self.setup.workload.sha256)
        with self.database.session() as session:
            stored = performance.find_acceptance(session, key)
            curve = (AcceptanceCurve.from_positions(proposer, stored.positions, stored.sources) if stored
                     else AcceptanceCurve.empty(proposer)).pooled(counts, row.measurement_id)
            performance.save_acceptance(
                session, key, draft_model_id=draft_model_id, workload_name=self.setup.workload.label,
                max_depth=curve.max_depth, positions=[p.to_dict() for p in curve.positions], sources=list(curve.sources),
            )

    # -- the model ------------------------------------------------------------------------------------

    def model(self, rows: Sequence[TrialRow]) -> PerformanceModel | None:
        """The model as of ``rows`` (the study's stored trials), None without a cost profile."""
        if self.cost is None:
            return None
        model = PerformanceModel(self.cost, self.curves(), self.prompts, self._lengths(rows))
        model.calibrate((row.method, row.draft, row.depth, row.concurrency, row.tokens_per_s) for row in rows
                        if row.state == "complete" and row.phase == "screening")
        return model

    def _lengths(self, rows: Sequence[TrialRow]) -> list[int]:
        """Output tokens per request: a measured run's (greedy output is the same for every lossless
        configuration; a run's stream holds the workload's requests in whole cycles, so its first
        cycle is the workload), else the requests' max_tokens."""
        for row in reversed(rows):
            tokens = first_cycle(((row.extra or {}).get("measurement") or {}).get("request_tokens"), len(self.prompts))
            if row.state == "complete" and tokens:
                return tokens
        return [request.max_tokens for request in self.setup.workload.requests]
