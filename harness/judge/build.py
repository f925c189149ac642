"""Build, cache and load the CUDA solutions as apache-tvm-ffi modules.

A CUDA solution is a folder holding ``kernel.cu`` (plus optional local
headers). The kernel exports its entry points with
``TVM_FFI_DLL_EXPORT_TYPED_FUNC`` taking ``tvm::ffi::TensorView`` arguments,
which is the form flashinfer-bench loads, so the same ``kernel.cu`` can be
submitted unchanged. This module turns it into a shared library and loads it
with ``tvm_ffi.load_module``; calling its functions with torch tensors makes
tvm-ffi publish torch's current CUDA stream, which the kernels launch on.

Why nvcc is invoked directly instead of ``tvm_ffi.cpp.build``
(apache-tvm-ffi 0.1.15.post2, the version on the GPU host):

* ``tvm_ffi.cpp.build`` always prepends ``-O2`` plus one ``-gencode`` taken
  from ``TVM_FFI_CUDA_ARCH_LIST`` or from ``nvidia-smi`` (the build machine's
  GPU). We want a fixed fat binary (sm_90a + sm_100a cubins + portable PTX)
  that does not depend on which GPU, if any, the build runs on, so that the
  CI compile test on a GPU-less machine checks exactly the shipped flags.
* Its cache key hashes sources and flags but not the nvcc version, and its
  default cache lives outside this project's cache directory.
* It needs the ``ninja`` executable, which a sealed GPU host may lack
  (``torch.utils.cpp_extension.load`` needs it too, so it is no better).

The product is the same kind of library ``tvm_ffi.cpp.build`` makes (tvm-ffi
headers, linked to ``libtvm_ffi``), built with one nvcc command that
:func:`nvcc_command` spells out and the tests reuse. The CUDA runtime is
linked statically (nvcc's default) so that loading the library never has to
find a ``libcudart.so`` of the right major version; kernels still launch on
torch's stream because stream handles belong to the driver context, which
both runtimes share (the primary context).

Cache layout::

    ${GDN_BENCH_CACHE:-~/.cache/gdn-decode-bench}/cuda/<solution>-<key>/
        <solution>.so     the module
        build.json        the command, nvcc version and key inputs (debugging)

``<key>`` hashes the source texts, the nvcc flags (which name every target
architecture), the nvcc version and the tvm-ffi version, so editing a kernel,
changing flags or upgrading the toolkit rebuilds, and nothing else does. A
file lock serializes concurrent builders and the library is renamed into
place atomically, so a reader never sees a half-written file.

Accuracy flags: no ``--use_fast_math``. The kernels are bound by DRAM traffic
(or latency at B=1); the only transcendental work is a handful of expf/log1pf
per thread for the gates, so fast-math would save nothing measurable while
making ``g = exp(-exp(A_log) * softplus(.))`` less exact.
"""

from __future__ import annotations

from harness.errors import SolutionUnsupported
from harness.paths import cache_dir

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "CompileError",
    "UnsupportedGpuError",
    "DEFAULT_TARGETS",
    "MIN_COMPUTE_CAPABILITY",
    "build_solution",
    "build_torch_extension",
    "cache_key",
    "cache_root",
    "compile_only",
    "CubinBuild",
    "cubin_build",
    "cubin_kernel_code",
    "find_nvcc",
    "gencode_flags",
    "KernelResources",
    "kernel_code",
    "kernel_resources",
    "load_cuda_solution",
    "nvcc_command",
    "nvcc_flags",
    "nvcc_version",
    "require_supported_gpu",
    "tvm_ffi_paths",
]

#: ``(virtual arch, real code)`` pairs passed as ``-gencode``. sm_90a runs on
#: H100/H200 only and sm_100a on B200/GB200 only (arch-specific cubins are not
#: portable even within a major version), so both are built. The last entry
#: embeds plain compute_90 PTX, which the driver JIT-compiles on any newer GPU
#: (e.g. B300 = sm_103, RTX 50 = sm_120); "a" PTX would be useless there
#: because arch-specific PTX only runs on its exact architecture.
DEFAULT_TARGETS: tuple[tuple[str, str], ...] = (
    ("compute_90a", "sm_90a"),
    ("compute_100a", "sm_100a"),
    ("compute_90", "compute_90"),
)

#: Where the CUDA toolkit is looked for when neither $CUDA_HOME nor PATH has nvcc.
FALLBACK_CUDA_HOME = "/usr/local/cuda"

