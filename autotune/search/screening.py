"""Screening passes (one measurement per Optuna trial) with the disturbance check of the protocol.

A screening pass decides what the model-guided search measures next, what it rules out and which
configurations reach the confirmation, so a pass slowed by other processes would decide on the
machine's load instead of the configuration. Every pass therefore gets the check the protocol's
rounds get (:mod:`autotune.engines.noise`, read in the worker around the pass):

* a disturbed pass is measured again, at most ``MAX_DISTURBED_RERUNS`` more times and never past the
  study's deadline; the progress names the disturbance ("other processes use 1.80 of 2 cores:
  re-measuring");
* when every pass was disturbed, the fastest is kept (other work only slows a pass down, so the
  fastest is the least distorted) and the trial's row is marked ``extra["disturbed"]``;
* a marked row never informs the guide (:func:`undisturbed`): it is neither an incumbent nor a
  residual of the performance model, so a disturbed pass never rules a configuration out.

``extra["disturbed_reruns"]`` counts the passes measured again.

**A load that persists is a condition, not a blip.** When a trial's passes stayed disturbed through
all its re-measurements (:class:`MachineLoad` remembers it for the study), the study measures
*under* the load: the next passes are measured once, and a disturbed pass while the load persists
is kept and marked ``extra["loaded"]`` rather than ``"disturbed"``. Loaded rows guide the search
(they are what this machine does now; the performance model's study-wide correction, fitted on the
passes' log residuals, scales its predictions to them), the confirmation keeps disturbed rounds at
once (its rounds pair each configuration with the baseline under the same load, so the speedups
survive where absolute figures do not), and the summary says that the absolute figures are the
loaded machine's. Under the load the engine computes on the cores it leaves
(:meth:`BackgroundLoad.cores_left`, :attr:`MachineLoad.threads`), screening and confirmation
alike, and the pass that found the load persisting is measured once more that way: torch's
threads on every core meet at each operator's barrier, so with two busy loops on two cores a pass
on two threads ran 4-10x slower than idle (in one run by chance: 59-124 tok/s for one
configuration), one on one thread 1.5-1.8x slower and steadily (docs/benchmarks.md, "A study
under two busy loops on the cores they leave"). The first quiet pass ends the state: the engine
gets every core back (a pass measured on fewer threads is measured again on all), and the next
disturbed pass is measured again as before.

A pass measured *again* that fails in the worker (a crash, a timeout, memory) does not fail the
trial: the configuration has already run once, so what failed is the repetition, not the
configuration. The passes so far stand, chosen by the same rules, and the row says why
(``extra["rerun_failed"]``); the worker starts afresh for the next trial as after any failure.

A quiet pass far *below* its own prediction (``SURPRISE_Z`` of the prediction's "predict, then
measure once" sigma, :func:`surprise_floor`) is measured once more and the faster of the two kept,
as for a disturbed pass (``extra["surprise_rerun"]`` holds the slower figure): single passes of one
configuration can differ widely with no other process running, which the disturbance check cannot
see, and such a pass would also enter the model's leave-one-out residuals, widen its sigma and keep
points open that it would otherwise close. At z = 2 a pass the model predicts well is measured
again about once in 44; a pass the model cannot predict (a calibration run) is not checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from autotune.engines.base import Measurement
from autotune.engines.noise import BackgroundLoad
from autotune.engines.protocol import Pass
from autotune.engines.worker import WorkerFailure

# One-sided: P(a pass lies this far below a well-calibrated prediction) = 1 - Phi(2) = 2.3 %.
SURPRISE_Z = 2.0
SURPRISE_ATTR = "surprise_rerun"

# Two more passes: a short burst of other work (a compiler, a test run) is usually over by then, and
# a machine loaded for longer gets a marked row after three passes instead of a study that stalls.
MAX_DISTURBED_RERUNS = 2
DISTURBED_ATTR = "disturbed"
LOADED_ATTR = "loaded"
RERUNS_ATTR = "disturbed_reruns"
RERUN_FAILED_ATTR = "rerun_failed"
THREADS_ATTR = "threads"


@dataclass
class MachineLoad:
    """Whether other processes' load has outlasted a trial's re-measurements (module doc): set by
    :func:`screen` when every pass of a trial stayed disturbed, cleared by the next quiet pass.
    ``threads``: the engine's thread count under a load (the cores it leaves, from the reading
    before the study or once the load persists), None otherwise; the study hands it to its worker
    (:meth:`EngineWorker.limit_threads`). ``slowdown``: the machine's cores over the cores the load
    leaves (1.0 without a load), by which the confirmation's time per concurrency is stretched."""

    persists: bool = False
    threads: int | None = None
    can_limit: bool = True  # the engine computes on the threads it is given (the embedded one)
    slowdown: float = 1.0

    def limit_to(self, load: BackgroundLoad) -> bool:
        """Compute on the cores ``load`` leaves, where the engine can and the load takes any (CPU
        steal alone takes none); True when that changed the limit."""
        left = load.cores_left()
        self.slowdown = load.cpu_count / left
        threads = left if self.can_limit and left < load.cpu_count else None
        changed, self.threads = threads != self.threads, threads
        return changed

    def at_start(self, load: BackgroundLoad, say: Callable[[str], None]) -> None:
        """A load already there before the study times anything (read with nothing measured): the
        step timings and the first passes are measured on the cores it leaves."""
        if load.disturbed and self.limit_to(load):
            say(f"{load.describe()} before the study starts: timing and measuring on the {self.threads} "
                "core(s) they leave")


