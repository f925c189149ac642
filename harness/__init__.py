"""gdn-decode-bench: the reference harness for ``gdn_decode_qk4_v8_d128_k_last``.

Open first: :func:`harness.judge.run.run_benchmark`, what ``run_local.py`` and
``run_modal.py`` call, then ``docs/judging.md`` for how a verdict is reached.

Packages, in the order a run goes through them:

- :mod:`harness.data`: what is judged: the definition, workload sets and datasets, their tensors.
- :mod:`harness.judge`: how it is judged: each solution in a worker process of its own, checked
  and timed by the judge (and its timing core), which alone decides the verdict.
- :mod:`harness.records`: what is kept: typed traces, run folders, summaries, the leaderboard,
  the predicted score, plots.
- :mod:`harness.interop`: flashinfer-bench's formats: packed submissions, datasets.

Modules beside them: ``cli`` (the run's command line), ``__main__`` (``python -m harness``),
``facts`` (the names and numbers every part shares), ``errors``, ``paths``, ``fib_import``
(flashinfer-bench imported on demand, for the judge's contest entries and the interop commands),
``fanout`` (``--gpus``: one judge per GPU), ``volume`` (the Modal Volume), ``interrupts`` (Ctrl-C and
SIGTERM: the first stops the run, none loses what finished), ``processes`` (the process tree from ``/proc``).
"""

__all__ = ["data", "judge", "records", "interop", "cli", "facts", "errors", "paths", "fib_import", "fanout",
           "volume", "interrupts", "processes"]
