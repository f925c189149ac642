"""The GPU memory each process holds over time, beside a measurement: nvidia-smi's compute-apps query
(``pid``, ``used_memory``) read every half second into a CSV file, each process named by its command
line, and :func:`by_process` says how much each held at most and when (issue #29).

    python -m tools.gpu_memory_log log OUT.csv [--every 0.5]   # until terminated (SIGTERM or Ctrl-C)
    python -m tools.gpu_memory_log summary OUT.csv             # a table of every process seen

Why: the harness's worker reads the own kernels about 1% over a plain process's timer at B = 64 on the
H200, and the copy, which the judge times in its own process before any worker starts, does not
(docs/timing.md). A worker gets its GPU memory while the judge holds its own (the references, the floor's
copies, a flush); which physical pages the timed buffers land on follows from that. This log says how
much the judge and the worker hold while the worker times, so a plain process can be timed beside the
same amount (``tools/worker_conditions_probe.py --conditions plain,beside-<GiB>``). It reads, it never
sets anything.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

#: The log's columns: epoch seconds, the process, MiB it holds on the GPU, its command line (shortened).
COLUMNS = ("time", "pid", "mib", "command")
#: Characters of a process's command line kept in the log.
COMMAND_CHARS = 160


def command_line(pid: int) -> str:
    """``pid``'s command line, its arguments joined by spaces and cut to :data:`COMMAND_CHARS`; "" where it is
    gone or cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:COMMAND_CHARS]


def query() -> list[tuple[int, int]]:
    """``[(pid, MiB)]`` of every process nvidia-smi sees on the GPU now ([] if it printed nothing usable)."""
    done = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=30)
    found = []
    for line in done.stdout.splitlines():
        try:
            pid, mib = (int(part) for part in line.split(","))
        except ValueError:
            continue
        found.append((pid, mib))
    return found


def log(path: Path, every_s: float = 0.5) -> None:
    """Append a row of :data:`COLUMNS` per process and reading to ``path`` every ``every_s`` seconds, until
    SIGTERM or SIGINT (then it returns)."""
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    named: dict[int, str] = {}
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(COLUMNS)
        while not stopping:
            now = time.time()
            for pid, mib in query():
                if pid not in named:  # read once: a forked worker keeps its parent's command line anyway
                    named[pid] = command_line(pid)
                out.writerow((f"{now:.3f}", pid, mib, named[pid]))
            handle.flush()
            time.sleep(every_s)


def read(path: Path) -> list[dict]:
    """The rows :func:`log` wrote, as dicts of :data:`COLUMNS` (time a float, pid and mib ints); a row that is
    not one (a cut last line) is left out.

    Raises:
        ValueError: ``path`` is not such a log (not text, or a header without those columns); the message
            names it. An empty file (the logger's header not written yet) has no rows.
    """
    rows = []
    with path.open(newline="", encoding="utf-8") as handle:
        try:
            reader = csv.DictReader(handle)
            fieldnames = reader.fieldnames
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a GPU memory log (not text)") from None
        if fieldnames is None:  # empty: a logger that has not written its header yet
            return rows
        missing = [c for c in COLUMNS if c not in fieldnames]
        if missing:
            raise ValueError(f"{path}: not a GPU memory log (no {', '.join(missing)} column)")
        for row in reader:
            try:
                rows.append({"time": float(row["time"]), "pid": int(row["pid"]), "mib": int(row["mib"]),
                             "command": row["command"] or ""})
            except (TypeError, ValueError):
                continue
    return rows


def by_process(rows: list[dict]) -> list[dict]:
    """Per process, in the order first seen: ``pid``, ``command``, ``max_mib``, ``first_s`` and ``last_s``
    (seconds from the log's first row) and ``readings``."""
    if not rows:
        return []
    origin = rows[0]["time"]
    table: dict[int, dict] = {}
    for row in rows:
        entry = table.setdefault(row["pid"], {"pid": row["pid"], "command": row["command"], "max_mib": 0,
                                              "first_s": row["time"] - origin, "readings": 0})
        entry["max_mib"] = max(entry["max_mib"], row["mib"])
        entry["last_s"] = row["time"] - origin
        entry["readings"] += 1
    return list(table.values())


def print_summary(rows: list[dict]) -> None:
    print("| pid | max MiB | seen from s | to s | readings | command |")
    print("|---|---|---|---|---|---|")
    for e in by_process(rows):
        print(f"| {e['pid']} | {e['max_mib']} | {e['first_s']:.1f} | {e['last_s']:.1f} | {e['readings']} | "
              f"`{e['command'][:80]}` |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("log", "summary"))
    parser.add_argument("path", type=Path, help="the log's CSV file")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between readings (log; default 0.5)")
    args = parser.parse_args(argv)
    if args.action == "log":
        if shutil.which("nvidia-smi") is None:
            print("error: the GPU memory log needs nvidia-smi", file=sys.stderr)
            return 2
        log(args.path, max(args.every, 0.05))
        return 0
    if not args.path.is_file():
        print(f"error: {args.path}: no such log", file=sys.stderr)
        return 2
    try:
        print_summary(read(args.path))
    except (ValueError, UnicodeDecodeError) as exc:  # a later line that is not text is named too
        print(f"error: {exc if str(args.path) in str(exc) else f'{args.path}: not a GPU memory log ({exc})'}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
