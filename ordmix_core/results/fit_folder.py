"""Reading an ``ordmix fit`` output folder back: its tables, columns checked, IDs as written.

``ordmix next`` (a batch from yesterday's fit) and the warm start of a refit
(``estimators/refit.py``) read a fit folder through here: each file through ``io.read_table``
(every column as text), the columns the caller needs present, numbers parsed, and the formula
protection that
``io.write_csv`` put on ID cells (a leading ``'`` before ``= + - @``) taken off again, so IDs
match the ratings'. A table the Dask engine wrote per partition (``items/part-*.csv``) is read
as one. Any problem is one :class:`InputError` naming the file, the row or column and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..io import FORMULA_PREFIXES, read_table
from .decision_columns import FLAG_COLUMNS

__all__ = [
    "FLAG_COLUMNS", "check_folder", "parse_numbers", "read_fit_table", "read_summary",
    "table_path",
]  # fmt: skip


def table_path(folder: Path, name: str) -> Path | None:
    """``{name}.csv``, or the folder of part files the Dask engine writes; None if neither."""
    one = Path(folder) / f"{name}.csv"
    if one.is_file():
        return one
    parts = Path(folder) / name
    if parts.is_dir() and any(parts.glob("part-*.csv")):
        return parts
    return None


def check_folder(
    folder: str | Path, tables: Sequence[str], what: str, alternative: str = ""
) -> Path:
    """``folder`` as a Path if it holds ``summary.json`` and each of ``tables``; else one
    InputError (``what``: what the caller wants it for, e.g. "a warm start"; ``alternative``:
    what else the user may give, e.g. ", or a ratings file")."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(
            f"is not a folder; give the output folder of an ordmix fit for {what}",
            source=str(folder),
        )
    missing = [f"{t}.csv" for t in tables if table_path(folder, t) is None]
    if not (folder / "summary.json").is_file():
        missing.append("summary.json")
    if missing:
        raise InputError(
            f"is a folder but has no {', '.join(missing)}; give a folder written by ordmix "
            f"fit{alternative}",
            source=str(folder),
        )
    return folder


def read_summary(folder: Path, keys: Sequence[str] = ()) -> dict:
    """``summary.json`` as a dict; its ``hyperparameters`` must hold ``keys``."""
    path = Path(folder) / "summary.json"
    try:
        summary = json.loads(path.read_text())
        hp = summary["hyperparameters"]
        for key in keys:
            hp[key]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(
            f"is not a summary.json written by ordmix fit ({type(e).__name__}: {e}); fit again",
            source=str(path),
        ) from None
    return summary


def read_fit_table(
    folder: Path,
    name: str,
    text: Sequence[str],
    numbers: Sequence[str],
    hint: dict[str, str] | None = None,
) -> pd.DataFrame:
    """``{name}.csv`` of a fit folder (or its part files) with ``text`` and ``numbers`` columns
    required, ``numbers`` parsed as floats and ID cells unprotected.

    ``hint``: per column, what to say when it is missing (default: give a fit folder).
    """
    path = table_path(Path(folder), name)
    if path is None:
        raise InputError(
            f"has no {name}.csv; give a folder written by ordmix fit", source=str(folder)
        )
    if path.is_dir():
        files = sorted(path.glob("part-*.csv"))
        out = pd.concat([read_table(f) for f in files], ignore_index=True)
    else:
        out = read_table(path)
    for c in [*text, *numbers]:
        if c not in out.columns:
            why = (hint or {}).get(c, "; give a folder written by ordmix fit")
            raise InputError(f"no column {c!r}{why}", source=str(path))
    parse_numbers(out, numbers, path)
    for c in text:
        out[c] = unprotect(out[c])
    return out


def parse_numbers(table: pd.DataFrame, columns: Sequence[str], path: Path | str) -> None:
    """``columns`` of a table read as text, parsed as numbers in place; InputError naming the
    first row of ``path`` where one is not a number."""
    for c in columns:
        v = pd.to_numeric(table[c], errors="coerce")
        if v.isna().any():
            row = int(np.flatnonzero(v.isna().to_numpy())[0])
            raise InputError(
                f"row {row + 2} (counting the header as row 1): {c!r} is "
                f"{table[c].iloc[row]!r}, not a number; fit again",
                source=str(path),
            )
        table[c] = v


def unprotect(ids: pd.Series) -> pd.Series:
    """IDs as they were before ``io.write_csv`` guarded them against spreadsheet formulas."""
    s = ids.astype(str)
    guarded = s.str.startswith("'") & s.str[1:2].isin(list(FORMULA_PREFIXES))
    return s.where(~guarded, s.str[1:])