#: Oldest GPU the kernels are built for (Hopper).
MIN_COMPUTE_CAPABILITY = (9, 0)

_BASE_FLAGS = (
    "-O3",
    "-std=c++17",
    "-lineinfo",  # source lines for Nsight Compute; no effect on the SASS
    "-DNDEBUG",
    "-Xcompiler=-fPIC",  # the objects go into a shared library
    "--threads=0",  # compile the -gencode targets in parallel (one thread per core)
)


class CompileError(RuntimeError):
    """nvcc or tvm-ffi is missing, or nvcc rejected a source."""


class UnsupportedGpuError(SolutionUnsupported):
    """No CUDA GPU, or one older than :data:`MIN_COMPUTE_CAPABILITY`.

    The harness reports a solution that raises this as SKIPPED.
    """


# --------------------------------------------------------------------------
# Pure helpers (no GPU, no compiler needed)
# --------------------------------------------------------------------------

def gencode_flags(targets: Sequence[tuple[str, str]] = DEFAULT_TARGETS) -> list[str]:
    """``-gencode=arch=X,code=Y`` flags for ``(virtual arch, real code)`` pairs."""
    return [f"-gencode=arch={arch},code={code}" for arch, code in targets]


def nvcc_flags(targets: Sequence[tuple[str, str]] = DEFAULT_TARGETS, defines: Sequence[str] = ()) -> list[str]:
    """Every nvcc flag that affects the generated code (part of the cache key); ``defines``
    are preprocessor macros (``-D``), e.g. cuda-v4's GDN_V4_ALL_VARIANTS for its tuner."""
    return [*_BASE_FLAGS, *gencode_flags(targets), *(f"-D{d}" for d in defines)]


def nvcc_command(nvcc: str, sources: Sequence[str | os.PathLike], output: str | os.PathLike, *,
                 include_dirs: Sequence[str | os.PathLike] = (),
                 lib_dir: str | os.PathLike | None = None,
                 targets: Sequence[tuple[str, str]] = DEFAULT_TARGETS,
                 mode: str = "shared", defines: Sequence[str] = ()) -> list[str]:
    """The argv of one nvcc invocation.

    Args:
        nvcc: path of the nvcc executable.
        sources: ``.cu`` files.
        output: file to write.
        include_dirs: ``-I`` directories (the tvm-ffi and dlpack headers).
        lib_dir: directory of ``libtvm_ffi.so``; linked, and put on the
            library's rpath, in ``"shared"`` mode.
        targets: ``(virtual arch, real code)`` pairs.
        defines: preprocessor macros (``-D``).
        mode: ``"shared"`` compiles and links a loadable module; ``"object"``
            compiles only (``-c``), which checks host and device code of every
            target without linking (used by the CI compile test); ``"cubin"``
            compiles the device code of one target only (``-cubin``): ptxas's
            input is the same, and the host compiler's pass is skipped.

    Returns:
        The argument list for ``subprocess.run``.
    """
    if mode not in ("shared", "object", "cubin"):
        raise ValueError(f"mode must be 'shared', 'object' or 'cubin', not {mode!r}")
    cmd = [str(nvcc), *nvcc_flags(targets, defines)]
    cmd += [f"-I{d}" for d in include_dirs]
    if mode != "shared":
        if len(sources) != 1:
            raise ValueError(f"mode={mode!r} compiles exactly one source")
        cmd += ["-c" if mode == "object" else "-cubin", str(sources[0]), "-o", str(output)]
        return cmd
    cmd += ["-shared", *map(str, sources), "-o", str(output)]
    if lib_dir is not None:
        cmd += [f"-L{lib_dir}", "-ltvm_ffi", f"-Xlinker=-rpath={lib_dir}"]
    return cmd


def cache_key(source_texts: Mapping[str, str], flags: Sequence[str], nvcc_version_text: str,
              extra: Sequence[str] = ()) -> str:
    """Hex digest (16 chars) identifying one build.

    Args:
        source_texts: file name -> text of every source and local header; the
            names matter too (a renamed file is a different build).
        flags: the nvcc flags from :func:`nvcc_flags`.
        nvcc_version_text: output of ``nvcc --version``.
        extra: anything else the binary depends on (e.g. the tvm-ffi version).
    """
    digest = hashlib.sha256()

    def feed(tag: str, text: str) -> None:
        # Length-prefix every field so that no two different inputs can
        # concatenate to the same byte string.
        data = text.encode()
        digest.update(f"{tag}:{len(data)}:".encode())
        digest.update(data)

    for name in sorted(source_texts):
        feed("src-name", name)
        feed("src", source_texts[name])
    for flag in flags:
        feed("flag", flag)
    feed("nvcc", nvcc_version_text)
    for item in extra:
        feed("extra", item)
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    """``<the project's cache root>/cuda`` (:func:`harness.paths.cache_dir`)."""
    return cache_dir() / "cuda"


