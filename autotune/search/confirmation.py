"""The confirmation phase of a study: its finalists re-measured with the full protocol, and stored.

Input: the :class:`~autotune.search.state.Study` once every screening trial finished. Output: one
confirmation run in the measurement table (a row per measured configuration, the baseline
included, or a failed row for a concurrency whose worker failed), the study's status, the
deployment profile recomputed, and a note for each concurrency the time budget cut.

Which finalists and how they are measured: :mod:`autotune.search.confirm`. The claim (status
``confirming``) and the write both happen under the study lock, and the write checks again that
nobody stored a confirmation of the same trials meanwhile: two workers finishing together measure
at worst twice, but store once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autotune.analysis import decision
from autotune.analysis.offstate import OFF_STATE_KEY
from autotune.engines.base import EngineConfig
from autotune.engines.protocol import ProtocolOptions
from autotune.search import confirm, guide, profile
from autotune.search.space import Candidate
from autotune.search.state import Study
from autotune.store import results
from autotune.store.tables import StudyRecord


def confirm_study(study: Study, spent: bool) -> str | None:
    """Confirm the finalists unless the screening trials as they stand were confirmed already, or
    another worker is at it. Returns the status it leaves, None when it did not confirm. That
    status is worked out afresh at the end: the other workers that finished meanwhile left it to
    this one."""
    with study.lock(), study.database.session() as session:
        rows = results.study_rows(session, study.study_id)
        screened = len(decision.screening_rows(rows))
        if (not screened or _confirmed(rows, screened)
                or session.get(StudyRecord, study.study_id).status == "confirming"):  # another worker is at it
            return None
        results.set_study_status(session, study.study_id, "confirming")
    try:
        batches = _measure_finalists(study, rows)
        with study.lock(), study.database.session() as session:
            latest = results.study_rows(session, study.study_id)
            if not _confirmed(latest, screened):
                _record(study, session, latest, screened, batches)
    finally:
        status = study.status(spent)
        study.set_status(status)
    profile.store_profile(study)
    return status


def _measure_finalists(study: Study, rows: list[results.TrialRow]) -> list[confirm.ConfirmedConcurrency]:
    setup, options = study.setup, study.options
    guidance = study.guidance(rows)
    predicted = guide.point_predictions(setup.space, guidance.model, study.feasible)
    chosen = confirm.finalists(rows, setup.space.concurrencies, setup.objective.slo, predicted,
                               setup.off_floor, setup.zero_to_measure)
    how = confirm.ConfirmRun(
        study.engine_config, setup.workload, options.seed or 0, _confirmation_protocol(study),
        study.say, 1 + options.retries, study.deadline, lambda text: study.say(text, kind="note"),
    )
    study.worker.limit_threads(study.machine.threads)  # the cores a persisting load leaves (screening.py)
    batches = confirm.confirm(study.worker, chosen, how)
    unconfirmed = [batch.concurrency for batch in batches if batch.out_of_time]
    if unconfirmed:
        study.note(_out_of_time_note(options.timeout_s, unconfirmed, len(unconfirmed) == len(batches)))
    return batches


def _confirmation_protocol(study: Study) -> ProtocolOptions:
    """The confirmation's protocol: ``--confirm-seconds`` per concurrency, as much again for a leader
    whose speedup over the baseline is still undecided at the cap (engines/protocol.py, 4: three
    rounds of a noisy pair would otherwise deploy none against a 1.14x leader), on the machine as
    screening left it (screening.py). Under a load that persists, disturbed rounds are kept at once;
    under any load the engine computes on fewer cores, each round takes about ``slowdown`` times as
    long (1.7-1.8x measured on one core of two under two busy loops, docs/benchmarks.md), so both
    times are stretched by it and the loaded confirmation gets as many rounds as an idle one, not
    fewer (at c8 three rounds left intervals of ±49 % there)."""
    protocol, machine = study.options.protocol, study.machine
    seconds = protocol.max_seconds * machine.slowdown
    if machine.slowdown > 1:
        study.say(f"confirming on the machine's load: up to {seconds:.0f} s per concurrency ({machine.slowdown:.1f}x "
                  f"the {protocol.max_seconds:.0f} s of an idle machine)", kind="note")
    return replace(protocol, measure_under_load=machine.persists, max_seconds=seconds, unresolved_seconds=seconds)


def _record(study: Study, session: Any, rows: list[results.TrialRow], screened: int,
            batches: list[confirm.ConfirmedConcurrency]) -> None:
    """Store one confirmation run of the study's ``screened`` screening trials (module doc), after
    the stored ``rows``."""
    runs = [row.extra.get("confirmation") or {} for row in rows if row.phase == "confirmation"]
    run = {"run": max((r.get("run", 0) for r in runs), default=0) + 1, "screened": screened}
    unconfirmed = [batch.concurrency for batch in batches if batch.out_of_time]
    if unconfirmed:
        run["unconfirmed"] = unconfirmed  # out of time: the run is partial and the next run confirms again
    number = max((row.trial_number for row in rows if row.phase == "confirmation"), default=-1) + 1
    for batch in batches:
        if not batch.out_of_time:
            for entry in _entries(study, batch, {"confirmation": {**run, "concurrency": batch.concurrency}}, number):
                results.record_trial(session, study.study_id, entry)
                number += 1


def _entries(study: Study, batch: confirm.ConfirmedConcurrency, extra: dict[str, Any],
             first: int) -> list[results.TrialEntry]:
    """The rows of one concurrency's confirmation, numbered from ``first``."""
    loads = {"model_loads": batch.loads}  # on the concurrency's first row: what its protocol built
    if batch.result is None:
        return [results.TrialEntry(trial_number=first, method="none", depth=0, concurrency=batch.concurrency,
                                   state="failed", reason=batch.failure, extra={**extra, **loads},
                                   phase="confirmation")]
    # Every measured configuration is a candidate or the baseline; anything else is a bug,
    # not a baseline (a lost off_state flag would store a K = 0 point as one).
    by_config = {study.engine_config(c): c for c in batch.candidates}
    by_config.setdefault(EngineConfig("none"), Candidate("none", 0, batch.concurrency))
    extra = {**extra, "faults": batch.result.faults, "rounds_discarded": batch.result.rounds_discarded}
    if batch.implausible:
        extra["implausible"] = batch.implausible
    entries = []
    for measured in batch.result.measurements:
        candidate = by_config[measured.config]
        fields = confirm.row_fields(measured)
        if measured.config.off_state:  # K = 0 inside the server: prices the off state, never decides
            fields["extra"] = {**fields["extra"], OFF_STATE_KEY: True}
        entries.append(results.TrialEntry(
            trial_number=first + len(entries), method=candidate.method, depth=candidate.depth,
            concurrency=batch.concurrency, state="complete", draft=candidate.draft,
            draft_model_id=study.draft_ids.get(candidate.draft), phase="confirmation",
            measurement=fields["measurement"], repetitions=fields["repetitions"], intervals=fields["intervals"],
            speedup=fields["speedup"], extra={**extra, **fields["extra"], **loads},
        ))
        loads = {}
    return entries


def _confirmed(rows: list[results.TrialRow], screened: int) -> bool:
    """True when a complete confirmation run of these ``screened`` screening trials is stored (one
    the time budget cut short does not count: the next run confirms again)."""
    return any((run := row.extra.get("confirmation") or {}).get("screened") == screened and not run.get("unconfirmed")
               for row in rows if row.phase == "confirmation")


def _out_of_time_note(timeout_s: float | None, unconfirmed: list[int], nothing: bool) -> str:
    """The one line saying what the time budget cut from the confirmation."""
    sizes = ", ".join(map(str, unconfirmed))
    left = ("no concurrency was confirmed (the answer rests on the screening passes, or on an earlier confirmation)"
            if nothing else
            f"concurrency(s) {sizes} not confirmed and left out of the answer")
    return (f"The time budget (--timeout {timeout_s:g} s) ran out during the confirmation: {left}; "
            "re-run with the same --study and a longer --timeout to confirm.")
