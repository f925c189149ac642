"""The Modal Volume of ``run_modal.py``: the caches it keeps across runs, and the inputs it carries.

One Volume, :data:`VOLUME_NAME`, holds two things:

* ``gdn-bench/``: the project's cache root (``$GDN_BENCH_CACHE``,
  :func:`harness.paths.cache_dir`) exactly as on a local machine, so its
  entries keep their local keys: the generated workload tensors
  (``bank/<BANK_VERSION>/``, ``dataset/<set>/<uuid>.safetensors``, checked
  against ``workloads/checksums.json``) and the CUDA solutions' libraries
  (``cuda/<solution>-<key>/``, the key hashing the sources, the nvcc flags that
  name every target architecture, the nvcc version and the tvm-ffi version:
  :mod:`harness.judge.build`). Neither depends on which GPU ran it.
* ``uploads/<kind>/<key>/``: a local dataset folder (``--workloads PATH``) or
  the selected solutions of ``--solutions DIR``, under the SHA-256 of their
  files (:func:`content_key`), so an unchanged folder is uploaded once.

Only trusted code writes the Volume. A solution is untrusted and the Volume
outlives its container, so what a solution could write there would reach every
later run. So the *prepare* container (no solution code runs in it: it opens
the dataset, generating tensors, and compiles the CUDA libraries) mounts it
writable and commits it; the judging containers mount it read-only and see
its cache through a container-local tree of links (:func:`link_cache`), in
which a judge writes what it still lacks, thrown away with the container.

Worker-side JIT caches are not kept: the judge gives each solution process a
private Triton cache and deletes it afterwards (docs/judging.md, promise 6),
and FlashInfer's and the CuTe DSL's compiled kernels are written by the
solution's own process; a shared copy of either could be spoiled by one
solution for another.

No ``modal`` import here: the layout and keys are plain functions, tested
without Modal.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

#: The Volume's name on Modal (``modal volume delete gdn-decode-bench-cache`` clears it).
VOLUME_NAME = "gdn-decode-bench-cache"
#: Where the prepare container mounts the Volume, writable.
WRITABLE_MOUNT = "/cache"
#: Where the judging containers mount it, read-only.
READ_ONLY_MOUNT = "/cache-ro"
#: The project's cache root inside the Volume.
CACHE_SUBDIR = "gdn-bench"
#: Uploaded datasets and solution folders inside the Volume.
UPLOADS_SUBDIR = "uploads"
#: Names a judge writes in place on use (a build's lock, a tensor's check stamp,
#: a half-written file): a read-only link to them would make that write fail.
NOT_LINKED = ("lock", "*.verified", "*.tmp")


def cache_env(mount: str | Path) -> dict[str, str]:
    """The environment that points the project's cache root into the Volume mounted at ``mount``."""
    return {"GDN_BENCH_CACHE": str(PurePosixPath(mount) / CACHE_SUBDIR)}


def link_cache(volume_cache: Path, local_cache: Path) -> int:
    """Mirror ``volume_cache`` (the read-only Volume's cache root) into ``local_cache``: its
    folders made, each file a symlink, except :data:`NOT_LINKED`. A judge pointed at
    ``local_cache`` then reads every cached entry and writes new ones locally. Returns the
    number of links (0 when the Volume holds no cache yet)."""
    local_cache.mkdir(parents=True, exist_ok=True)
    if not volume_cache.is_dir():
        return 0
    links = 0
    for folder, _, files in os.walk(volume_cache):
        target = local_cache / Path(folder).relative_to(volume_cache)
        target.mkdir(exist_ok=True)
        for name in files:
            if not any(PurePosixPath(name).match(pattern) for pattern in NOT_LINKED) and not (target / name).exists():
                (target / name).symlink_to(Path(folder) / name)
                links += 1
    return links


def use_container_cache(mount: str | Path, local_cache: Path | None = None) -> Path:
    """Point this process's cache root (``$GDN_BENCH_CACHE``, read by
    :func:`harness.paths.cache_dir` at each use) at ``local_cache`` (a new temporary
    folder if None), a tree of links to the cache of the read-only Volume mounted at
    ``mount`` (:func:`link_cache`): what the container's code writes stays in the
    container. The one set-up of every container where solutions run. Returns the folder."""
    import tempfile

    local = Path(local_cache) if local_cache else Path(tempfile.mkdtemp(prefix="gdn-cache-"))
    link_cache(Path(cache_env(mount)["GDN_BENCH_CACHE"]), local)
    os.environ["GDN_BENCH_CACHE"] = str(local)
    return local


