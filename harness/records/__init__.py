"""What is kept of a run: typed traces and run folders, and everything read from them.

Open first: :mod:`~harness.records.trace` (the :class:`Trace` of one solution on one workload),
then :mod:`~harness.records.store` (the one writer and loader of ``results/runs/<run id>/``).

- :mod:`~harness.records.environment`: the hardware and software of a trace.
- :mod:`~harness.records.annotate`, :mod:`~harness.records.best_floor`: copy-floor multiples
  and speedups added to traces; a run's copy floor.
- :mod:`~harness.records.report`: a run's summary CSV and printed table.
- :mod:`~harness.records.leaderboard`, :mod:`~harness.records.score`,
  :mod:`~harness.records.plots`: over every stored run.
"""

__all__ = ["trace", "store", "environment", "annotate", "best_floor", "report", "leaderboard", "score", "plots"]
