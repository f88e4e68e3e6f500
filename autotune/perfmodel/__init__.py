"""The performance model: predict tokens/s and TPOT of any configuration from two profiles.

* :mod:`~autotune.perfmodel.acceptance`: how many drafts a proposer gets accepted, by position
  (hardware-independent: target, proposer, workload);
* :mod:`~autotune.perfmodel.cost`: what a step and a prefill cost (hardware, engine, models),
  timed with forced acceptance or taken from a roofline (:mod:`~autotune.perfmodel.roofline`);
* :mod:`~autotune.perfmodel.simulate`: the workload replayed through continuous batching;
* :mod:`~autotune.perfmodel.model`: the prediction with its uncertainty, corrected by measurements.

Pure Python: no torch, optuna or database here (the search and the planner feed it).
"""
