"""The GPU's clocks over time, beside a measurement: ``nvidia-smi`` reads the SM and memory clocks, the
temperature, the power and the clock-event reasons once a second into a CSV file (read, never set), and
:func:`by_phase` says what they were while each side of a cross-check ran (issue #29).

Why: the harness's contest tier read the own kernels about 1% over the plain timer on the H200, and the
harness always ran first, so a clock or thermal state of its own minutes was one reading of it. The
clocks beside a two-round run put it aside (results/proof/20261128-H200-parity-order: 1,980 MHz at the
median of every phase); ``tools/tier_parity.py --clock-log`` keeps them in every cross-check that asks.
"""

from __future__ import annotations

import csv
import shutil
import statistics
import subprocess
from collections import Counter
from datetime import datetime
from pathlib import Path

#: What nvidia-smi is asked for, in its CSV's order.
QUERY = ("timestamp", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", "clocks_event_reasons.active")
#: The clock-event reason bit nvidia-smi sets while the GPU is idle (``clocks_event_reasons.gpu_idle``).
IDLE_REASON = 0x1
#: nvidia-smi's timestamp, in the machine's local time.
_TIMESTAMP = "%Y/%m/%d %H:%M:%S.%f"


def start(path: Path) -> subprocess.Popen | None:
    """nvidia-smi logging :data:`QUERY` once a second into ``path`` until :func:`stop`; None where the machine
    has no nvidia-smi (the cross-check then has no clock table)."""
    if shutil.which("nvidia-smi") is None:
        return None
    with path.open("w") as out:
        return subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(QUERY)}", "--format=csv,nounits", "-l", "1"],
                                stdout=out, stderr=subprocess.STDOUT)


def stop(logger: subprocess.Popen | None) -> None:
    """End a logger process: :func:`start`'s, or tier_parity's host speed log (None: there was none); killed
    if it has not ended 10 s after it was asked to."""
    if logger is None:
        return
    logger.terminate()
    try:
        logger.wait(10)
    except subprocess.TimeoutExpired:
        logger.kill()
        logger.wait()


def read(path: Path) -> list[dict]:
    """The samples of a log :func:`start` wrote: ``{"time"`` (epoch s, the timestamp read in this machine's local
    time, as nvidia-smi wrote it on the same machine), ``"sm_mhz", "mem_mhz", "temp_c", "power_w", "reasons"}``
    (the reasons as an int). The header and any line that is not a sample (an error nvidia-smi printed) are
    left out."""
    samples = []
    with path.open(newline="") as handle:
        for row in csv.reader(handle):
            try:
                samples.append({"time": datetime.strptime(row[0].strip(), _TIMESTAMP).timestamp(),
                                "sm_mhz": int(row[1]), "mem_mhz": int(row[2]), "temp_c": int(row[3]),
                                "power_w": float(row[4]), "reasons": int(row[5].strip(), 16)})
            except (IndexError, ValueError):
                continue
    return samples


def by_phase(samples: list[dict], phases: list[dict]) -> list[dict]:
    """Per phase (``{"side", "start", "end"}``, epoch s, in order): ``side``, ``samples``, ``busy`` (the samples
    without :data:`IDLE_REASON`), the SM clock's median over the busy samples and its min and max over all,
    the memory clocks seen, the temperature's range, the power's median and how often each reason word was
    seen. A phase with no sample gets its side and ``samples`` 0 only."""
    rows = []
    for phase in phases:
        inside = [s for s in samples if phase["start"] <= s["time"] <= (phase["end"] or float("inf"))]
        row = {"side": phase["side"], "samples": len(inside)}
        if inside:
            busy = [s for s in inside if not s["reasons"] & IDLE_REASON] or inside
            row |= {"busy": sum(not s["reasons"] & IDLE_REASON for s in inside),
                    "sm_mhz_busy_median": statistics.median(s["sm_mhz"] for s in busy),
                    "sm_mhz_min": min(s["sm_mhz"] for s in inside), "sm_mhz_max": max(s["sm_mhz"] for s in inside),
                    "mem_mhz": sorted({s["mem_mhz"] for s in inside}),
                    "temp_c": [min(s["temp_c"] for s in inside), max(s["temp_c"] for s in inside)],
                    "power_w_median": statistics.median(s["power_w"] for s in inside),
                    "reasons": {f"0x{k:x}": v for k, v in sorted(Counter(s["reasons"] for s in inside).items())}}
        rows.append(row)
    return rows
