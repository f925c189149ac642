"""Warp-stall samples of one Nsight Compute source-page export: by reason, by instruction, by phase.

    python stalls.py cuda-v4-source.csv.gz [--last] [--cycles N]

Input: ``ncu --import X.ncu-rep --page source --print-source sass --csv`` (plain or gzipped). The
export has one block per profiled launch (cuda-v4's repeats each launch twice, identical);
identical consecutive blocks are counted once, and the distinct launches are summed (``--last``:
the last one only). Samples are the "All Samples" columns (stall_*, issued samples included).
Phases are address ranges of each kernel's SASS, given below as (offset of the first
instruction, its opcode, name); the opcodes are checked, so another build stops here.
``--cycles N`` adds a column share x N (N: a block's lifetime in cycles, e.g. SM active cycles).
"""
import csv, gzip, sys
from collections import Counter

PHASES = {  # kernel-name substring -> [(offset, opcode, phase)]
    "gdn_decode_v4_kernel": [
        (0x000, "LDC", "a setup: prologue, addresses, issue of A_log/a/b/dt_bias, 2x state LDG.128, q, k"),
        (0x3b0, "FFMA.SAT", "b first read of a loaded register (exp(A_log)): first load batch"),
        (0x3c0, "FFMA.RM", "c gate math (4 MUFU.EX2, log1p polynomial, MUFU.RCP); a, b read at 0x400/0x420"),
        (0x940, "LDG.E.U16.CONSTANT", "d v load issue; first read of k (0x950); state first read at 0x980"),
        (0x980, "FMUL", "e dot products, reduce-scatter SHFL.BFLY + FADD, decay"),
        (0xed0, "SHF.L.U32", "f first read of v (0xed0): v's load"),
        (0xee0, "FFMA", "g delta, SHFL.IDX, update FFMAs, STG.U16 out, 2x STG.128 state, EXIT"),
        (0x10d0, "SHF.L.U32", "h after EXIT (never executed): drain of the stores"),
    ],
    "_stream_copy_kernel": [
        (0x000, "LDC", "a setup: prologue, addresses, issue of 2x LDG.128"),
        (0x1d0, "STG.E.EF.128", "b first STG: waits on load 1"),
        (0x1e0, "EXIT", "c second STG (waits on load 2), EXIT"),
        (0x210, "BRA", "h after EXIT (never executed): drain of the stores"),
    ],
    "gdn_decode_kernel": [
        (0x000, "LDC", "a setup: prologue, addresses, issue of all loads (v included)"),
        (0x370, "SHF.L.U32", "b first read of a loaded register (a): first load batch"),
        (0x380, "FADD", "c gate math start"),
        (0x3e0, "PRMT", "d first reads of q, k (0x3e0/0x3f0) and state (0x440)"),
        (0x450, "SHF.L.U32", "e dot products, SHFL.BFLY reductions, gate math (interleaved)"),
        (0x1190, "F2FP.BF16.F32.PACK_AB", "g output (STS/LDS), update FFMAs, 4x STG.128, EXIT"),
        (0x14f0, "BRA", "h after EXIT (never executed): drain of the stores"),
    ],
}
ALL = "Warp Stall Sampling (All Samples)"


def launches(path):
    """Blocks of rows (dicts) of the export, one per profiled launch, and the kernel name."""
    blocks, name = [], None
    with (gzip.open if path.endswith(".gz") else open)(path, "rt", newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "Kernel Name":
                name = row[1]; blocks.append([]); header = None
            elif row and row[0] == "Address":
                header = row
            elif row:
                blocks[-1].append(dict(zip(header, row)))
    return name, blocks


def main(argv):
    path, last = argv[0], "--last" in argv
    cyc = float(argv[argv.index("--cycles") + 1]) if "--cycles" in argv else None
    name, blocks = launches(path)
    distinct = [b for i, b in enumerate(blocks) if i == 0 or b != blocks[i - 1]]
    used = distinct[-1:] if last else distinct
    print(f"{name}\n{len(blocks)} blocks, {len(distinct)} distinct launches, samples per launch "
          f"{[sum(int(r[ALL]) for r in b) for b in distinct]}; using {'the last' if last else 'their sum'}")
    base = int(used[0][0]["Address"], 16)
    reasons = [k for k in used[0][0] if k.startswith("stall_") and "Not Issued" not in k]
    rows = []  # (offset, sass, samples, Counter of reasons)
    for i, r in enumerate(used[0]):
        c = Counter({k[6:]: sum(int(b[i][k]) for b in used) for k in reasons})
        n = sum(int(b[i][ALL]) for b in used)
        assert n == sum(c.values()), (r["Address"], n, c)
        rows.append((int(r["Address"], 16) - base, r["Source"].strip(), n, +c))
    total = sum(n for _, _, n, _ in rows)
    pct = lambda n: f"{100 * n / total:.1f}"
    print(f"\ntotal samples {total}\n\n| stall reason | samples | % |\n|---|---|---|")
    for k, n in sum((c for *_, c in rows), Counter()).most_common(6):
        print(f"| {k} | {n} | {pct(n)} |")
    print("\n| offset | SASS | samples | % | dominant reason |\n|---|---|---|---|---|")
    for off, sass, n, c in sorted((r for r in rows if r[2]), key=lambda t: -t[2])[:12]:
        k, m = c.most_common(1)[0]
        print(f"| 0x{off:04x} | `{sass}` | {n} | {pct(n)} | {k} ({m}) |")
    table = next(v for k, v in PHASES.items() if k in name)
    by = {off: (sass, n, c) for off, sass, n, c in rows}
    for off, op, _ in table:
        assert by[off][0].split()[by[off][0].startswith("@")] == op, (hex(off), by[off][0], op)
    print(f"\n| phase | offsets | samples | % |{' ~cycles |' if cyc else ''} reasons |\n|---|---|---|---|"
          f"{'---|' if cyc else ''}---|")
    for j, (off, _, label) in enumerate(table):
        end = table[j + 1][0] if j + 1 < len(table) else 1 << 40
        part = [(n, c) for o, _, n, c in rows if off <= o < end]
        n, c = sum(p[0] for p in part), sum((p[1] for p in part), Counter())
        why = ", ".join(f"{k} {m}" for k, m in c.most_common(3))
        extra = f" {cyc * n / total:.0f} |" if cyc else ""
        print(f"| {label} | 0x{off:04x}-{'' if end > 1 << 39 else f'0x{end - 16:04x}'} | {n} | {pct(n)} |{extra} {why} |")


if __name__ == "__main__":
    main(sys.argv[1:])
