"""A running job's ETA as of the moment it is read, so that it moves while a trial runs instead of
standing still between the tune's events.

The worker stores facts in the job's progress (:mod:`.progress`): the trials done of total, when
the trial under way started (``trial_started_at``, UTC) and the mean duration of the trials this
attempt measured (``trial_mean_s``). Whoever reads the job computes from them:

- once a trial of this attempt has finished: the mean times the trials left, less what the trial
  under way has already run (never below zero for it);
- during the attempt's first trial: what the trials left would take if each took as long as this
  one has so far. It grows while the trial runs, so it is marked ``eta_at_least``.

Before the first trial starts (builds, step timings) and when no trial is left, there is none. An
upper bound for the model-guided search, which stops once nothing it has not measured can win.
The worker's clock and the reader's are assumed to agree (both keep UTC).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

NO_ETA = {"eta_s": None, "eta_at_least": False}


def live_eta(progress: Mapping[str, Any], now: dt.datetime) -> dict[str, Any]:
    """``{"eta_s": seconds or None, "eta_at_least": bool}`` for a running job's ``progress`` at ``now``."""
    total, done = progress.get("trials_total"), progress.get("trials_done") or 0
    left = max(0, total - done) if total is not None else 0
    started = progress.get("trial_started_at")
    running_s = max(0.0, (now - dt.datetime.fromisoformat(started)).total_seconds()) if started else None
    mean = progress.get("trial_mean_s")
    if not left or (mean is None and running_s is None):
        return dict(NO_ETA)
    if mean is None:  # the first trial of this attempt is under way
        return {"eta_s": running_s * left - running_s, "eta_at_least": True}
    return {"eta_s": mean * left - min(running_s or 0.0, mean), "eta_at_least": False}
