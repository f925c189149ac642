"""What is judged: the definition, the workloads and the datasets that hold them.

Open first: :mod:`~harness.data.dataset` (``open_dataset``: a workload set of ours or an external
flashinfer-bench dataset folder).

- :mod:`~harness.data.definition`: the flashinfer-bench Definition schema, loading, validation
  and running its reference.
- :mod:`~harness.data.workloads`: workloads in flashinfer-bench's JSONL format, and the tensors
  of one call (random inputs, stored tensors).
- :mod:`~harness.data.generator`: deterministic, realistic tensors for our workload sets.
"""

__all__ = ["dataset", "definition", "workloads", "generator"]
