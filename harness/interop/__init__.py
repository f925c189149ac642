"""Interop with flashinfer-bench, the contest's own package: packed submissions, datasets, traces.

Open first: :mod:`~harness.interop.pack` (``python -m harness pack``: a solution as a contest
submission, with the positional entry the judge calls it through).

- :mod:`~harness.interop.export`: a workload set as a flashinfer-bench dataset folder.
- :mod:`~harness.interop.cli`: the ``python -m harness`` command line.

flashinfer-bench itself is imported on demand through :mod:`harness.fib_import`, as the judge
does for a contest entry.
"""

__all__ = ["pack", "export", "cli"]
