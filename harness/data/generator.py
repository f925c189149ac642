"""Deterministic, realistic tensors for our workload sets (no blobs in git).

The official dataset holds tensors captured from a real Qwen3-Next run, which
we cannot ship. This module makes stand-ins that are realistic and
bit-identical on every machine, and records their SHA-256 checksums in
``workloads/checksums.json``. Every choice, and why (see also docs/workloads.md):

* **Layers.** ``NUM_LAYERS`` simulated linear-attention layers, each with its
  own ``A_log`` and ``dt_bias`` drawn as the model family initializes them
  (Mamba2 / Gated DeltaNet): ``A ~ U[1, 16]``, ``A_log = log A``;
  ``dt`` log-uniform in ``[1e-3, 1e-1]``, ``dt_bias = softplus^-1(dt) = dt + log(-expm1(-dt))``.
* **States.** Per layer, a bank of ``SEQS_PER_LAYER`` sequences. Each sequence
  has a context length (log-uniform in ``[MIN_CONTEXT, MAX_CONTEXT]`` tokens,
  plus one sequence of length 0 for the empty-prefix edge case) and its state is produced by running
  this very recurrence over that context, with L2-normalized keys (as the
  model's q/k norm does), ``v, a, b ~ N(0, 1)`` (activation scale), starting
  from a zero state. A workload of batch size ``B`` takes ``B`` bank sequences
  of one layer, cyclically from an offset, so context lengths vary within and
  across workloads. Past 16 sequences a state repeats within a batch (different
  memory, so no kernel can exploit it); this keeps generation to 64 recurrences.
* **Bit-identical everywhere.** The recurrence runs in float64 NumPy using only
  elementwise IEEE operations (exactly rounded, so independent of SIMD width)
  and a fixed pairwise tree for the K-reductions (no BLAS, whose summation
  order depends on the CPU). Gates use Python's ``math`` on scalars rather than
  NumPy's vectorized ``exp``/``log``, whose SIMD variants may differ in the last
  bit across CPUs. Random draws come from NumPy's PCG64 seeded by
  ``(MASTER_SEED, purpose, layer, sequence)``. The final state is rounded once
  to float32.
* **Per-step inputs.** q/k/v/a/b of the decode step are ``random`` inputs in
  the workload files: the harness draws them afresh (standard normal, seeded
  per trial), as flashinfer-bench does, so each correctness trial sees new data.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.facts import DEFINITION_NAME, default_scale
from harness.paths import WORKLOADS_DIR

MASTER_SEED = 20260301
NUM_LAYERS = 4
SEQS_PER_LAYER = 16
MIN_CONTEXT, MAX_CONTEXT = 8, 4096


def _const_axes(path: Path) -> dict[str, int]:
    """The const axes of a definition JSON, read as plain JSON: the bank's worker processes import
    this module, and harness.data.definition would bring torch into each of them (1.5 s apiece)."""
    axes = json.loads(path.read_text())["axes"]
    return {name: axis["value"] for name, axis in axes.items() if axis.get("type") == "const"}


#: The head counts and head size of the generated tensors: the definition's const axes (one source).
_AXES = _const_axes(WORKLOADS_DIR / f"{DEFINITION_NAME}.json")
NUM_Q_HEADS, NUM_V_HEADS, HEAD_SIZE = _AXES["num_q_heads"], _AXES["num_v_heads"], _AXES["head_size"]
DEFAULT_SCALE = default_scale(HEAD_SIZE)
BANK_VERSION = "v1"  # bump when anything above changes; checksums must be re-recorded

#: The named workload sets: name -> batch size of each workload, in order.
SET_BATCH_SIZES = {
    "contest-v1": [1] * 20,
    "contest-v2": [1] * 10 + [4] * 8 + [8] * 7 + [16] * 7 + [32] * 7 + [48] * 7 + [64] * 8,
    "sweep": [2**i for i in range(10)],
}


def _rng(purpose: int, *ids: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([MASTER_SEED, purpose, *ids]))


def layer_params(layer: int) -> tuple[np.ndarray, np.ndarray]:
    """``(A_log, dt_bias)`` of a simulated layer, each ``[8]`` float32."""
    rng = _rng(0, layer)
    a_unif, dt_unif = rng.random(NUM_V_HEADS), rng.random(NUM_V_HEADS)
    lo, hi = math.log(1e-3), math.log(1e-1)
    A_log = [math.log(1.0 + 15.0 * float(u)) for u in a_unif]
    dts = [math.exp(lo + float(u) * (hi - lo)) for u in dt_unif]
    dt_bias = [dt + math.log(-math.expm1(-dt)) for dt in dts]
    return np.array(A_log, dtype=np.float32), np.array(dt_bias, dtype=np.float32)


def context_length(layer: int, seq: int) -> int:
    """Tokens before the decode step for bank sequence ``seq`` of ``layer``."""
    if layer == 0 and seq == 0:
        return 0  # the empty-prefix edge case: zero state
    u = float(_rng(1, layer, seq).random())
    lo, hi = math.log(MIN_CONTEXT), math.log(MAX_CONTEXT)
    return int(round(math.exp(lo + u * (hi - lo))))


def _tree_sum_last(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis (a power of two) in a fixed pairwise order."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]
    return x[..., 0]


def _softplus(x: float) -> float:
    return x if x > 20.0 else math.log1p(math.exp(x))


def _token_gates(a_row, b_row, A_log, dt_bias) -> tuple[np.ndarray, np.ndarray]:
    g = [math.exp(-math.exp(float(al)) * _softplus(float(x) + float(db))) for x, al, db in zip(a_row, A_log, dt_bias)]
    beta = [1.0 / (1.0 + math.exp(-float(x))) for x in b_row]
    return np.array(g), np.array(beta)


def sequence_state(layer: int, seq: int) -> np.ndarray:
    """Run the recurrence over a random context; ``[8, 128, 128]`` float32, k-last."""
    length = context_length(layer, seq)
    A_log, dt_bias = (p.astype(np.float64) for p in layer_params(layer))
    rng = _rng(2, layer, seq)
    keys = rng.standard_normal((length, NUM_Q_HEADS, HEAD_SIZE))
    values = rng.standard_normal((length, NUM_V_HEADS, HEAD_SIZE))
    a_in, b_in = rng.standard_normal((length, NUM_V_HEADS)), rng.standard_normal((length, NUM_V_HEADS))
    keys = keys / np.sqrt(_tree_sum_last(keys * keys))[..., None]
    keys = np.repeat(keys, NUM_V_HEADS // NUM_Q_HEADS, axis=1)  # GVA: q/k head h//2 serves v head h
    state = np.zeros((NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE))
    for t in range(length):
        g, beta = _token_gates(a_in[t], b_in[t], A_log, dt_bias)
        k_t = keys[t][:, None, :]  # [HV, 1, K]
        state *= g[:, None, None]
        u = _tree_sum_last(state * k_t)  # [HV, V]
        state += (beta[:, None] * (values[t] - u))[:, :, None] * k_t
    return state.astype(np.float32)


@dataclass(frozen=True)
class WorkloadRecipe:
    """How one workload of a set is assembled from the bank."""

    set_name: str
    index: int
    batch_size: int
    layer: int
    offset: int
    scale: float

    @property
    def uuid(self) -> str:
        return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"gdn-decode-bench/{BANK_VERSION}/{self.set_name}/{self.index}"))

    @property
    def bank_sequences(self) -> list[int]:
        return [(self.offset + j) % SEQS_PER_LAYER for j in range(self.batch_size)]

    @property
    def blob_path(self) -> str:
        """Path of the workload's safetensors file, relative to the dataset root."""
        return f"blob/{DEFINITION_NAME}/{self.set_name}/{self.uuid}.safetensors"