# --------------------------------------------------------------------------
# Toolchain discovery
# --------------------------------------------------------------------------

def find_nvcc() -> str:
    """Path of nvcc: ``$CUDA_HOME/bin``, then ``PATH``, then :data:`FALLBACK_CUDA_HOME`.

    Raises:
        CompileError: none of them has an nvcc.
    """
    candidates = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "bin" / "nvcc")
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(Path(on_path))
    candidates.append(Path(FALLBACK_CUDA_HOME) / "bin" / "nvcc")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise CompileError(
        "CUDA solutions need nvcc (the CUDA toolkit, 12.8 or newer for sm_100a) but none was "
        f"found in $CUDA_HOME/bin, $CUDA_PATH/bin, on PATH or in {FALLBACK_CUDA_HOME}/bin")


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    """Full ``nvcc --version`` text (part of the cache key).

    Raises:
        CompileError: nvcc cannot be run.
    """
    try:
        done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise CompileError(f"cannot run {nvcc} --version: {exc}") from exc
    return done.stdout.strip()


def tvm_ffi_paths() -> tuple[list[str], str, str]:
    """``(include dirs, libtvm_ffi directory, tvm-ffi version)`` of the installed package.

    Raises:
        CompileError: apache-tvm-ffi is not installed.
    """
    try:
        import tvm_ffi  # noqa: PLC0415  (imports torch; keep it out of module import)
        from tvm_ffi import libinfo  # noqa: PLC0415
    except ImportError as exc:
        raise CompileError(
            "CUDA solutions need the apache-tvm-ffi package (import tvm_ffi): "
            f"pip install apache-tvm-ffi ({exc})") from exc
    includes = sorted({libinfo.find_include_path(), libinfo.find_dlpack_include_path()})
    lib_dir = str(Path(libinfo.find_libtvm_ffi()).parent)
    return includes, lib_dir, str(getattr(tvm_ffi, "__version__", "unknown"))


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------

def _run_nvcc(cmd: Sequence[str], what: str) -> str:
    """Run an nvcc command; return its combined output or raise CompileError with it."""
    done = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    log = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        raise CompileError(f"nvcc failed to build {what} (exit {done.returncode}).\n"
                           f"command: {' '.join(cmd)}\n{log}")
    return log


def compile_only(source: str | os.PathLike, out_dir: str | os.PathLike,
                 targets: Sequence[tuple[str, str]] = DEFAULT_TARGETS) -> Path:
    """Compile one ``.cu`` to an object file for every target; no GPU needed.

    This runs the full host and device pipeline (front end, ptxas for each
    cubin, PTX emission) with the shipped flags, so it fails exactly when
    the real build would fail to compile.

    Returns:
        The object file's path.

    Raises:
        CompileError: nvcc or tvm-ffi missing, or the source does not compile.
    """
    output = Path(out_dir) / (Path(source).stem + ".o")
    _compile_object(source, output, targets)
    return output


def _compile_object(source: str | os.PathLike, output: Path, targets: Sequence[tuple[str, str]],
                    extra_flags: Sequence[str] = (), defines: Sequence[str] = (), mode: str = "object") -> str:
    """nvcc -c (or -cubin: ``mode``) ``source`` -> ``output`` with the shipped flags plus
    ``extra_flags``; returns nvcc's output (raises CompileError)."""
    includes, _, _ = tvm_ffi_paths()
    cmd = nvcc_command(find_nvcc(), [source], output, include_dirs=includes, targets=targets, mode=mode,
                       defines=defines)
    return _run_nvcc([*cmd, *extra_flags], str(source))


class KernelResources(NamedTuple):
    """What ptxas reports for one kernel (per thread)."""

    registers: int
    spill_store_bytes: int
    spill_load_bytes: int


_PTXAS_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")


