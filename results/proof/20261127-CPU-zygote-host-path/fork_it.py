"""Run hostbench.py as the judge starts a worker, forked from its zygote (harness/judge/zygote.py:
GPU_PRELOAD imported, gc.freeze, the workers' environment), interleaved with plain
`python -s -m hostbench` runs in the same environment. Run from the repository root:

    python results/proof/20261127-CPU-zygote-host-path/fork_it.py

Writes each run's line (JSON) to stdout; the forked runs' lines go to their log, printed at the end.
"""
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root
from harness.judge import isolation  # noqa: E402

assert isolation.become_subreaper()
base = isolation.worker_base_env()
env = dict(base, PYTHONPATH=str(HERE))
isolation.Zygote.prestart(isolation.GPU_PRELOAD)
time.sleep(1)
with tempfile.NamedTemporaryFile("a+") as log:
    for _ in range(4):
        subprocess.run([sys.executable, "-s", "-m", "hostbench", "plain"], cwd=HERE, env=env, check=True)
        worker = isolation.Zygote.fork(base, "hostbench", ["forked"], HERE, env, [str(HERE)], log.fileno(),
                                       (log.fileno(),))
        assert worker is not None, "the zygote was not used"
        worker.wait(120)
    log.seek(0)
    # a forked run's line may follow, on the same line, what nanobind says of Triton at exit
    print("\n".join(re.findall(r'\{"where".*', log.read())))
