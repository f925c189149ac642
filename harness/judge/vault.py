"""The files a run reads, kept in the judge's memory and put back after every worker.

A solution can write any file its user can write (docs/judging.md). Whatever
the judge (or the *next* run's judge) reads from disk could therefore be
spoiled: the definition, whose reference the judge executes; the dataset's
tensors; the harness's own sources and their bytecode; the solutions' folders
and their cached CUDA builds; the whole ``results/`` tree, which ``score``,
the leaderboard and the README table read. A :class:`FileVault` holds the
bytes of every such file, taken before the first worker starts. After each
worker, :meth:`FileVault.changes` lists what differs and
:meth:`FileVault.restore` puts it back: a changed or deleted file gets its
bytes again, a file that was not there is taken out. What it takes out (an
added file or folder, and the changed version of a changed file) goes to a
*set-aside* folder outside the checkout when the vault has one, so nothing a
person wrote into the checkout while a run went is lost with the solution's
writes (2026-11-28: a prediction written into ``results/`` during the test run
was deleted as tampering); a move within one file system costs no bytes, and a
copy across file systems is capped (:data:`SET_ASIDE_COPY_BYTES`), past which
the file is deleted as before. A *shallow* root (the
checkout's root, which is the first entry of the next run's ``sys.path``) keeps
only its importable entries: its modules, and any new module, extension or
package put there (a ``torch.py`` would shadow torch for the next run's judge)
is removed; other files there (a log the user writes beside the run) are not
the vault's.

A file is re-read only when its ``stat`` signature moved: size, inode,
modification time *and* change time. A process of an ordinary user can set a
file's modification time back (``os.utime``) but not its change time, which
the kernel stamps on every write, so an unchanged signature means unchanged
bytes without hashing hundreds of MB after every worker.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

#: What a stat signature holds (see module doc).
Signature = tuple[int, int, int, int, int]


def signature(path: Path) -> Signature | None:
    """``(size, inode, device, mtime ns, ctime ns)`` of a regular file or a symbolic link (the
    link itself: one put in a file's place, or added, is a change); None for anything else."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        return None
    return st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns


#: At most this many bytes a vault copies into its set-aside folder where a move is not possible (another file
#: system): a solution that writes gigabytes into results/ costs the judge no more disk than this.
SET_ASIDE_COPY_BYTES = 256 * 2**20

#: A set-aside run folder is deleted this many days after it last changed (by the next run that prunes).
SET_ASIDE_DAYS = 14

#: Suffixes of the files Python imports a module from (a folder with ``__init__.py`` is a package).
MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")


def importable(path: Path) -> bool:
    """Whether ``import <name>`` could find ``path`` when its folder is on ``sys.path``."""
    if path.suffix in MODULE_SUFFIXES:
        return True
    return path.is_dir() and (path / "__init__.py").exists()


@dataclass(frozen=True)
class KeptLink:
    """What the vault keeps of a symbolic link that does not lead to a regular file: the link's text and
    what it led to (``missing``, ``folder``, ``other``). A user's dangling link (a ``latest`` that points at a run
    folder deleted since) is then a file like any other: left alone while it stays as it was, put back if
    a worker changes or removes it. Before, it was kept as nothing, so every check saw it as added: the
    first solution judged was blamed for tampering, its results were lost and the link was deleted
    (2026-11-28). A dangling link whose target a worker then makes is taken out, not put back: through
    it the next run would read what the worker wrote."""

    target: str
    leads_to: str  # "missing", "folder" or "other" (a FIFO, a device: never read)


def _read(path: Path) -> bytes | KeptLink | None:
    """The bytes of ``path`` (through a link to a regular file), a :class:`KeptLink` for a link that leads
    to no regular file, None for what cannot be read at all. Nothing but a regular file is read: a link to
    a FIFO or a device made the judge wait forever (2026-11-28)."""
    try:
        if stat.S_ISREG(os.stat(path).st_mode):
            return path.read_bytes()
    except OSError:
        pass
    try:
        target = os.readlink(path)
    except OSError:  # not a link (gone, a folder, unreadable)
        return None
    return KeptLink(target, "folder" if path.is_dir() else "missing" if not path.exists() else "other")


class FileVault:
    """The bytes of every file under ``roots`` (recursively), of single ``files``, and of the files
    importable entries directly under ``shallow`` roots; see module doc.

    Memory: the bytes of every file kept (a dataset's tensors included: 0.7 GB for contest-v2).
    """

    def __init__(self, roots=(), files=(), shallow=(), set_aside: Path | None = None):
        self.roots = [Path(r) for r in roots]
        self.files = [Path(f) for f in files]
        self.shallow = [Path(r) for r in shallow]
        self.set_aside = Path(set_aside) if set_aside is not None else None  # outside every root
        self.kept_aside: list[Path] = []  # where each path taken out went, in the set-aside folder
        self.copied_bytes = 0
        self.saved: dict[Path, bytes | KeptLink] = {}
        self.signatures: dict[Path, Signature | None] = {}
        self.entries: dict[Path, set[str]] = {}  # names directly under each shallow root
        self.folders: set[Path] = set()  # the folders under the roots (a folder a worker made goes again)
        self.take()

    # ------------------------------------------------------------------ what is kept

    def _paths(self) -> set[Path]:
        paths = {f for f in self.files if signature(f) is not None}
        for root in self.roots:
            if root.is_dir():
                paths |= {p for p in root.rglob("*") if signature(p) is not None}
        for root in self.shallow:
            if root.is_dir():
                paths |= {p for p in root.iterdir() if importable(p) and signature(p) is not None}
        return paths

    def _entries(self) -> dict[Path, set[str]]:
        """The importable names directly under each shallow root."""
        return {root: {p.name for p in root.iterdir() if importable(p)} if root.is_dir() else set()
                for root in self.shallow}

    def take(self) -> None:
        """Keep the bytes of every file now there (the run's start)."""
        self.saved, self.signatures = {}, {}
        for path in sorted(self._paths()):
            self.remember(path)
        self.entries = self._entries()
        self.folders = {p for root in self.roots if root.is_dir() for p in root.rglob("*") if p.is_dir()}

    def remember(self, path: Path) -> None:
        """The judge itself wrote ``path``: keep its bytes as the version to restore."""
        path = Path(path)
        data, sig = _read(path), signature(path)
        if data is None:
            return
        self.saved[path], self.signatures[path] = data, sig

    def links_out(self) -> list[Path]:
        """Links kept under the roots that lead to a folder outside every root, sorted: what a run reads
        through one is nothing the vault keeps (it does not follow links), so a worker could change it for
        the next run."""
        real = [Path(os.path.realpath(root)) for root in self.roots]
        return sorted(path for path, kept in self.saved.items()
                      if isinstance(kept, KeptLink) and kept.leads_to == "folder"
                      and any(path.is_relative_to(root) for root in self.roots)
                      and not any(Path(os.path.realpath(path)).is_relative_to(r) for r in real))

    # ------------------------------------------------------------------ checking and restoring

    def changes(self) -> list[str]:
        """Paths added, removed or changed since they were kept (sorted)."""
        changed = set()
        now = self._paths()
        for path in now | set(self.saved):
            sig = signature(path)
            # a kept link's own signature does not move when what it leads to appears: look again each time
            if sig == self.signatures.get(path) and path in self.saved and not isinstance(self.saved[path], KeptLink):
                continue
            if path not in self.saved or _read(path) != self.saved[path]:
                changed.add(str(path))
            else:  # same bytes, new signature (rewritten with the same content): nothing to restore
                self.signatures[path] = sig
        for root, names in self._entries().items():
            changed |= {str(root / n) for n in names - self.entries.get(root, set())}
        return sorted(changed)

    def restore(self) -> list[str]:
        """Put every kept file back and take out what was added (into the set-aside folder, if any:
        :attr:`kept_aside` lists where); returns the paths it touched."""
        touched = self.changes()
        for name in touched:
            path = Path(name)
            kept = self.saved.get(path)
            target_made = isinstance(kept, KeptLink) and kept.leads_to == "missing" and os.path.exists(path)
            self._put_aside(path)
            if target_made:  # a worker made the dangling link's target: the next run would read that through it
                path.unlink(missing_ok=True)
                del self.saved[path], self.signatures[path]
            elif path in self.saved:
                _write_back(path, self.saved[path])
                self.signatures[path] = signature(path)
            elif path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
                self._remove_new_folders(path.parent)
        return touched

    def _put_aside(self, path: Path) -> None:
        """Move what is now at ``path`` (a file, link or folder) into the set-aside folder under its
        absolute path, or copy a file there within :data:`SET_ASIDE_COPY_BYTES` where a move fails (another
        file system); without a set-aside folder, or past the cap, leave it to be deleted."""
        if self.set_aside is None or not os.path.lexists(path):
            return
        target = self.set_aside / path.relative_to(path.anchor)
        for n in range(1, 1000):  # a later worker's version of the same path beside the first's
            if not os.path.lexists(target):
                break
            target = target.with_name(f"{path.name}.{n}")
        if not self._lands_aside(target):
            return
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(path, target)
        except OSError:
            sig = signature(path)
            if sig is None or os.path.islink(path) or self.copied_bytes + sig[0] > SET_ASIDE_COPY_BYTES:
                return
            try:
                shutil.copyfile(path, target)
            except OSError:
                return
            self.copied_bytes += sig[0]
        self.kept_aside.append(target)

    def _lands_aside(self, target: Path) -> bool:
        """Whether ``target`` lies, links resolved, inside the set-aside folder, and that folder outside every
        folder the vault keeps. A worker can write links there as anywhere (the set-aside root itself a link
        into the checkout, or a link where a mirrored folder will be) to have the judge move its files where
        the next run reads them; then nothing is moved and the file is deleted, as without a set-aside folder.
        Restoring runs once the worker's processes are gone, so nothing changes the links after this check."""
        aside = Path(os.path.realpath(self.set_aside))
        kept = [Path(os.path.realpath(folder)) for folder in (*self.roots, *self.shallow)]
        return (Path(os.path.realpath(target.parent)).is_relative_to(aside)
                and not any(aside.is_relative_to(folder) for folder in kept))

    def _remove_new_folders(self, folder: Path) -> None:
        """Remove ``folder`` and its parents while they are empty and were not there when kept."""
        while folder not in self.folders and any(folder.is_relative_to(r) and folder != r for r in self.roots):
            try:
                folder.rmdir()
            except OSError:  # not empty, or gone
                return
            folder = folder.parent


def _write_back(path: Path, data: bytes | KeptLink) -> None:
    """Replace ``path`` with ``data`` (or with the link a :class:`KeptLink` keeps) through a temporary
    file or link and ``os.replace`` (a symlink or a folder put in its place is replaced too; a reader never
    sees half a file)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.restore")
    if isinstance(data, KeptLink):
        tmp.unlink(missing_ok=True)
        os.symlink(data.target, tmp)
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)


#: The name of a run's set-aside folder, ``<UTC time>-<pid>`` (:func:`new_set_aside`): the only folders
#: :func:`prune_set_aside` deletes.
SET_ASIDE_NAME = re.compile(r"\d{8}T\d{6}Z-\d+")


def new_set_aside(root: Path) -> Path:
    """A run's set-aside folder under ``root`` (made when first used): ``<UTC time>-<pid>``, so no run mixes
    with another's; the folders of :data:`SET_ASIDE_DAYS` ago go first (:func:`prune_set_aside`)."""
    prune_set_aside(root)
    return Path(root) / f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{os.getpid()}"


def prune_set_aside(root: Path, days: float | None = None) -> None:
    """Delete the run folders under ``root`` (the set-aside root: one folder per run that took something
    out, named as :data:`SET_ASIDE_NAME`) last changed more than ``days`` ago (default :data:`SET_ASIDE_DAYS`).
    Nothing where ``root`` is a link: a worker could point it at the checkout or the home folder."""
    root = Path(root)
    if root.is_symlink() or not root.is_dir():
        return
    cutoff = time.time() - 86400 * (SET_ASIDE_DAYS if days is None else days)
    for run in root.iterdir():
        if (SET_ASIDE_NAME.fullmatch(run.name) and run.is_dir() and not run.is_symlink()
                and run.stat().st_mtime < cutoff):
            shutil.rmtree(run, ignore_errors=True)
