"""gdn-decode-bench: the reference harness for ``gdn_decode_qk4_v8_d128_k_last``.

One module per concept:

- ``definition``: the flashinfer-bench Definition schema, loading and the reference.
- ``workloads`` / ``dataset``: workload JSONL files and the datasets that hold them.
- ``generator``: deterministic, realistic tensors for our workload sets.
- ``solutions``: discovery and loading of ``solutions/<name>/``.
- ``check``: correctness as flashinfer-bench judges it.
- ``timing``: the timing tiers.
- ``run``: checks and times solutions on workloads and yields traces.
- ``traces`` / ``report``: trace JSONL, summary CSV and the printed table.
"""
