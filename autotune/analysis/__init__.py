"""What measured figures mean: the ground floor every layer above reads, pure functions and data only.

:mod:`.steady` defines what a pass at concurrency C measures (the request stream, the steady window
and its figures); :mod:`.intervals` the confidence intervals, paired ones included; :mod:`.decision`
what a study's figures decide (baselines, ties, the configuration to deploy, the per-method verdict);
:mod:`.offstate` what "speculation off" means in a speculative server; :mod:`.plausibility` the
figures their own counters make impossible; :mod:`.categories`, :mod:`.category_best` and
:mod:`.mix` acceptance per kind of request and its carry-over to another mix; :mod:`.edges` answers
on the edge of the searched space; :mod:`.prediction` predicted against measured. Nothing here
measures, stores or imports an engine.
"""
