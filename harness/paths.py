"""Where the project's files and caches live."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKLOADS_DIR = REPO_ROOT / "workloads"
SOLUTIONS_DIR = REPO_ROOT / "solutions"
RESULTS_DIR = REPO_ROOT / "results"
#: Where ``run_local.py`` writes a run unless told otherwise: ignored by git, so a
#: run leaves the checkout clean and is never read into the committed leaderboard
#: (``results/runs``) by accident; the project's evidence runs pass ``--results results``.
LOCAL_RESULTS_DIR = RESULTS_DIR / "local"


def user_cache() -> Path:
    """``~/.cache/gdn-decode-bench``: where the cache root and the set-aside folder lie unless set."""
    return Path.home() / ".cache" / "gdn-decode-bench"


def cache_dir() -> Path:
    """Cache root: ``$GDN_BENCH_CACHE`` or :func:`user_cache`."""
    return Path(os.environ.get("GDN_BENCH_CACHE", user_cache())).expanduser()


def set_aside_root() -> Path:
    """Where a run's file vault moves what it takes out of the checkout (harness/judge/vault.py):
    ``$GDN_BENCH_SET_ASIDE`` or :func:`user_cache`'s ``set-aside``. Not under :func:`cache_dir`,
    which the test suite points at a temporary folder it deletes: a file a person saved into
    ``results/`` while the tests judged must outlive them."""
    return Path(os.environ.get("GDN_BENCH_SET_ASIDE", user_cache() / "set-aside")).expanduser()
