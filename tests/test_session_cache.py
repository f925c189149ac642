"""The test session's cache folder is one for the controller and every pytest-xdist worker, so
that a CUDA build made by one worker is a hit for the other (CI's two workers built cuda-v4's
all-variants cubin and its library twice, about 34 s of nvcc on two cores, while each worker
took the inherited folder for a cache the user had named)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SESSION_CACHE_ENV

pytest.importorskip("xdist", reason="pytest-xdist is not installed")

PROBE = '''
import os
from pathlib import Path

from conftest import SESSION_CACHE

def test_seen():  # one file per worker, named by it, holding the folder it took for the session's
    (Path(__file__).parent / "seen" / os.environ["PYTEST_XDIST_WORKER"]).write_text(str(SESSION_CACHE))
'''


def _session_caches(tmp_path: Path, env: dict) -> dict[str, str]:
    """Run the probe on each of two workers with tests/conftest.py; worker -> the SESSION_CACHE it saw."""
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "seen").mkdir()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "each", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return {worker.name: worker.read_text() for worker in (tmp_path / "seen").iterdir()}


def test_the_xdist_workers_know_the_sessions_cache_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GDN_BENCH_CACHE", SESSION_CACHE_ENV)}
    seen = _session_caches(tmp_path, env)
    assert set(seen) == {"gw0", "gw1"}, seen
    assert len(set(seen.values())) == 1 and "None" not in seen.values(), seen