@dataclass(frozen=True)
class ScreenedPass:
    """The pass a screening trial keeps, and how many passes were measured again to get it."""

    measurement: Measurement
    load: BackgroundLoad
    reruns: int = 0
    surprise: float | None = None  # the slower pass's tokens/s, when a surprising pass was measured again
    rerun_failed: str | None = None  # why a pass measured again failed (the passes before it stand)
    loaded: bool = False  # kept under a load that persists: it guides the search (module doc)
    threads: int | None = None  # the thread limit the kept pass ran under, when the load set one

    @property
    def disturbed(self) -> bool:
        return self.load.disturbed

    def extra(self) -> dict[str, Any]:
        """What the trial's row stores about disturbance (nothing for a quiet first pass)."""
        extra: dict[str, Any] = {RERUNS_ATTR: self.reruns} if self.reruns else {}
        if self.disturbed:
            extra[LOADED_ATTR if self.loaded else DISTURBED_ATTR] = self.load.describe()
        if self.surprise is not None:
            extra[SURPRISE_ATTR] = self.surprise
        if self.rerun_failed is not None:
            extra[RERUN_FAILED_ATTR] = self.rerun_failed
        if self.threads is not None:
            extra[THREADS_ATTR] = self.threads
        return extra


def surprise_floor(prediction: dict[str, Any] | None) -> float | None:
    """The tokens/s below which a quiet pass is measured again: the predicted value x
    exp(-SURPRISE_Z x sigma), from a stored prediction (``Prediction.to_dict``); None without one."""
    if not prediction or "sigma" not in prediction:
        return None
    return prediction["tokens_per_s"]["value"] * math.exp(-SURPRISE_Z * prediction["sigma"])


class _Passes:
    """The passes of one trial: each run on the machine's thread limit of the moment (remembered
    per pass); a repetition that fails leaves the passes before it standing (module doc)."""

    def __init__(self, measure: Callable[[], Pass], machine: MachineLoad, say: Callable[[str], None]) -> None:
        self.measure, self.machine, self.say = measure, machine, say
        self.threads_of: dict[int, int | None] = {}  # id(pass) -> the thread limit it ran under
        self.failed: str | None = None

    def run(self) -> Pass:
        threads = self.machine.threads
        one = self.measure()
        self.threads_of[id(one)] = threads
        return one

    def again(self) -> Pass | None:
        try:
            return self.run()
        except WorkerFailure as failure:
            self.failed = str(failure)
            self.say(f"measuring again failed ({self.failed}): keeping the pass measured before")
            return None


