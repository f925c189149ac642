"""How a solution is judged: run in a worker process of its own, checked and timed by the judge.

Open first: :mod:`~harness.judge.run` (``run_benchmark``: one run over every solution and
workload), then :mod:`~harness.judge.session` (one solution variant: drives its worker, decides
every verdict). ``docs/judging.md`` is the threat model and the map of the guarantees.

The judge's side (trusted):

- :mod:`~harness.judge.run`, :mod:`~harness.judge.session`: the run and one variant's verdicts.
- :mod:`~harness.judge.references`, :mod:`~harness.judge.batched_reference`,
  :mod:`~harness.judge.check`: the expected outputs and the comparison.
- :mod:`~harness.judge.figures`: whether a tier's figure can be true (pure checks).
- :mod:`~harness.judge.core`, :mod:`~harness.judge.core_tier`: the timing core's commands,
  results and captures (the core itself is ``core/gdn_core.c``).
- :mod:`~harness.judge.floor`, :mod:`~harness.judge.stream_copy`: the copy floor, the physical
  limit of a figure.
- :mod:`~harness.judge.isolation`, :mod:`~harness.judge.zygote`, :mod:`~harness.judge.vault`:
  worker processes, their fork server, the files put back after each.

Between the two: :mod:`~harness.judge.protocol` (every message that crosses), and what both
sides load a solution with: :mod:`~harness.judge.solutions`, :mod:`~harness.judge.entries`
(contest entries as shipped: a flashinfer-bench Solution JSON or a starter-kit folder, converted
into a solution when the run starts), :mod:`~harness.judge.dps` (the positional entry it is called
through, the one ``pack`` ships), :mod:`~harness.judge.build` (CUDA builds).

The worker's side (untrusted: the solution may patch it): :mod:`~harness.judge.worker`, and the
timers it runs, :mod:`~harness.judge.timing` and :mod:`~harness.judge.cupti_recorder` (the contest tier;
the judge also times the copy floor with them).
"""

__all__ = ["run", "session", "references", "batched_reference", "check", "figures", "core", "core_tier", "floor",
           "stream_copy", "isolation", "zygote", "vault", "protocol", "solutions", "entries", "dps", "build", "worker",
           "timing", "cupti_recorder"]