def content_key(files: dict[str, bytes | Path]) -> str:
    """SHA-256 (16 hex digits) of ``{relative POSIX path: content or local file}``: names and contents."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{len(name)}:{name}".encode())
        digest.update(file_hash(files[name]))
    return digest.hexdigest()[:16]


def file_hash(content: bytes | Path) -> bytes:
    """SHA-256 of bytes, or of a file read in chunks (a dataset's tensors need not fit in memory)."""
    if isinstance(content, bytes):
        return hashlib.sha256(content).digest()
    with open(content, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").digest()


@dataclass(frozen=True)
class Upload:
    """Local files to carry to the containers: ``kind`` (``dataset`` or ``solutions``),
    ``files`` (relative POSIX path -> content, or the local file holding it) and their
    :func:`content_key`, taken once (:meth:`of`): a file changed before it is sent no
    longer matches, which the prepare container finds (:func:`verify_upload`)."""

    kind: str
    files: dict[str, bytes | Path]
    key: str

    @classmethod
    def of(cls, kind: str, files: dict[str, bytes | Path]) -> Upload:
        return cls(kind, files, content_key(files))

    @property
    def volume_path(self) -> str:
        """Its folder, relative to the Volume's root."""
        return f"{UPLOADS_SUBDIR}/{self.kind}/{self.key}"

    def container_path(self, mount: str | Path) -> str:
        """Its folder in a container that mounts the Volume at ``mount``."""
        return str(PurePosixPath(mount) / self.volume_path)


def dataset_upload(spec: str) -> Upload | None:
    """What ``--workloads spec`` needs carried: None for one of our named sets (the image
    has them), else the external dataset folder's files (:func:`harness.data.dataset.external_files`).

    Raises:
        HarnessInputError: neither a set name nor a readable dataset folder (naming the file at fault).
    """
    from harness.data.dataset import SET_NAMES, external_files
    from harness.errors import HarnessInputError

    if spec in SET_NAMES:
        return None
    root = Path(spec)
    if not root.is_dir():
        raise HarnessInputError(spec, None, f"neither a workload set ({', '.join(SET_NAMES)}) "
                                            "nor a dataset directory")
    return Upload.of("dataset", {path.as_posix(): root / path for path in external_files(root)})


def solutions_upload(paths: list[Path]) -> Upload:
    """The selected solutions: each folder (a solution folder, a starter kit) as ``<name>/<file>``,
    every file the judge would snapshot of it (:func:`harness.judge.solutions.snapshot_files`), and
    each Solution JSON as its own file; a second path of the same name under ``again-<n>/`` (:func:`_free_top`)."""
    from harness.judge.solutions import snapshot_files

    files, tops = {}, set()
    for path in map(Path, paths):
        top = _free_top(path.name, tops)
        if path.is_file():
            files[top] = path.read_bytes()
        else:
            files.update({f"{top}/{name}": data for name, data in snapshot_files(path).items()})
    return Upload.of("solutions", files)


def _free_top(name: str, taken: set[str]) -> str:
    """``name``, or ``again-<n>/<name>`` where another selected path of that name came first: two entries
    ``a/entry.json`` and ``b/entry.json`` both travel (keyed by the bare name, the second replaced the first;
    the container finds a Solution JSON or a kit at any depth, by the name it states)."""
    top, n = name, 1
    while top.split("/")[0] in taken:
        n += 1
        top = f"again-{n}/{name}"
    taken.add(top.split("/")[0])
    return top


def verify_upload(mount: str | Path, volume_path: str) -> None:
    """Check that the upload at ``volume_path`` (:attr:`Upload.volume_path`) of the Volume mounted
    at ``mount`` still holds what its key was made of (an interrupted upload does not).

    Raises:
        ValueError: it does not, or is missing (naming the folder and how to clear it).
    """
    folder = Path(mount) / volume_path
    files = {path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*")) if path.is_file()}
    if not files or content_key(files) != PurePosixPath(volume_path).name:
        raise ValueError(f"{folder}: missing, or its files do not match their key (an interrupted upload?); "
                         f"clear it with `modal volume rm -r {VOLUME_NAME} /{volume_path}` and run again")


def container_args(workloads: str, options: str, dataset: Upload | None, solutions: Upload | None,
                   mount: str | Path) -> tuple[str, str]:
    """``(workloads, options)`` as a container that mounts the Volume at ``mount`` must pass
    them: an uploaded dataset's folder for ``workloads``, and for uploaded solutions a
    ``--solutions`` appended to ``options`` (argparse keeps the last, whatever form the user's took)."""
    if dataset is not None:
        workloads = dataset.container_path(mount)
    if solutions is not None:
        options = f"{options} --solutions {shlex.quote(solutions.container_path(mount))}".strip()
    return workloads, options