def screen(
    measure: Callable[[], Pass],
    say: Callable[[str], None] = lambda _text: None,
    in_time: Callable[[], bool] = lambda: True,
    max_reruns: int = MAX_DISTURBED_RERUNS,
    floor: float | None = None,
    machine: MachineLoad | None = None,
) -> ScreenedPass:
    """Measure one pass with ``measure``, again while it is disturbed, and once more when it stays
    quiet below ``floor`` tokens/s (:func:`surprise_floor`; see the module doc); ``in_time()`` False
    stops the re-runs (the study's budget is spent). ``machine`` carries the study's load state
    across trials: while a load persists the pass is measured once and kept, marked loaded, and
    ``measure`` must run it on ``machine.threads`` threads (read at each call)."""
    machine = machine if machine is not None else MachineLoad()
    if machine.persists:
        max_reruns = 0
    trial = _Passes(measure, machine, say)
    passes = [trial.run()]
    while passes[-1].load.disturbed and len(passes) <= max_reruns and in_time():
        say(f"{passes[-1].load.describe()}: re-measuring ({len(passes)} of {max_reruns})")
        if (rerun := trial.again()) is None:
            break
        passes.append(rerun)
    kept = passes[-1] if not passes[-1].load.disturbed else max(passes, key=lambda one: one.measurement.tokens_per_s)
    # Every pass disturbed, and either re-measured as often as allowed or already under a persisting
    # load: the load has outlasted the re-measurements, so the study measures under it from now on.
    loaded = kept.load.disturbed and (machine.persists or len(passes) > max_reruns)
    kept, loaded = _follow_the_load(trial, kept, loaded, len(passes), in_time)
    surprise = None
    if floor is not None and not kept.load.disturbed and kept.measurement.tokens_per_s < floor and in_time():
        surprise = kept.measurement.tokens_per_s
        say(f"{surprise:.0f} tok/s is far below the prediction (under {floor:.0f}): re-measuring once")
        rerun = trial.again()
        if rerun is not None and not rerun.load.disturbed and rerun.measurement.tokens_per_s > surprise:
            kept = rerun
    return ScreenedPass(kept.measurement, kept.load, len(passes) - 1, surprise, trial.failed, loaded,
                        trial.threads_of[id(kept)])


def _follow_the_load(trial: _Passes, kept: Pass, loaded: bool, count: int, in_time: Callable[[], bool]) -> tuple[Pass, bool]:
    """The machine's load state after a trial's ``count`` passes (module doc): a load found
    persisting limits the engine to the cores it leaves and has the pass measured once more that
    way; a quiet pass on fewer threads gives every core back and is measured again on them."""
    machine, say = trial.machine, trial.say
    if loaded and not machine.persists:
        changed = machine.limit_to(kept.load)
        on = "" if machine.threads is None else f", on the {machine.threads} core(s) it leaves"
        say(f"{kept.load.describe()} through {count} passes: measuring under this load from now on{on} "
            "(absolute figures are the loaded machine's; speedups stay paired)")
        # The passes so far ran on more threads than the load leaves cores: once more on the cores
        # left, the figure the rest of the study is measured like.
        if changed and in_time() and (rerun := trial.again()) is not None:
            kept, loaded = rerun, rerun.load.disturbed
    if not kept.load.disturbed:
        machine.slowdown = 1.0
        if machine.threads is not None:
            machine.threads = None
            say("the load has gone: measuring again on every core")
            if in_time() and (rerun := trial.again()) is not None and not rerun.load.disturbed:
                kept = rerun
    if not kept.load.disturbed or loaded:
        machine.persists = loaded
    return kept, loaded


def undisturbed(rows: Iterable[Any]) -> list[Any]:
    """The rows whose figures may guide the search: a screening pass disturbed by a load that passed
    is left out; one measured under a load that persists (``loaded``) stays."""
    return [row for row in rows if not row.extra.get(DISTURBED_ATTR)]
