"""The performance model: predict tokens/s and TPOT of any configuration from two profiles.

* :mod:`~autotune.perfmodel.acceptance`: how many drafts a proposer gets accepted, by position
  (hardware-independent: target, proposer, workload); :mod:`~autotune.perfmodel.given_acceptance`
  one a user gives instead;
* :mod:`~autotune.perfmodel.cost`: what a step and a prefill cost (hardware, engine, models),
  timed with forced acceptance or built from priced parts (:mod:`~autotune.perfmodel.step_costs`):
  a roofline (:mod:`~autotune.perfmodel.roofline`, :mod:`~autotune.perfmodel.calibration`,
  :mod:`~autotune.perfmodel.step_fit`) or NVIDIA's measured kernels
  (:mod:`~autotune.perfmodel.silicon`, :mod:`~autotune.perfmodel.silicon_cost`);
* :mod:`~autotune.perfmodel.simulate`: the workload's steady-state stream replayed through
  continuous batching;
* :mod:`~autotune.perfmodel.model`: the prediction with its uncertainty, corrected by measurements.

Pure Python: no torch, optuna, database or engine here (the search and the planner feed it).
"""
