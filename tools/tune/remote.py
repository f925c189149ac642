"""The tuner on a Modal GPU (``modal run run_modal.py --tune``): both sides, without Modal.

* The container side (:func:`tune_in_container`) runs :func:`tools.tune.cli.main`
  into a fresh output folder and returns, as plain bytes, every file the tune
  wrote there (its reports) and every launch-table file of a solution that is new
  or changed afterwards (:func:`tools.tune.table_files.table_files`; files are
  carried as bytes, whatever their format).
* The local side (:func:`write_tuning`) checks every returned path before
  writing anything, since they come from a container that ran solution code,
  then writes a new folder ``results/tuning/<UTC time>-modal-<gpu>/`` and, only
  when asked (``--install-tables``), the tables into the local solution folders.

run_modal.py wires these to Modal; the tests call them in process on the CPU.
"""

from __future__ import annotations

import hashlib
import json
import traceback
from datetime import datetime
from pathlib import Path, PurePosixPath

from harness.paths import SOLUTIONS_DIR
from harness.run_lock import writing_into
from tools.tune.table_files import is_table_file, table_files
#: Provenance file of a Modal tune's local folder (beside ``<solution>/`` reports).
MODAL_RECORD = "modal.json"


# ------------------------------------------------------------ local, before the container


def tuner_argv(algo: str, options: str = "", install_tables: bool = False) -> list[str]:
    """The ``python -m tools.tune`` arguments the container runs: ``--algo algo`` plus the
    tuner ``options`` (``--batches``, ``--iters``, ``--rounds``, ``--only``, ``--dtypes``, ``--defines``), checked
    here by the tuner's own parser and checks so that a mistake costs no GPU time.

    Raises:
        ValueError: no ``--algo``, an unknown solution, a bad option or value, ``--out`` (the
            container sets its own), or ``install_tables`` for a tune that writes no table file
            (:func:`tools.tune.cli.why_no_table`); the message says which.
    """
    import shlex

    from tools.tune.cli import check_arguments, parser, why_no_table

    if not algo.strip():
        raise ValueError("--tune needs --algo NAME[,NAME] or --algo all (the solutions to tune)")
    argv = ["--algo", algo, *shlex.split(options)]
    cli = parser()

    def refuse(message):  # argparse would print its usage and exit; the caller prints one line
        raise ValueError(message)

    cli.error = refuse
    try:
        args = cli.parse_args(argv)
    except SystemExit:  # --help inside --options: argparse printed it
        raise ValueError("--options=--help: see `python -m tools.tune --help` for the tuner's options") from None
    check_arguments(cli, args)  # --defines for a solution that takes none
    if args.out is not None:  # parsed, so that an abbreviation (--ou) is caught too
        raise ValueError(f"--out {args.out}: the container chooses its output folder "
                         "(the reports come back under results/tuning/)")
    if install_tables and (why := why_no_table(args)):
        raise ValueError(f"--install-tables: this tune would write no table file ({why})")
    return argv


def tuned_names(argv: list[str]) -> list[str]:
    """The solutions ``argv`` (:func:`tuner_argv`'s) tunes, ``all`` expanded."""
    from tools.tune.cli import algos

    return algos(argv[1])


# ------------------------------------------------------------ in the container


def file_digests(root: Path) -> dict[str, str]:
    """``{path relative to root: SHA-256 hex}`` of every regular file under ``root`` (links not followed)."""
    root = Path(root)
    if not root.is_dir():
        return {}
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file() and not path.is_symlink()}


def table_digests(solutions_dir: Path) -> dict[str, str]:
    """SHA-256 hex of every launch-table file (:func:`tools.tune.table_files.table_files`) of
    every solution, keyed ``solutions/<name>/<path in the solution folder>``."""
    return {f"solutions/{folder.name}/{path.relative_to(folder).as_posix()}": hashlib.sha256(path.read_bytes()).hexdigest()
            for folder in sorted(Path(solutions_dir).iterdir()) if folder.is_dir()
            for path in table_files(folder)}


