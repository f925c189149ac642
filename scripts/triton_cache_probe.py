#!/usr/bin/env python3
"""What a worker's empty Triton cache costs (issue #17): on the H100 the FLA baselines' workers
took 14–20 s to load and Triton solutions' first workload ~3 s (results/speed/20261124-H100).

    python scripts/triton_cache_probe.py OUT_DIR

Each step runs in a fresh interpreter (as a worker is), with PYTHONDONTWRITEBYTECODE=1 and a
Triton cache that is either empty (``cold``, as every worker's private cache is) or the one the
previous cold step filled (``warm``): Triton's CUDA driver start (its ``cuda_utils`` module is
compiled with the host C compiler on first use), ``import fla.ops.gated_delta_rule`` (fla asks
the driver for the target at import) and one small Triton kernel launch. Prints seconds and
the files each cold step left in the cache; writes ``OUT_DIR/triton_cache_probe.txt``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = {
    "torch and a CUDA context": "import torch; torch.zeros(1, device='cuda')",
    "driver": "import triton; triton.runtime.driver.active.get_current_target()",
    "import fla": "import fla.ops.gated_delta_rule",
    "kernel": ("import torch, triton, triton.language as tl\n"
               "@triton.jit\ndef k(x, n: tl.constexpr):\n    tl.store(x + tl.arange(0, n), tl.arange(0, n))\n"
               "x = torch.empty(16, device='cuda', dtype=torch.int32); k[(1,)](x, 16); torch.cuda.synchronize()"),
}


def timed(code: str, cache: Path) -> float:
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")
    script = Path(tempfile.mkdtemp()) / "step.py"  # a file: triton.jit reads its kernel's source
    script.write_text(code + "\n")
    started = time.perf_counter()
    subprocess.run([sys.executable, str(script)], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    timed("import torch", Path(tempfile.mkdtemp()))  # the page cache warm for torch itself
    for name, code in STEPS.items():
        cache = Path(tempfile.mkdtemp(prefix="triton-probe-"))
        cold = timed(code, cache)
        files = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
        warm = timed(code, cache)
        lines.append(f"{name}: cold cache {cold:.2f} s, warm cache {warm:.2f} s; cold left {len(files)} files: "
                     + ", ".join(Path(f).name for f in files[:12]))
    text = "\n".join(lines)
    (out_dir / "triton_cache_probe.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
