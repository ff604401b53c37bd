"""Writing tables: CSVs without spreadsheet formulas, each file atomically (temp + rename).

Whole output folders are ``ordmix_core.results.output_paths.atomic_output_dir``'s.

Formula protection is injective: a text cell is prefixed with ``'`` when, after any leading
``'``, it starts with ``= + - @``, tab or carriage return. So ``=1+1`` is written ``'=1+1`` and
``'=1+1`` is written ``''=1+1``: two distinct IDs never become the same cell, and
:func:`csv_unescape` (drop one leading ``'`` from such a cell) gives the ID back.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: cells a spreadsheet would execute start with one of these
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
#: what gets a leading ``'``: a formula prefix after any number of ``'`` (so escaping is
#: injective: a cell that already starts with ``'`` before a prefix gets one more)
ESCAPED = re.compile("'*[" + re.escape("".join(FORMULA_PREFIXES)) + "]")


def csv_safe(df: pd.DataFrame | pd.Series, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Copy of ``df`` with spreadsheet-formula cells neutralised by a leading ``'``.

    Text cells starting with ``= + - @``, tab or carriage return would be executed by Excel /
    LibreOffice on opening the CSV; they, and cells where such a character follows leading
    ``'`` (so that no two IDs are written alike), get one more ``'`` in front. Applies to
    ``columns`` (default: every non-numeric column), to a text index and to text column
    labels; numeric columns are left alone. :func:`csv_unescape` undoes it.
    """
    out = df.to_frame() if isinstance(df, pd.Series) else df.copy(deep=False)  # copy on write
    if columns is None:
        todo = [c for c in out.columns if not pd.api.types.is_numeric_dtype(out[c])]
    else:
        todo = [c for c in columns if c in out.columns]
    for c in todo:
        if not pd.api.types.is_numeric_dtype(out[c]):
            out[c] = _neutralise(out[c])
    if isinstance(out.index, pd.MultiIndex):
        out.index = pd.MultiIndex.from_arrays(
            [_neutralise(out.index.get_level_values(i)) for i in range(out.index.nlevels)],
            names=out.index.names,
        )
    elif not pd.api.types.is_numeric_dtype(out.index):
        out.index = pd.Index(_neutralise(out.index), name=out.index.name)
    out.columns = [_neutralise_one(c) for c in out.columns]
    return out


def csv_unescape(text: str) -> str:
    """The value a :func:`csv_safe` cell stands for (one leading ``'`` dropped if added)."""
    return text[1:] if text.startswith("'") and ESCAPED.match(text, 1) else text


def _neutralise_one(x: Any) -> Any:
    return "'" + x if isinstance(x, str) and ESCAPED.match(x) else x


def _neutralise(values: pd.Series | pd.Index) -> Any:
    arr = np.asarray(values, dtype=object)
    is_str = np.fromiter((isinstance(x, str) for x in arr), bool, len(arr))
    if not is_str.any():
        return values
    s = pd.Series(arr)
    text = s.where(is_str, "").astype(str)
    danger = is_str & text.str.match(ESCAPED.pattern).to_numpy(dtype=bool, na_value=False)
    if not danger.any():
        return values
    arr = arr.copy()
    # per dangerous cell only (rare): numpy's fixed-width text would drop a trailing NUL
    arr[danger] = np.array(["'" + x for x in arr[danger]], dtype=object)
    if isinstance(values, pd.Series):
        return pd.Series(arr, index=values.index, name=values.name)
    return arr


#: rows :func:`write_csv_chunks` formats at a time (each cell a Python string meanwhile)
FAST_ROWS = 16_384
#: a cell holding one of these is quoted (the csv module's minimal quoting): the rows of such
#: a cell are written by the csv module itself
_QUOTED = re.compile('[,"\r\n]')


def _text(col: pd.Series | pd.Index) -> bool | None:
    """Whether pandas writes ``col`` as text (True: every cell a ``str`` or missing), as a
    number or boolean (False: float64, integers, booleans), or otherwise (None)."""
    dtype = col.dtype
    if isinstance(dtype, np.dtype) and (dtype == np.float64 or dtype.kind in "iub"):
        return False
    if isinstance(dtype, pd.StringDtype):
        return True
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        values = np.asarray(col, dtype=object)
        present = values[~pd.isna(values)].tolist()
        return True if all(type(v) is str for v in present) else None
    return None


