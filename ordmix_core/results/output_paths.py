"""Where ordmix may write: output paths checked before any compute, and replaced atomically.

ordmix replaces an output folder as a whole, so it must never hold anything ordmix did not
write. :func:`check_output_dir` (a folder: ``fit``, ``experiment``) and
:func:`check_output_file` (a table: ``compare``, ``next``'s batch and review) refuse, with one
:class:`InputError` and before any compute, an output that is empty, the current folder, is
or holds an input, lies inside an input folder, holds files other than a previous ordmix
output, is a file other than an earlier table of the same kind (``TABLE_HEADERS``), or cannot
be written (read-only, a missing read-only parent, another user's folder in a sticky
directory). :func:`check_input_file` refuses inputs that are not regular files (a named pipe
would block the reader forever).
:func:`atomic_output_dir` writes into a temporary sibling that replaces the folder only when
the run succeeded; :func:`safe_output_dir` is both.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..errors import InputError
from .outputs import FILES

#: the files ``ordmix fit`` writes (``outputs.FILES``; the Dask engine adds ``items/part-*.csv``
#: when large)
FIT_FILES = FILES
#: the files ``ordmix experiment`` writes
EXPERIMENT_FILES = ("results.csv", "mse.html", "correlation.html", "ndcg.html", "summary.json")
#: the first columns of the table ``ordmix compare`` writes
COMPARE_HEADER = "method,mse,correlation,ndcg"
#: the first columns of each table a command writes: an existing file is replaced only when it
#: starts so (an earlier output of the same command), never otherwise
TABLE_HEADERS = {
    "compare": (COMPARE_HEADER, "a table ordmix compare wrote"),
    "next": ("rank,instance,", "a batch ordmix next wrote"),
    "review": ("annotator,flag,p_unreliable,", "a review list ordmix next --review wrote"),
}
_OURS = frozenset(FIT_FILES) | frozenset(EXPERIMENT_FILES)

Inputs = Mapping[str, "str | os.PathLike"]


def check_input_file(path: str | os.PathLike, allow_dir: bool = False) -> Path:
    """``path`` as a Path if it is a regular file (or, with ``allow_dir``, a folder).

    A named pipe, device or socket is refused instead of read: reading one can block forever.
    """
    p = Path(path)
    label = os.fspath(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError("file not found; check the path", source=label) from None
    except OSError as e:
        raise InputError(f"cannot be read ({e.strerror or e}); check it", source=label) from None
    if stat.S_ISDIR(st.st_mode):
        if allow_dir:
            return p
        raise InputError("is a folder, not a file; give the file itself", source=label)
    if not stat.S_ISREG(st.st_mode):
        what = "a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise InputError(
            f"is {what}, not a regular file; ordmix reads files only: save the data to a file "
            "first",
            source=label,
        )
    return p


def check_output_dir(path: str | os.PathLike, inputs: Inputs | None = None) -> Path:
    """Refuse an output folder ordmix may not replace or cannot write; else return it.

    ``inputs``: name -> path of the files the run reads (``{"ratings": ...}``); an output
    folder that holds one of them is refused. Nothing is written (a probe folder made to test
    writability is removed at once).
    """
    p, label = _nonempty(path)
    here = Path.cwd().resolve()
    where = p.resolve()
    if where == here or where in here.parents:
        raise InputError(
            "is the current folder (or holds it); ordmix replaces its output folder as a "
            "whole, so give a new folder, e.g. --out results",
            source=label,
        )
    _refuse_inputs(where, inputs, label, inside=True)
    for anc in p.absolute().parents:
        if _has_ordmix_summary(anc) and not _foreign_entries(anc):
            raise InputError(
                f"is inside the earlier ordmix output {_shown(anc)}, which a run into it would "
                "replace "
                "as a whole; choose a folder outside it",
                source=label,
            )
    if p.is_symlink():
        raise InputError(
            "is a symbolic link; give the folder it points to, or a new folder", source=label
        )
    if p.exists() and not p.is_dir():
        raise InputError(
            "exists and is a file, not a folder; choose another output folder", source=label
        )
    if p.exists():
        foreign = _foreign_entries(p)
        if foreign:
            shown = ", ".join(foreign[:4]) + (
                f" and {len(foreign) - 4} more" if len(foreign) > 4 else ""
            )
            raise InputError(
                f"holds files ordmix did not write ({shown}); ordmix replaces its output "
                "folder as a whole and never deletes other files: choose a new folder, or an "
                "earlier ordmix output",
                source=label,
            )
        _check_replaceable(p, label)
    _probe_parent(p, label)
    return p


def check_output_file(
    path: str | os.PathLike,
    inputs: Inputs | None = None,
    table: str = "compare",
    option: str = "--out",
) -> Path:
    """Refuse an output table path ordmix may not overwrite or cannot write; else return it.

    ``inputs``: name -> path of the files (or folders) the run reads; the output may be none of
    them, nor inside an input folder. An existing file is overwritten only if it is an earlier
    table of the same kind (``table``, a key of ``TABLE_HEADERS``); ``option`` names the flag
    in the messages.
    """
    p, label = _nonempty(path, option)
    where = p.resolve()
    if p.is_dir():
        raise InputError(
            "is a folder; give a file name for the table, e.g. "
            f"{option} {os.path.join(label, table + '.csv')}",
            source=label,
        )
    _refuse_inputs(where, inputs, label, inside=False)
    if p.exists():
        if not p.is_file():
            raise InputError("is not a regular file; choose another file name", source=label)
        header, kind = TABLE_HEADERS[table]
        if not _is_table(p, header):
            raise InputError(
                f"exists and is not {kind}; ordmix never overwrites other files: choose "
                f"another file name for {option}",
                source=label,
            )
        _check_replaceable(p, label)
    _probe_parent(p, label)
    return p


@contextlib.contextmanager
def safe_output_dir(path: str | os.PathLike, inputs: Inputs | None = None) -> Iterator[Path]:
    """:func:`check_output_dir` again (the folder may have changed during the run), then
    :func:`atomic_output_dir`."""
    check_output_dir(path, inputs)
    with atomic_output_dir(path) as tmp:
        yield tmp


@contextlib.contextmanager
def atomic_output_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling folder that replaces ``path`` only if the block succeeds.

    On any exception (KeyboardInterrupt included) the temporary folder is deleted and
    ``path`` is untouched. On success an existing ``path`` is renamed aside, the new folder
    renamed in, then the old one deleted: at every moment a complete output exists (between
    the two renames, under ``.<name>.old-*`` next to it). It replaces whatever ``path``
    holds: call :func:`check_output_dir` first (or use :func:`safe_output_dir`).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(
            "exists and is a file, not a folder; choose another output folder", source=str(path)
        )
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = parent / f".{path.name}.tmp-{uuid.uuid4().hex[:12]}"
        tmp.mkdir()
    except OSError as e:
        raise InputError(
            f"cannot create the output folder ({e.strerror or e})", source=str(path)
        ) from None
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    try:
        if path.exists():
            old = parent / f".{path.name}.old-{uuid.uuid4().hex[:12]}"
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException:
        if old is not None and old.exists() and not path.exists():
            os.replace(old, path)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def listing(folder: Path) -> list[str]:
    """The files of an output folder, ordmix's own in the order they are documented."""
    names = sorted(os.listdir(folder))
    order = {n: i for i, n in enumerate(FIT_FILES + EXPERIMENT_FILES)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


# --------------------------------------------------------------------------- helpers
def _shown(p: Path) -> str:
    """A folder as messages show it: relative to the current folder when inside it."""
    try:
        rel = p.relative_to(Path.cwd())
    except ValueError:
        return str(p)
    return "the current folder" if str(rel) == "." else str(rel)


def _nonempty(path: str | os.PathLike, option: str = "--out") -> tuple[Path, str]:
    label = os.fspath(path)
    if not label.strip():
        raise InputError(f"{option} is empty; give a folder or file name, e.g. {option} results")
    return Path(label), label


def _refuse_inputs(where: Path, inputs: Inputs | None, label: str, inside: bool) -> None:
    """Refuse an output that is one of the inputs, inside an input folder, or (``inside``) a
    folder holding an input."""
    for name, src in (inputs or {}).items():
        if src is None:
            continue
        s = Path(src).resolve()
        if s.is_dir() and s in where.parents:
            raise InputError(
                f"is inside the {name} folder {src}, which ordmix reads (and ordmix fit "
                "replaces as a whole); choose a path outside it",
                source=label,
            )
        if s == where or (inside and where in s.parents):
            what = f"is the {name} file itself" if s == where else f"holds the {name} file {src}"
            raise InputError(
                f"{what}; ordmix never overwrites its input: choose another output"
                + (" folder" if inside else " file name"),
                source=label,
            )


def _foreign_entries(folder: Path) -> list[str]:
    """Entries of ``folder`` that are not a previous ordmix output's (all, if it is not one)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as e:
        raise InputError(
            f"cannot be listed ({e.strerror or e}); choose another output folder",
            source=os.fspath(folder),
        ) from None
    if not names:
        return []
    if not _has_ordmix_summary(folder) and set(names) != set(EXPERIMENT_FILES[:-1]):
        return names  # not an ordmix output: every entry is someone else's
    return [n for n in names if not _is_ours(folder, n)]


def _has_ordmix_summary(folder: Path) -> bool:
    f = folder / "summary.json"
    try:
        if not f.is_file() or f.stat().st_size > 10_000_000:
            return False
        summary = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and "ordmix_version" in summary


def _is_ours(folder: Path, name: str) -> bool:
    p = folder / name
    if p.is_symlink():
        return False
    if name in _OURS:
        return p.is_file()
    if name == "items" and p.is_dir():  # the Dask engine's items per partition
        try:
            parts = os.listdir(p)
        except OSError:
            return False
        return all(n.startswith("part-") and n.endswith(".csv") for n in parts)
    return False


def _is_table(p: Path, header: str) -> bool:
    """Whether the file's first line starts with ``header`` (a table ordmix wrote)."""
    try:
        with open(p, encoding="utf-8", errors="replace") as f:
            head = f.readline(200)
    except OSError:
        return False
    return head.lstrip("\ufeff").startswith(header)


def _check_replaceable(p: Path, label: str) -> None:
    """An existing output can be renamed aside and deleted: refuse it early if not."""
    st = p.stat()
    parent = p.absolute().parent
    euid = os.geteuid() if hasattr(os, "geteuid") else None
    if euid not in (None, 0) and st.st_uid != euid:
        pst = parent.stat()
        if pst.st_mode & stat.S_ISVTX and pst.st_uid != euid:
            raise InputError(
                f"belongs to another user in {_shown(parent)}, where only owners may rename or "
                "delete "
                "(sticky bit); choose another output",
                source=label,
            )
    if p.is_dir():
        dirs = [p] + [p / n for n in os.listdir(p) if (p / n).is_dir()]
        for d in dirs:
            if not os.access(d, os.W_OK | os.X_OK):
                raise InputError(
                    "is read-only, so ordmix could not replace it; make it writable or choose "
                    "another output folder",
                    source=label,
                )


def _probe_parent(p: Path, label: str) -> None:
    """Create (and remove) a folder where the output will go; InputError if that fails."""
    anc = p.absolute().parent
    while not anc.exists():
        anc = anc.parent
    if not anc.is_dir():
        raise InputError(f"cannot be created: {_shown(anc)} is a file, not a folder", source=label)
    try:
        probe = tempfile.mkdtemp(prefix=f".{p.name or 'out'}.probe-", dir=anc)
    except OSError as e:
        raise InputError(
            f"cannot be written: {_shown(anc)} is not writable ({e.strerror or e}); choose "
            "another output",
            source=label,
        ) from None
    os.rmdir(probe)