def set_recipes(set_name: str) -> list[WorkloadRecipe]:
    """The recipes of a named set (see ``SET_BATCH_SIZES``).

    Workload ``i`` uses layer ``i % 4``; its bank offset walks so that the 20
    single-sequence contest-v1 workloads use 20 distinct sequences. The first
    workload of each set passes ``scale = 0`` to exercise the "0 means
    1/sqrt(128)" convention; the rest pass ``1/sqrt(128)`` explicitly.

    Raises:
        KeyError: unknown set name.
    """
    sizes = SET_BATCH_SIZES[set_name]
    return [
        WorkloadRecipe(set_name, i, b, layer=i % NUM_LAYERS, offset=(5 * (i // NUM_LAYERS)) % SEQS_PER_LAYER,
                       scale=0.0 if i == 0 else DEFAULT_SCALE)
        for i, b in enumerate(sizes)
    ]


def workload_json(recipe: WorkloadRecipe) -> dict:
    """The flashinfer-bench workload object for a recipe."""
    blob = {"type": "safetensors", "path": recipe.blob_path}
    inputs = {name: {"type": "random"} for name in ("q", "k", "v", "a", "b")}
    inputs.update({name: dict(blob, tensor_key=name) for name in ("state", "A_log", "dt_bias")})
    inputs["scale"] = {"type": "scalar", "value": recipe.scale}
    return {"uuid": recipe.uuid, "axes": {"batch_size": recipe.batch_size}, "inputs": inputs}


def sha256(array: np.ndarray) -> str:
    """SHA-256 of an array's raw little-endian bytes (C order)."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


class Bank:
    """Bank sequence states, computed once and cached as safetensors files."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir)
        self.dir = self.cache_dir / "bank" / BANK_VERSION

    def path(self, layer: int, seq: int) -> Path:
        return self.dir / f"layer{layer}_seq{seq:02d}.safetensors"

    def state(self, layer: int, seq: int) -> np.ndarray:
        from safetensors.numpy import load_file, save_file

        path = self.path(layer, seq)
        if path.exists():
            return load_file(path)["state"]
        state = sequence_state(layer, seq)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # processes of fill() may race for one state
        save_file({"state": state}, tmp)
        tmp.replace(path)  # atomic: a killed run never leaves a half-written file
        return state

    def fill(self, recipes: list["WorkloadRecipe"], processes: int | None = None) -> None:
        """Compute the bank states ``recipes`` need and the cache lacks, in parallel processes.

        Each state is a sequential recurrence over thousands of tokens in numpy (about 0.2 s on
        one core), so a fresh machine's contest-v2 took 21 s on one core; the states are
        independent, so ``python -m harness.data.generator bank --states ...`` processes share
        them out (fresh interpreters that import numpy only: the caller holds threads and may
        hold CUDA, and a ``spawn`` pool would import the caller's main module, torch included).

        Raises:
            RuntimeError: a process failed (its error is on stderr).
        """
        needed = sorted({(r.layer, s) for r in recipes for s in r.bank_sequences
                         if not self.path(r.layer, s).exists()})
        processes = min(len(needed), processes or os.cpu_count() or 1)
        if processes <= 1:
            for layer, seq in needed:
                self.state(layer, seq)
            return
        package_root = str(Path(__file__).resolve().parents[2])  # where ``harness`` is importable from
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p))
        children = [subprocess.Popen([sys.executable, "-m", "harness.data.generator", "bank", "--cache", str(self.cache_dir),
                                      "--states", *(f"{layer},{seq}" for layer, seq in needed[i::processes])], env=env)
                    for i in range(processes)]
        failed = [child.args for child in children if child.wait() != 0]
        if failed:
            raise RuntimeError(f"computing bank states failed: {' '.join(failed[0])}")


