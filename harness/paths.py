"""Where the project's files and caches live."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKLOADS_DIR = REPO_ROOT / "workloads"
SOLUTIONS_DIR = REPO_ROOT / "solutions"
RESULTS_DIR = REPO_ROOT / "results"


def cache_dir() -> Path:
    """Cache root: ``$GDN_BENCH_CACHE`` or ``~/.cache/gdn-decode-bench``."""
    return Path(os.environ.get("GDN_BENCH_CACHE", Path.home() / ".cache" / "gdn-decode-bench")).expanduser()
