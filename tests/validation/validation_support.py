"""What the validation tests share: a stored none-vs-draft profile and a validation result with known figures."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import profile_factory as factory

from autotune.analysis.intervals import Estimate
from autotune.store import open_database
from autotune.validation.results import PointResult, ServerResult, ValidationResult


def a_result(profile_id: int, minute: int = 0) -> ValidationResult:
    point = PointResult(1, 3, {"output_tokens_per_s": Estimate(95.0, 90.0, 100.0, 3),
                               "tpot_ms_p50": Estimate(9.5, 9.0, 10.0, 3)},
                        [{"output_tokens_per_s": 95.0, "acceptance_rate": 0.8}])
    servers = [ServerResult("schedule", "mtp schedule c1:3, c2:1", 30.5, [point]),
               ServerResult("none", "none", 20.0, [PointResult(1, 3, {"output_tokens_per_s": Estimate(80.0)})])]
    return ValidationResult(profile_id, "vllm", "0.32.0", [1], 3, "builtin@v1", {"tpot_ms": 8.0}, servers,
                            {1: 100.0}, {1: Estimate(-0.05, -0.10, 0.0, 3)},
                            dt.datetime(2026, 12, 5, 4, minute, tzinfo=dt.timezone.utc))


def stored_profile(url: str, target: Path, draft: Path, study: str = "validate") -> int:
    """A finished none-vs-draft study at concurrency levels 1 and 2 naming the model folders ``target`` and
    ``draft``, and its profile's id (depth 2 best at concurrency 1, 1 at 2: a schedule)."""
    with open_database(url) as database, database.session() as session:
        hardware = factory.hardware(session, *factory.CPU)
        target_row = factory.model(session, target.name, "t" * 16, source=str(target))
        draft_row = factory.model(session, draft.name, "d" * 16, role="draft", source=str(draft))
        return factory.study(session, study, hardware, target_row, draft_row, methods=("none", "draft"),
                             concurrencies=(1, 2)).id
