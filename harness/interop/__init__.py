"""Interop with flashinfer-bench, the contest's own package: packed submissions, datasets, traces."""