def _cells(col: pd.Series | pd.Index, text: bool) -> list[str]:
    """One column's cells as pandas' ``to_csv`` writes them (``_text`` says it can).

    pandas writes a float64 cell as numpy's ``str`` of it, the shortest text that reads back
    to the same float, which is Python's ``repr`` (``tests/io/test_writing.py`` compares the two
    writers' bytes), and a missing one as an empty cell; integers and booleans as ``str``;
    text as it is. ``repr`` over a list of floats takes about half of numpy's time."""
    if text:
        values = np.asarray(col, dtype=object).copy()
        values[pd.isna(values)] = ""
        return values.tolist()
    values = np.asarray(col)
    if values.dtype != np.float64:
        return list(map(str, values.tolist()))
    cells = list(map(float.__repr__, values.tolist()))
    for i in np.flatnonzero(np.isnan(values)).tolist():
        cells[i] = ""
    return cells


def _write_rows(f: Any, df: pd.DataFrame, index: bool, header: bool) -> None:
    """``df.to_csv(f, index=index, header=header, lineterminator="\\n")``, the same bytes.

    A frame of float64, integer, boolean and text columns (and one level of index) is
    formatted here, ``FAST_ROWS`` rows at a time, each row's cells joined by commas unless
    one of them needs quotes (then the csv module writes those rows, as pandas does); any
    other frame is pandas'. About half of pandas' time on ``items.csv``."""
    cols = [df.index] if index else []
    cols += [df.iloc[:, j] for j in range(df.shape[1])]
    kinds = [_text(c) for c in cols]
    nested = isinstance(df.index, pd.MultiIndex) or isinstance(df.columns, pd.MultiIndex)
    if nested or len(cols) < 2 or None in kinds:
        df.to_csv(f, index=index, header=header, lineterminator="\n")
        return
    writer = csv.writer(f, lineterminator="\n")
    if header:
        names = [df.index.name if df.index.name is not None else ""] if index else []
        writer.writerow([*names, *df.columns])
    for lo in range(0, len(df), FAST_ROWS):
        cells = [_cells(c[lo : lo + FAST_ROWS], t) for c, t in zip(cols, kinds, strict=True)]
        text = [col for col, t in zip(cells, kinds, strict=True) if t]
        rows = zip(*cells, strict=True)
        if any(_QUOTED.search("".join(col)) for col in text):
            writer.writerows(rows)
        else:
            f.write("\n".join(map(",".join, rows)) + "\n")


def _frame_for_csv(df: pd.DataFrame | pd.Series, id_columns: Sequence[str] | None) -> tuple:
    safe = csv_safe(df, id_columns)
    default_index = isinstance(safe.index, pd.RangeIndex) and safe.index.name is None
    return safe, not default_index


def to_csv_bytes(df: pd.DataFrame | pd.Series, id_columns: Sequence[str] | None = None) -> bytes:
    """UTF-8 CSV of ``df`` (formula cells neutralised) for the dashboard's download buttons.

    A meaningful index (named, or not a plain 0..n-1 range) is written as the first column.
    """
    safe, index = _frame_for_csv(df, id_columns)
    buf = io.StringIO()
    _write_rows(buf, safe, index, header=True)
    return buf.getvalue().encode("utf-8")


def write_csv(
    df: pd.DataFrame | pd.Series, path: str | os.PathLike, id_columns: Sequence[str] | None = None
) -> Path:
    """Write ``df`` as UTF-8 CSV with formula cells neutralised, atomically (temp + rename).

    The same bytes as :func:`to_csv_bytes`, streamed to the file (never the whole text in
    memory: a 2-million-item ``items.csv`` is hundreds of MB).
    """
    return write_csv_chunks([df], path, id_columns)


def write_csv_chunks(
    frames: Iterable[pd.DataFrame],
    path: str | os.PathLike,
    id_columns: Sequence[str] | None = None,
) -> Path:
    """:func:`write_csv` of the rows of ``frames`` one after the other (the same columns in
    each; at least one frame), atomically: the same bytes as writing them concatenated, with
    one frame in memory at a time. The header and the index (written as in
    :func:`to_csv_bytes`) are the first frame's."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            index = None
            for df in frames:
                safe, own_index = _frame_for_csv(df, id_columns)
                header, index = index is None, own_index if index is None else index
                _write_rows(f, safe, index, header)
            if index is None:
                raise ValueError("write_csv_chunks needs at least one frame")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path