def parse_ptxas_report(log: str) -> dict[str, KernelResources]:
    """Mangled kernel name -> its resources, from ``ptxas -v`` output of one target.

    Raises:
        ValueError: the log names no kernel, or a kernel without its register line.
    """
    found: dict[str, KernelResources] = {}
    kernel, spills = None, (0, 0)
    for line in log.splitlines():
        if entry := _PTXAS_ENTRY.search(line):
            kernel, spills = entry.group(1), (0, 0)
        elif spill := _PTXAS_SPILLS.search(line):
            spills = (int(spill.group(1)), int(spill.group(2)))
        elif kernel and (used := _PTXAS_REGISTERS.search(line)):
            found[kernel] = KernelResources(int(used.group(1)), *spills)
            kernel = None
    if not found or kernel is not None:
        raise ValueError(f"no complete ptxas resource report in:\n{log[-2000:]}")
    return found


class CubinBuild(NamedTuple):
    """One cubin build of a source for one target: each kernel's machine code and resources."""

    code: dict[str, bytes]  #: mangled kernel name -> its machine code (:func:`cubin_kernel_code`)
    resources: dict[str, KernelResources]  #: mangled kernel name -> what ptxas reports


def cubin_build(source: str | os.PathLike, target: tuple[str, str] = ("compute_90a", "sm_90a"),
                defines: Sequence[str] = ()) -> CubinBuild:
    """Machine code and ptxas's resource report of every kernel in ``source`` for one cubin
    target, from one nvcc run with the shipped flags, ``defines`` and ``-Xptxas -v`` (a report
    only: the code is what the same build without it makes); no GPU needed.

    Raises:
        CompileError: nvcc or tvm-ffi missing, or the source does not compile.
    """
    # Device code only (-cubin): ptxas's input is the shipped build's, without the host
    # compiler's pass (a third of the time of cuda-v4's all-variants build).
    with tempfile.TemporaryDirectory() as out_dir:
        cubin = Path(out_dir) / "kernel.cubin"
        log = _compile_object(source, cubin, [target], extra_flags=("-Xptxas", "-v"), defines=defines, mode="cubin")
        return CubinBuild(cubin_kernel_code(cubin.read_bytes()), parse_ptxas_report(log))


def kernel_resources(source: str | os.PathLike, target: tuple[str, str] = ("compute_90a", "sm_90a"),
                     defines: Sequence[str] = ()) -> dict[str, KernelResources]:
    """Registers and spills of every kernel in ``source`` for one cubin target
    (:func:`cubin_build`'s ``resources``); no GPU needed.

    Returns:
        Mangled kernel name -> :class:`KernelResources`.

    Raises:
        CompileError: nvcc or tvm-ffi missing, or the source does not compile.
    """
    return cubin_build(source, target, defines).resources


def cubin_kernel_code(cubin: bytes) -> dict[str, bytes]:
    """Mangled kernel name -> its machine code (the ``.text.<name>`` section's bytes) in an ELF64
    cubin, as nvcc writes it for one target: two builds whose kernel has the same bytes run the
    same instructions.

    Raises:
        ValueError: not an ELF64 little-endian file, or section headers out of its bounds.
    """
    import struct

    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not an ELF64 little-endian cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    if shoff + shnum * shentsize > len(cubin) or shstrndx >= shnum:
        raise ValueError("cubin section headers lie outside the file")

    def section(index: int) -> tuple[int, int, int]:  # (name offset, data offset, size)
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", cubin, shoff + index * shentsize)
        return name, offset, size

    _, names_at, _ = section(shstrndx)
    code = {}
    for index in range(shnum):
        name_at, offset, size = section(index)
        name = cubin[names_at + name_at:cubin.index(b"\0", names_at + name_at)].decode()
        if name.startswith(".text."):
            code[name[len(".text."):]] = cubin[offset:offset + size]
    return code


def kernel_code(source: str | os.PathLike, target: tuple[str, str] = ("compute_90a", "sm_90a"),
                defines: Sequence[str] = ()) -> dict[str, bytes]:
    """Mangled kernel name -> machine code of every kernel in ``source`` for one cubin target
    (:func:`cubin_build`'s ``code``); no GPU needed.

    Raises:
        CompileError: nvcc or tvm-ffi missing, or the source does not compile.
    """
    return cubin_build(source, target, defines).code


#: Suffixes of the headers a CUDA solution's sources may include from their own folder.
HEADER_SUFFIXES = (".cuh", ".h", ".hpp")


def local_headers(solution_dir: Path) -> list[str]:
    """Names of the headers directly in ``solution_dir`` (sorted): what its sources may
    ``#include "..."``, so part of the build's cache key and of a packed submission."""
    return sorted(p.name for p in Path(solution_dir).iterdir() if p.suffix in HEADER_SUFFIXES and p.is_file())


