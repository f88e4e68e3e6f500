"""Screening passes (one measurement per Optuna trial) with the disturbance check of the protocol.

A screening pass decides what the model-guided search measures next, what it rules out and which
configurations reach the confirmation, so a pass slowed by other processes would decide on the
machine's load instead of the configuration (issue 21: under a load average of 5.8 on 2 cores, the
baseline screened at 30 tok/s instead of ~220 and MTP and deep drafts were pruned on such figures).
Every pass therefore gets the check the protocol's rounds get (:mod:`autotune.engines.noise`, read
in the worker around the pass):

* a disturbed pass is measured again, at most ``MAX_DISTURBED_RERUNS`` more times and never past the
  study's deadline; the progress names the disturbance ("other processes use 1.80 of 2 cores:
  re-measuring");
* when every pass was disturbed, the fastest is kept (other work only slows a pass down, so the
  fastest is the least distorted) and the trial's row is marked ``extra["disturbed"]``;
* a marked row never informs the guide (:func:`undisturbed`): it is neither an incumbent nor a
  residual of the performance model, so a disturbed pass never rules a configuration out.

``extra["disturbed_reruns"]`` counts the passes measured again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from autotune.engines.base import Measurement
from autotune.engines.noise import BackgroundLoad
from autotune.engines.protocol import Pass

# Two more passes: a short burst of other work (a compiler, a test run) is usually over by then, and
# a machine loaded for longer gets a marked row after three passes instead of a study that stalls.
MAX_DISTURBED_RERUNS = 2
DISTURBED_ATTR = "disturbed"
RERUNS_ATTR = "disturbed_reruns"


@dataclass(frozen=True)
class ScreenedPass:
    """The pass a screening trial keeps, and how many passes were measured again to get it."""

    measurement: Measurement
    load: BackgroundLoad
    reruns: int = 0

    @property
    def disturbed(self) -> bool:
        return self.load.disturbed

    def extra(self) -> dict[str, Any]:
        """What the trial's row stores about disturbance (nothing for a quiet first pass)."""
        extra: dict[str, Any] = {RERUNS_ATTR: self.reruns} if self.reruns else {}
        if self.disturbed:
            extra[DISTURBED_ATTR] = self.load.describe()
        return extra


def screen(
    measure: Callable[[], Pass],
    say: Callable[[str], None] = lambda _text: None,
    in_time: Callable[[], bool] = lambda: True,
    max_reruns: int = MAX_DISTURBED_RERUNS,
) -> ScreenedPass:
    """Measure one pass with ``measure``, again while it is disturbed (see the module doc);
    ``in_time()`` False stops the re-runs (the study's budget is spent)."""
    passes = [measure()]
    while passes[-1].load.disturbed and len(passes) <= max_reruns and in_time():
        say(f"{passes[-1].load.describe()}: re-measuring ({len(passes)} of {max_reruns})")
        passes.append(measure())
    kept = passes[-1] if not passes[-1].load.disturbed else max(passes, key=lambda one: one.measurement.tokens_per_s)
    return ScreenedPass(kept.measurement, kept.load, len(passes) - 1)


def undisturbed(rows: Iterable[Any]) -> list[Any]:
    """The rows whose figures may guide the search: a screening pass that stayed disturbed is left out."""
    return [row for row in rows if not row.extra.get(DISTURBED_ATTR)]