def changed_tables(solutions_dir: Path, before: dict[str, str]) -> dict[str, bytes]:
    """The launch-table files that are new or changed since ``before`` (:func:`table_digests`):
    ``{solutions/<name>/<path>: content}``."""
    after = table_digests(solutions_dir)
    return {name: (Path(solutions_dir) / PurePosixPath(name).relative_to("solutions")).read_bytes()
            for name, digest in after.items() if before.get(name) != digest}


def tune_in_container(argv: list[str], out_dir: Path | None = None, solutions_dir: Path = SOLUTIONS_DIR, *,
                      timer=None, device=None) -> dict:
    """Body of the Modal tuning function: ``python -m tools.tune argv --out OUT`` in process
    (``timer`` and ``device`` as :func:`tools.tune.cli.main` takes them; None: the GPU's).

    Args:
        argv: :func:`tuner_argv`'s arguments (checked locally; the tuner checks them again).
        out_dir: the tune's output folder (an empty one; None: a new temporary folder).
        solutions_dir: where the tuner finds, and may write, the solutions' launch tables.

    Returns:
        Plain data: ``{"code": the tuner's exit status, "device": the GPU's name,
        "error": a traceback's text or "", "reports": {path under OUT: bytes},
        "tables": {solutions/<name>/<table file>: bytes}}``. A tune that
        fails part way still returns what it wrote before (one solution's crash
        does not lose the others' reports).
    """
    import tempfile

    from harness.records.environment import hardware_name
    from tools.tune import cli

    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="gdn-tune-"))
    before = table_digests(solutions_dir)
    error = ""
    try:
        code = cli.main([*argv, "--out", str(out)], timer=timer, device=device)
    except SystemExit as exc:  # the tuner's own refusal (e.g. no GPU): its message is in the log
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception:  # reported to this machine with what was written before it
        code, error = 1, traceback.format_exc(limit=20)
    return {"code": code, "device": hardware_name(str(device or "cuda")), "error": error,
            "reports": {name: (out / name).read_bytes() for name in file_digests(out)},
            "tables": changed_tables(solutions_dir, before)}


# ------------------------------------------------------------ local, after the container


def checked_path(name: object, allowed_heads: list[tuple[str, ...]], names: list[str]) -> PurePosixPath:
    """``name`` as a relative path that starts with one of ``allowed_heads`` (``"*"`` standing
    for one of the tuned solution ``names``) and names a file below it.

    Raises:
        ValueError: not a string, absolute, with ``..``, ``.``, empty or backslashed parts,
            not in its canonical form, or outside the allowed folders (naming the path).
    """
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name:
        raise ValueError(f"{name!r}: not a plain relative path")
    path = PurePosixPath(name)
    if path.is_absolute() or str(path) != name or any(part in ("", ".", "..") for part in path.parts):
        raise ValueError(f"{name!r}: not a plain relative path (absolute, '..' or '.')")
    for head in allowed_heads:
        if len(path.parts) > len(head) and all(
                part in names if want == "*" else part == want for part, want in zip(path.parts, head)):
            return path
    raise ValueError(f"{name!r}: outside the folders a tune returns "
                     f"({', '.join('/'.join(head) + '/' for head in allowed_heads)}, * a tuned solution)")


def checked_output(output: object, names: list[str]) -> tuple[dict, dict]:
    """The container's ``reports`` and ``tables`` (:func:`tune_in_container`), every path checked
    (:func:`checked_path`: reports under ``<solution>/``, tables ``solutions/<solution>/<table
    file>`` (:func:`tools.tune.table_files.is_table_file`), for the tuned ``names`` only) and every
    content bytes.

    Raises:
        ValueError: anything else came back (nothing should then be written).
    """
    if not isinstance(output, dict) or not all(isinstance(output.get(k), dict) for k in ("reports", "tables")):
        raise ValueError("the container returned no reports/tables mapping")
    found = {}
    for kind, heads in (("reports", [("*",)]), ("tables", [("solutions", "*")])):
        found[kind] = {checked_path(name, heads, names): content for name, content in output[kind].items()}
        bad = [str(path) for path, content in found[kind].items() if not isinstance(content, bytes)]
        if bad:
            raise ValueError(f"{', '.join(bad)}: content is not bytes")
    strays = [str(path) for path in found["tables"] if not is_table_file(PurePosixPath(*path.parts[2:]))]
    if strays:
        raise ValueError(f"{', '.join(strays)}: not a launch-table file of its solution (docs/tuning.md)")
    return found["reports"], found["tables"]