def _source_texts(solution_dir: Path, sources: Sequence[str], headers: Sequence[str] | None = None) -> dict[str, str]:
    """Texts of the listed sources plus every file they may include: ``headers`` (paths in the
    folder), by default the local headers (:func:`local_headers`)."""
    names = set(sources) | set(local_headers(solution_dir) if headers is None else headers)
    texts = {}
    for name in sorted(names):
        path = solution_dir / name
        if not path.is_file():
            raise CompileError(f"{path} does not exist")
        texts[name] = path.read_text()
    return texts


def build_solution(solution_dir: str | os.PathLike, sources: Sequence[str] = ("kernel.cu",),
                   targets: Sequence[tuple[str, str]] = DEFAULT_TARGETS, defines: Sequence[str] = (),
                   headers: Sequence[str] | None = None) -> Path:
    """Build the solution's module unless the cache already holds it.

    Args:
        solution_dir: the solution folder; its name names the cache entry.
        sources: ``.cu`` files in that folder (a contest entry's ``.cpp`` too), compiled into one module.
        targets: ``(virtual arch, real code)`` pairs.
        defines: preprocessor macros (``-D``; part of the cache key).
        headers: the other files the sources may include (part of the cache key); default the
            headers directly in the folder (:func:`local_headers`).

    Returns:
        Path of the cached ``<solution>.so``.

    Raises:
        CompileError: nvcc or tvm-ffi missing, or compilation failed.
    """
    solution_dir = Path(solution_dir).resolve()
    name = solution_dir.name
    nvcc = find_nvcc()
    includes, lib_dir, ffi_version = tvm_ffi_paths()
    texts = _source_texts(solution_dir, sources, headers)
    flags = nvcc_flags(targets, defines)
    version = nvcc_version(nvcc)
    # The library directory is baked into the rpath, so it is part of the key too.
    key = cache_key(texts, flags, version, extra=[f"tvm_ffi={ffi_version}", f"lib={lib_dir}"])
    entry = cache_root() / f"{name}-{key}"
    library = entry / f"{name}.so"
    if library.is_file():  # fast path: no lock, the file is only ever renamed into place
        return library

    entry.mkdir(parents=True, exist_ok=True)
    with open(entry / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same entry
        if library.is_file():
            return library
        # Compile from the solution folder so that local #includes resolve;
        # write to a temporary name, then rename: readers never see a partial file.
        fd, tmp_name = tempfile.mkstemp(dir=entry, suffix=".so.tmp")
        os.close(fd)
        cmd = nvcc_command(nvcc, [solution_dir / s for s in sources], tmp_name,
                           include_dirs=[solution_dir, *includes], lib_dir=lib_dir,
                           targets=targets, mode="shared", defines=defines)
        try:
            log = _run_nvcc(cmd, f"solution {name}")
            os.replace(tmp_name, library)
        finally:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)
        record = {"command": cmd, "nvcc_version": version, "tvm_ffi": ffi_version,
                  "sources": sorted(texts), "key": key, "log": log}
        (entry / "build.json").write_text(json.dumps(record, indent=2))
    return library


def _torch_build_function():
    """``torch.utils.cpp_extension``'s build of an extension that does not import it (the step
    ``load`` takes before its import), with the keywords this torch accepts.

    Raises:
        CompileError: this torch has no such function.
    """
    import inspect

    from torch.utils import cpp_extension  # noqa: PLC0415

    build = getattr(cpp_extension, "_write_ninja_file_and_build_library", None)
    if build is None:
        raise CompileError("this torch's cpp_extension has no _write_ninja_file_and_build_library: a torch-binding "
                           "entry cannot be built without importing it, which the judge never does")
    accepted = set(inspect.signature(build).parameters)
    return lambda **kwargs: build(**{k: v for k, v in kwargs.items() if k in accepted})


