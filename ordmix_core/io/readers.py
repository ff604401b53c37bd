"""The readers: any table (:func:`read_table`), ratings (:func:`read_ratings`), gold
(:func:`read_gold`). Sniffing, text and Parquet parsing are below them; what the columns must
hold is checked by :mod:`ordmix_core.data.crowd`, whose messages they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..data import id_hash
from ..data.coding import rating_levels
from ..data.columns import GOLD_ALIASES, map_aliases
from ..data.crowd import CrowdData, Scale, crowd_from_coded, normalize_columns
from ..data.scale import scale_names
from ..errors import InputError
from .parquet import read_parquet
from .sniff import PARQUET_EXTENSIONS, ROW, TEXT_EXTENSIONS, Source, kind_fix, load, preview
from .sniff import sniff_kind as _sniff_kind
from .text import read_text


def read_arrow(
    source: Source, name: str | None = None, large: bool = True, coding: bool = False
) -> tuple[Any, str]:
    """``(pyarrow.Table of text columns, label)``: :func:`read_table` before pandas.

    ``large``: ``large_string`` columns (what pandas' ``str`` holds), else ``string``.
    ``coding``: the IDs are coded next; a big file's coding kernels load while it is parsed
    (``id_hash.preload``).
    """
    data, label, ext = load(source, name)
    if coding:
        id_hash.preload(len(data))
    if not data:
        raise InputError(
            "the file is empty (0 bytes); export the ratings again with a header row "
            "annotator,instance,rating",
            source=label,
        )
    kind = _sniff_kind(data)
    if ext in PARQUET_EXTENSIONS or (ext is None and kind == "parquet"):
        if kind != "parquet":
            what = "text (it starts " + repr(preview(data)) + ")" if kind == "text" else kind
            raise InputError(
                f"the file is named {ext or 'as Parquet'} but is not a Parquet file: it is "
                f"{what}; rename it to .csv/.tsv if it is text, or export it again as Parquet",
                source=label,
            )
        return read_parquet(data, label, large), label
    if kind != "text":
        raise InputError(
            f"the file is {'a Parquet file' if kind == 'parquet' else kind}, not "
            f"{'CSV/TSV' if ext is None else ext} text; {kind_fix(kind)}",
            source=label,
        )
    return read_text(data, label, TEXT_EXTENSIONS.get(ext or ".csv", ","), large), label


def release_freed_memory() -> None:
    """Hand freed buffers back to the system: pyarrow's allocator keeps them, and the fit
    that follows would otherwise stack its arrays on top (measured: 0.5 GB of a 10M-rating
    CSV's parse); so does glibc's heap, with the coding threads' small blocks (40 MB of that
    CSV; ``malloc_trim``, where there is one), and a Dask worker's with the arrays of a
    phase that ended (``dask_engine``)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    _malloc_trim()


def _malloc_trim() -> None:
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl, Windows): nothing to trim
        pass


def read_table(source: Source, name: str | None = None) -> pd.DataFrame:
    """Read a CSV/TSV/Parquet table with every column as string.

    ``source`` is a path, or the bytes / binary file object of an upload with ``name`` its
    original filename (the extension picks the format; without one the content does).
    Empty cells are ``""``; columns are pandas' Arrow-backed ``str`` (no Python object per
    cell). Raises InputError for anything that is not a clean table.
    """
    table, _ = read_arrow(source, name)
    return table.to_pandas()


def read_ratings(
    source: Source,
    name: str | None = None,
    scale: Scale | Sequence[float] | str | None = None,
) -> pd.DataFrame:
    """Read a ratings file into ``annotator, instance, rating[, query]``.

    IDs are read as text, never as numbers, and come back coded: each ID column is a pandas
    Categorical whose categories are the sorted distinct IDs (4 bytes a rating, each distinct
    ID stored once; :func:`~ordmix_core.data.crowd.prepare` uses the codes as they are), as
    Arrow-backed text from ``data.COMPACT_IDS`` (1M) distinct IDs on, as objects below. Ratings are
    float. With ``scale`` given, every rating must be on it; without, ``prepare`` infers it
    from the values seen and checks it. Repeated (annotator, instance) pairs are kept as
    separate ratings. The frame remembers the file (``attrs["source"]``) for later messages.
    A scale of named levels (``"G,P,R,X"``) reads each rating as one of the names and
    gives its value 1..K (the frame's ``attrs["levels"]`` keeps the names).
    """
    df = read_coded(source, name, scale_names(scale))
    if scale is not None:
        rating_levels(df["rating"].to_numpy(), scale, df.attrs["source"])
    return df


