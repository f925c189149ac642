"""Test set-up shared by all tests.

On a machine without a GPU, Triton kernels run under the Triton interpreter;
the variable must be set before triton is first imported, hence here.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
#: Where a Triton kernel's tensors must lie in this session: on the CPU under the interpreter,
#: else on the GPU (compiled Triton refuses CPU tensors: "Pointer argument ... cannot be accessed").
TRITON_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
TRITON_DEVICE = "cpu" if TRITON_INTERPRETED else "cuda"

# Tests never write into the user's cache (~/.cache/gdn-decode-bench): generated
# tensors and builds go to a folder of this test session (inherited by the
# processes the tests start), unless GDN_BENCH_CACHE names one on purpose.
#: Names the folder this session made, beside GDN_BENCH_CACHE, so that pytest-xdist's workers
#: (which inherit both) know it for the session's too and share its builds.
SESSION_CACHE_ENV = "GDN_BENCH_TEST_SESSION_CACHE"
if "GDN_BENCH_CACHE" not in os.environ:
    import atexit

    os.environ["GDN_BENCH_CACHE"] = os.environ[SESSION_CACHE_ENV] = tempfile.mkdtemp(prefix="gdn-bench-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GDN_BENCH_CACHE"], ignore_errors=True)
# Nor into the user's set-aside folder (harness.paths.set_aside_root), where a run's file vault moves what
# it takes out of the checkout: the attack set's fixtures spoil files on purpose. The tests' runs move it to
# one folder under the system's temporary folder instead, which outlives the session, so a file a person
# saved into results/ while the tests judged can still be found there.
os.environ.setdefault("GDN_BENCH_SET_ASIDE", str(Path(tempfile.gettempdir()) / "gdn-bench-test-set-aside"))
#: That folder when this session made it (empty at the start), in the controller and its
#: xdist workers alike; None where the user named a cache.
SESSION_CACHE = (Path(os.environ["GDN_BENCH_CACHE"])
                 if os.environ.get(SESSION_CACHE_ENV) == os.environ["GDN_BENCH_CACHE"] else None)

REPO = Path(__file__).resolve().parent.parent
FIXTURE_SOLUTIONS = Path(__file__).resolve().parent / "fixtures" / "solutions"
#: The contest's official definition file, as flashinfer-trace ships it. A copy
#: is kept under fixtures/ so that CI (which has no ../shared) runs the
#: comparison; where ../shared/contest holds the original, a test checks the
#: copy is byte-identical.
SHARED_OFFICIAL_DEFINITION = REPO.parent / "shared" / "contest" / "gdn_decode_qk4_v8_d128_k_last.json"
OFFICIAL_DEFINITION = Path(__file__).resolve().parent / "fixtures" / "official" / "gdn_decode_qk4_v8_d128_k_last.json"


@pytest.fixture(scope="session")
def our_definition():
    from harness.data.dataset import OUR_DEFINITION
    from harness.data.definition import load_definition

    return load_definition(OUR_DEFINITION)


def write_small_dataset(root: Path, batch_sizes=(1, 2), scales=(0.0, 0.08838834764831845)) -> Path:
    """A tiny external dataset in flashinfer-bench's layout, all inputs random."""
    from support.definition import tensor_input_names

    from harness.data.dataset import OUR_DEFINITION

    (root / "definitions" / "gdn").mkdir(parents=True)
    (root / "workloads" / "gdn").mkdir(parents=True)
    shutil.copy(OUR_DEFINITION, root / "definitions" / "gdn" / OUR_DEFINITION.name)
    names = tensor_input_names()
    lines = []
    for i, (batch, scale) in enumerate(zip(batch_sizes, scales)):
        inputs = {n: {"type": "random"} for n in names}
        inputs["scale"] = {"type": "scalar", "value": scale}
        lines.append(json.dumps({"uuid": f"small-{i}", "axes": {"batch_size": batch}, "inputs": inputs}))
    (root / "workloads" / "gdn" / "gdn_decode_qk4_v8_d128_k_last.jsonl").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def small_dataset(tmp_path):
    return write_small_dataset(tmp_path / "dataset")



def shared_cubin_build(folder: Path, defines: tuple[str, ...] = ()):
    """:func:`harness.judge.build.cubin_build` of ``folder/kernel.cu`` for sm_90a, made once per
    test run for every test that asks: the xdist workers share the session's build cache folder,
    where the first to ask compiles under a file lock and leaves the build, keyed as the harness's
    builds are (the folder's files, defines, nvcc), for the others. Skips without nvcc or tvm-ffi.

    Raises:
        CompileError: the source does not compile.
    """
    import fcntl
    import pickle

    from harness.judge import build
    from harness.paths import cache_dir

    try:
        nvcc_version = build.nvcc_version(build.find_nvcc())
        build.tvm_ffi_paths()
    except build.CompileError as exc:  # no toolchain here; a source that does not compile raises below
        pytest.skip(str(exc))
    sources = {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file()}
    key = build.cache_key(sources, defines, nvcc_version)
    shared = cache_dir() / "test-reports" / f"{folder.name}-cubin-{key}.pickle"
    shared.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker may be compiling it now
        if shared.is_file():
            return pickle.loads(shared.read_bytes())
        made = build.cubin_build(folder / "kernel.cu", defines=defines)
        shared.write_bytes(pickle.dumps(made))
        return made


@pytest.fixture(scope="session")
def cuda_v4_all_variants():
    """ptxas's report of cuda-v4's all-variants build (the tuner's, ``-DGDN_V4_ALL_VARIANTS``)
    for sm_90a: ``{(warps, rows, policy, lanes, passes, staged): KernelResources}``. Compiled once per test run
    (:func:`shared_cubin_build`; device code only: about 11 s on two cores). Skips without nvcc or tvm-ffi."""
    import re

    from tools.tune.cuda_v4 import KERNEL_NAME

    report = shared_cubin_build(REPO / "solutions" / "cuda-v4", ("GDN_V4_ALL_VARIANTS",)).resources
    # the fp32 state's kernels (the bf16 state's, named with ``t``, are the tables' variants only in this build)
    return {tuple(map(int, found.groups())): used for name, used in report.items()
            if (found := re.search(KERNEL_NAME, name))}