def build_torch_extension(solution_dir: str | os.PathLike, sources: Sequence[str], name: str,
                          with_cuda: bool = True) -> Path:
    """Build a contest entry with ``binding = "torch"`` as flashinfer-bench's ``TorchBuilder`` does
    (``torch.utils.cpp_extension`` with its default flags, the folder on the include path), without
    importing the result: the judge runs none of an entry's code. Cached like
    :func:`build_solution`, under ``<cache>/torch/<name>-<key>/<name>.so``.

    Args:
        solution_dir: the entry's sources, as its Solution lays them out.
        sources: the files compiled (``.cu``, ``.cpp``, ...), relative to ``solution_dir``.
        name: the extension's module name (its ``PyInit_`` symbol, ``TORCH_EXTENSION_NAME``).
        with_cuda: compile ``.cu`` files with nvcc and link the CUDA libraries.

    Raises:
        CompileError: a CPU-only torch, no CUDA toolkit or ninja, or the build failed (its log).
    """
    import torch  # noqa: PLC0415
    from torch.utils import cpp_extension  # noqa: PLC0415

    if with_cuda and torch.version.cuda is None:
        raise CompileError(f"torch {torch.__version__} is a CPU-only build: a CUDA entry with binding 'torch' "
                           "links against torch's CUDA libraries and cannot be built here")
    if with_cuda and cpp_extension.CUDA_HOME is None:
        raise CompileError("torch finds no CUDA toolkit (set CUDA_HOME): a torch-binding CUDA entry cannot be built")
    solution_dir = Path(solution_dir).resolve()
    texts = {p.relative_to(solution_dir).as_posix(): p.read_text() for p in sorted(solution_dir.rglob("*"))
             if p.is_file()}
    toolchain = nvcc_version(find_nvcc()) if with_cuda else ""
    flags = [f"torch={torch.__version__}", f"cuda={torch.version.cuda}", f"with_cuda={with_cuda}",
             f"arch={os.environ.get('TORCH_CUDA_ARCH_LIST', '')}"]
    entry = cache_root().parent / "torch" / f"{name}-{cache_key(texts, flags, toolchain)}"
    library = entry / f"{name}.so"
    if library.is_file():
        return library
    build = _torch_build_function()
    entry.mkdir(parents=True, exist_ok=True)
    with open(entry / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if library.is_file():
            return library
        work = Path(tempfile.mkdtemp(dir=entry, prefix="build-"))
        try:
            build(name=name, sources=[str(solution_dir / s) for s in sources], extra_cflags=None,
                  extra_cuda_cflags=None, extra_sycl_cflags=None, extra_ldflags=None,
                  extra_include_paths=[str(solution_dir)], build_directory=str(work), verbose=False,
                  with_cuda=with_cuda, with_sycl=False, is_standalone=False)
            os.replace(work / f"{name}.so", library)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:  # ninja's failure carries the log
            raise CompileError(f"torch's extension build of {name} failed: {str(exc)[-4000:]}") from exc
        finally:
            shutil.rmtree(work, ignore_errors=True)
        (entry / "build.json").write_text(json.dumps({"name": name, "sources": list(sources), "flags": flags,
                                                      "nvcc_version": toolchain}, indent=2))
    return library


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------

def require_supported_gpu(device_index: int | None = None) -> tuple[int, int]:
    """Check that the (current) CUDA device can run the kernels.

    Returns:
        Its compute capability ``(major, minor)``.

    Raises:
        UnsupportedGpuError: torch sees no CUDA device, or its compute
            capability is below :data:`MIN_COMPUTE_CAPABILITY`.
    """
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available():
        raise UnsupportedGpuError("CUDA solutions need a CUDA GPU; torch sees none")
    index = torch.cuda.current_device() if device_index is None else device_index
    capability = torch.cuda.get_device_capability(index)
    if capability < MIN_COMPUTE_CAPABILITY:
        need = "%d.%d" % MIN_COMPUTE_CAPABILITY
        raise UnsupportedGpuError(
            f"{torch.cuda.get_device_name(index)} has compute capability "
            f"{capability[0]}.{capability[1]}; the CUDA solutions are built for {need} (Hopper) "
            "and newer")
    return capability


def load_cuda_solution(solution_dir: str | os.PathLike, sources: Sequence[str] = ("kernel.cu",),
                       check_gpu: bool = True):
    """Build (or fetch from the cache) and load a CUDA solution.

    Args:
        solution_dir: the solution folder.
        sources: its ``.cu`` files.
        check_gpu: first check the current GPU with :func:`require_supported_gpu`
            (turn off only to inspect a module on a machine without a GPU).

    Returns:
        The ``tvm_ffi.Module``; its exported functions are attributes
        (``module.gdn_decode(...)``).

    Raises:
        UnsupportedGpuError: see :func:`require_supported_gpu`.
        CompileError: see :func:`build_solution`.
    """
    if check_gpu:
        require_supported_gpu()
    library = build_solution(solution_dir, sources)
    import tvm_ffi  # noqa: PLC0415

    return tvm_ffi.load_module(str(library))