def workload_tensors(recipe: WorkloadRecipe, bank: Bank) -> dict[str, np.ndarray]:
    """``state [B,8,128,128]``, ``A_log [8]``, ``dt_bias [8]`` for a recipe."""
    A_log, dt_bias = layer_params(recipe.layer)
    state = np.stack([bank.state(recipe.layer, s) for s in recipe.bank_sequences])
    return {"state": state, "A_log": A_log, "dt_bias": dt_bias}


def materialize(recipe: WorkloadRecipe, root: Path, bank: Bank, checksums: dict | None) -> Path:
    """Write the recipe's safetensors file under ``root`` if missing.

    Raises:
        RuntimeError: a generated tensor does not match its recorded checksum
            (the machine does not reproduce the data bit for bit).
    """
    from safetensors.numpy import save_file

    path = Path(root) / recipe.blob_path
    if path.exists():
        return path
    tensors = workload_tensors(recipe, bank)
    expected = (checksums or {}).get(recipe.uuid)
    if expected is not None:
        for name, array in tensors.items():
            if sha256(array) != expected[name]:
                raise RuntimeError(f"workloads/checksums.json: tensor '{name}' of workload {recipe.uuid} "
                                   f"({recipe.set_name}#{recipe.index}) does not match its recorded checksum")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file(tensors, tmp)
    tmp.replace(path)
    return path


def write_sets(workloads_dir: Path, bank: Bank) -> None:
    """Regenerate the set JSONL files and ``checksums.json`` (maintainers only)."""
    checksums = {}
    for set_name in SET_BATCH_SIZES:
        recipes = set_recipes(set_name)
        lines = [json.dumps(workload_json(r)) for r in recipes]
        (workloads_dir / f"{set_name}.jsonl").write_text("\n".join(lines) + "\n")
        for r in recipes:
            checksums[r.uuid] = {n: sha256(a) for n, a in workload_tensors(r, bank).items()}
    (workloads_dir / "checksums.json").write_text(json.dumps(checksums, indent=1, sort_keys=True) + "\n")


def main() -> None:
    from harness.paths import cache_dir

    parser = argparse.ArgumentParser(description="Regenerate workload sets and checksums, or compute bank states.")
    parser.add_argument("command", choices=["write-sets", "bank"])
    parser.add_argument("--cache", type=Path, default=None, help="cache folder (default: the harness's)")
    parser.add_argument("--states", nargs="*", metavar="LAYER,SEQ",
                        help="bank: only these states (Bank.fill's processes); default every state")
    args = parser.parse_args()
    bank = Bank(args.cache or cache_dir())
    if args.command == "bank":
        states = ([tuple(map(int, pair.split(","))) for pair in args.states] if args.states is not None
                  else [(layer, seq) for layer in range(NUM_LAYERS) for seq in range(SEQS_PER_LAYER)])
        for layer, seq in states:
            bank.state(layer, seq)
    else:
        write_sets(WORKLOADS_DIR, bank)


if __name__ == "__main__":
    main()