def new_tuning_folder(tuning_dir: Path, gpu: str, now: datetime | None = None) -> Path:
    """Make and return ``<tuning_dir>/<UTC time>-modal-<gpu slug>/`` (``20261124T101500Z-modal-B200``),
    a folder that did not exist (``-2``, ``-3``... appended when one of that second does)."""
    from harness.records.plots import slug
    from tools.tune.report import default_out_dir

    stem = f"{default_out_dir(now).name}-modal-{slug(gpu)}"  # the stamp of a local tune's folder
    Path(tuning_dir).mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        folder = Path(tuning_dir) / (stem if attempt == 1 else f"{stem}-{attempt}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"{tuning_dir}/{stem}: no free folder name")


def write_new(path: Path, content: bytes) -> Path:
    """Write ``content`` to ``path``, a file that must not exist yet (FileExistsError otherwise)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "xb") as handle:
        handle.write(content)
    return path


def install_targets(tables: dict[PurePosixPath, bytes], solutions_dir: Path) -> list[Path]:
    """Where the checked ``tables`` (``solutions/<name>/<table file>``: :func:`checked_output`)
    go in ``solutions_dir``, in their order.

    Raises:
        ValueError: a target that is a link, or resolves outside its solution's folder (a link
            on the way): a table is written nowhere else.
    """
    targets = []
    for name in tables:
        relative = name.relative_to("solutions")
        folder = (Path(solutions_dir) / relative.parts[0]).resolve()
        target = Path(solutions_dir) / relative
        if target.is_symlink() or not target.resolve().is_relative_to(folder):
            raise ValueError(f"{target}: a link, or outside {folder}: not installed")
        targets.append(target)
    return targets


def write_tuning(output: dict, names: list[str], tuning_dir: Path, gpu: str, record: dict, install: bool = False,
                 solutions_dir: Path = SOLUTIONS_DIR, now: datetime | None = None) -> tuple[Path, list[Path]]:
    """Write a Modal tune's ``output`` (:func:`tune_in_container`) of the solutions ``names``
    on ``gpu`` into a new ``folder`` (:func:`new_tuning_folder` of ``tuning_dir``): each report
    at ``<folder>/<solution>/<file>``, each table at
    ``<folder>/solutions/<solution>/<table file>``, and :data:`MODAL_RECORD`
    (``record`` plus the container's device, exit status, error and the files). With
    ``install``, the tables also go into ``solutions_dir``, replacing a file of the same
    name (that GPU's previous table: git keeps it). Returns (``folder``, the files written).

    Raises:
        ValueError: a returned path or content fails :func:`checked_output`, or an install
            target is a link (:func:`install_targets`); both checked before anything is written.
    """
    reports, tables = checked_output(output, names)
    targets = install_targets(tables, solutions_dir) if install else []
    record = dict(record, device=output.get("device"), exit_code=output.get("code"), error=output.get("error", ""),
                  reports=sorted(map(str, reports)), tables=sorted(map(str, tables)),
                  installed=[str(path) for path in targets])
    with writing_into([tuning_dir, *targets]):  # never while a run's vault watches the checkout (harness/run_lock.py)
        folder = new_tuning_folder(tuning_dir, gpu, now)
        written = [write_new(folder / path, content) for path, content in {**reports, **tables}.items()]
        for target, content in zip(targets, tables.values()):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        written.append(write_new(folder / MODAL_RECORD, json.dumps(record, indent=2).encode()))
    return folder, written + targets
