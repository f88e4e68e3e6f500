"""The Optuna study as the ledger of a study's trials, reached through Optuna's public API only.

Inputs: the Optuna study and the storage it was opened on (:func:`autotune.search.study.open_study`).
Outputs: the storage's id of a trial (for heartbeats, system attributes and state writes, which
Optuna's public API takes by id), the trials as they stand, and a running trial's heartbeat. The
trials, their states and user attributes stay Optuna's, so resume, distributed workers and
optuna-dashboard read them as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import optuna
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial

from autotune.periodic import repeating


@dataclass(frozen=True)
class Ledger:
    """An Optuna study with its storage and the storage's id of the study."""

    study: optuna.Study
    storage: RDBStorage
    study_id: int

    @classmethod
    def of(cls, study: optuna.Study, storage: RDBStorage) -> Ledger:
        return cls(study, storage, storage.get_study_id_from_name(study.study_name))

    def trial_id(self, number: int) -> int:
        """The storage's id of trial ``number`` of the study."""
        return self.storage.get_trial_id_from_study_id_trial_number(self.study_id, number)

    def trials(self) -> list[FrozenTrial]:
        """Every trial of the study as it stands (not copied: read, never change them)."""
        return self.study.get_trials(deepcopy=False)

    @contextmanager
    def heartbeat(self, number: int) -> Iterator[None]:
        """Record trial ``number``'s heartbeat every interval while the block runs (Study.optimize
        does the same in a thread; with ask/tell it is ours to do)."""
        interval = self.storage.get_heartbeat_interval()
        if interval is None:
            yield
            return
        trial_id = self.trial_id(number)

        def beat() -> None:
            try:
                self.storage.record_heartbeat(trial_id)
            except Exception:  # noqa: BLE001 - a missed beat is retried; the trial must go on
                pass

        with repeating(beat, interval, name="autotune-heartbeat", at_start=True):
            yield