def read_crowd(
    source: Source,
    name: str | None = None,
    scale: Scale | Sequence[float] | str | None = None,
    granularity: str = "instance",
) -> CrowdData:
    """A ratings file straight to :class:`~ordmix_core.data.crowd.CrowdData` (what ``ordmix fit``
    fits): :func:`read_ratings`' checks and coding, then ``prepare``'s, without coding or
    checking anything twice and without a second copy of any per-rating array. What a fit
    keeps of the file is its codes, each distinct ID once and the levels."""
    frame = read_coded(source, name, scale_names(scale))
    return crowd_from_coded(frame, scale, granularity, frame.attrs["source"], copy=False)


def read_coded(
    source: Source, name: str | None = None, names: Sequence[str] | None = None
) -> pd.DataFrame:
    """:func:`read_ratings` without the scale check: the columns checked and coded (the
    ratings as the values of the named levels ``names``, when given), the parse's buffers
    handed back."""
    table, label = read_arrow(source, name, large=False, coding=True)  # 4 bytes an offset
    df = normalize_columns(table, label, coded=True, names=names)  # codes the Arrow columns
    del table
    release_freed_memory()
    return df


def read_gold(
    source: Source,
    name: str | None = None,
    scale: Scale | Sequence[float] | str | None = None,
) -> pd.Series:
    """Read known true labels: a float Series named ``truth`` indexed by instance (string).

    Columns ``instance, truth`` (or ``task``/``item`` and ``true_label``/``label``/``gold``).
    An instance listed twice must have the same truth both times. With a scale of named
    levels (``"G,P,R,X"``) each truth is one of the names, read as its value 1..K.
    """
    df, label = read_arrow(source, name)
    df = df.to_pandas()
    mapping = map_aliases(list(df.columns), GOLD_ALIASES, label)
    missing = [c for c in ("instance", "truth") if c not in mapping.values()]
    if missing:
        raise InputError(
            f"required column(s) {', '.join(missing)} missing (found: "
            f"{', '.join(map(str, df.columns))}); a gold file needs columns instance, truth "
            "(or task, true_label)",
            source=label,
        )
    df = df[list(mapping)].rename(columns=mapping)
    inst = df["instance"].astype(str)
    empty = inst.str.strip() == ""
    if empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0])
        raise InputError(
            f"row {row + 2} {ROW}: empty 'instance' cell; fill it in or delete the row",
            source=label,
        )
    names = scale_names(scale)
    if names is None:
        truth = pd.to_numeric(df["truth"], errors="coerce").to_numpy(float, na_value=np.nan)
    else:
        where = {n: float(i + 1) for i, n in enumerate(names)}
        truth = df["truth"].astype(str).str.strip().map(where).to_numpy(float, na_value=np.nan)
    bad = ~np.isfinite(truth)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raw = str(df["truth"].iloc[row])
        what = "empty" if raw.strip() == "" else repr(raw[:40])
        rule = (
            "true labels must be numbers on the rating scale"
            if names is None
            else f"true labels must be the scale's levels {', '.join(names)}"
        )
        raise InputError(
            f"row {row + 2} {ROW}: truth {what} is not "
            f"{'a number' if names is None else 'a level of the scale'} ({int(bad.sum())} "
            f"such row(s)); {rule}",
            source=label,
        )
    s = pd.Series(truth, index=pd.Index(inst.to_numpy(dtype=object), name="instance"))
    dup = s.index.duplicated(keep=False)
    if dup.any():
        first = s.groupby(level=0, sort=False).transform("first").to_numpy()
        clash = truth != first
        if clash.any():
            row = int(np.flatnonzero(clash)[0])
            key = s.index[row]
            raise InputError(
                f"row {row + 2} {ROW}: instance {key!r} has truth {truth[row]:g} here but "
                f"{first[row]:g} earlier; keep one true label per instance",
                source=label,
            )
        s = s[~s.index.duplicated(keep="first")]
    return s.rename("truth")
