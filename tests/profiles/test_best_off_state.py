"""``profiles best`` never answers with a K = 0 row (a speculative server's off state, drafter loaded
and nothing drafted: stored as the method at depth 0 with ``extra["off_state"]``): it prices the off
state where none won, it is not a configuration to deploy. On SQLite and PostgreSQL (whose query
differs: LATERAL)."""

from __future__ import annotations

import profile_factory as factory
from autotune.analysis.offstate import OFF_STATE_KEY
from autotune.profiles import query
from autotune.profiles.query import best_profile
from autotune.store import open_database
from autotune.store import results


def test_an_off_state_row_is_never_the_best(db_url: str, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(query, "current_fingerprint", lambda: factory.H100[1])
    with open_database(db_url) as database, database.session() as session:
        hardware, target = factory.hardware(session, *factory.H100), factory.model(session, "t", "t" * 16)
        draft = factory.model(session, "d", "d" * 16, role="draft")
        study = factory.study(session, "with-off-state", hardware, target, draft, methods=("none", "draft"),
                              concurrencies=(1, 2)).study_id
        fastest = max(row.tokens_per_s for row in results.study_rows(session, study) if row.tokens_per_s)
        for phase in ("screening", "confirmation"):  # faster than anything, in both phases best reads
            results.record_trial(
                session, study, results.TrialEntry(
                    trial_number=900 + len(phase), method="draft", depth=0, concurrency=1,
                    state="complete", draft="d", draft_model_id=draft.id, phase=phase,
                    extra={OFF_STATE_KEY: True, **({"confirmation": {"run": 1}} if phase == "confirmation" else {})},
                    measurement={**factory._measurement("draft", 1, 1, 1.0), "tokens_per_s": fastest * 10,
                                 "tpot_ms_p50": 0.1}))
    for slo in (None, 1000.0):
        point = best_profile(db_url, "t", concurrency=1, slo_tpot_ms=slo).operating_point
        assert point is not None and not (point.method != "none" and point.depth == 0)
        assert not point.extra.get(OFF_STATE_KEY)
