"""Where a Dask fit's ratings come from: a Parquet folder or file, CSV/TSV read in blocks, or a
pandas or Dask DataFrame, with the in-memory reader's column checks and messages."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..data.columns import COLUMN_ALIASES
from ..data.crowd import CrowdData, normalize_columns
from ..errors import InputError
from ..io import PARQUET_EXTENSIONS, TEXT_EXTENSIONS


def _short(e: BaseException, n: int = 160) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= n else text[: n - 3] + "..."


def column_mapping(columns: list, label: str) -> dict:
    """Input column -> canonical name, with ``data.normalize_columns``' checks and messages."""
    probe = pd.DataFrame([["1"] * len(columns)], columns=columns)
    normalize_columns(probe, source=label)  # raises the same errors as the in-memory reader
    out = {}
    for c in columns:
        canon = COLUMN_ALIASES.get(str(c).strip().lower())
        if canon is not None:
            out[c] = canon
    return out


def read_source(ratings, blocksize: str | int) -> tuple:
    """``(dask DataFrame, label)`` for a path, a pandas or a Dask DataFrame.

    Paths: a folder is a Parquet dataset; ``.parquet``/``.pq`` a Parquet file; ``.csv``,
    ``.tsv``, ``.tab``, ``.txt`` delimited text read in blocks of ``blocksize`` bytes, every
    column as text.
    """
    import dask.dataframe as dd

    if isinstance(ratings, CrowdData):
        raise InputError(
            "DaskOrdinalMixture takes a ratings table (path, pandas or Dask DataFrame), "
            "not a prepared CrowdData"
        )
    if isinstance(ratings, pd.DataFrame):
        if len(ratings) == 0:
            raise InputError("no ratings (the table has a header but no rows)", source="ratings")
        n = max(1, min(8, len(ratings) // 50_000 + 1))
        return dd.from_pandas(ratings, npartitions=n, sort=False), "ratings"
    if isinstance(ratings, dd.DataFrame):
        return ratings, "ratings"
    if not isinstance(ratings, (str, os.PathLike)):
        raise InputError(
            f"expected a path, a pandas or a Dask DataFrame, got {type(ratings).__name__}"
        )
    label = os.fspath(ratings)
    path = Path(ratings)
    if not path.exists():
        raise InputError("file not found; check the path", source=label)
    ext = path.suffix.lower()
    try:
        if path.is_dir() or ext in PARQUET_EXTENSIONS:
            ddf = dd.read_parquet(str(path))
        elif ext in TEXT_EXTENSIONS:
            if path.stat().st_size == 0:
                raise InputError(
                    "the file is empty (0 bytes); export the ratings again with a header row "
                    "annotator,instance,rating",
                    source=label,
                )
            ddf = dd.read_csv(
                str(path),
                sep=TEXT_EXTENSIONS[ext],
                dtype=str,
                keep_default_na=False,
                na_filter=False,
                blocksize=blocksize,
                encoding="utf-8-sig",
            )
        else:
            raise InputError(
                f"unknown file type {ext or '(no extension)'!r}; the Dask engine reads a "
                f"Parquet folder or file, or {', '.join(TEXT_EXTENSIONS)} text",
                source=label,
            )
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - a reader's error is a bad file
        raise InputError(f"cannot be read ({_short(e)}); check the file", source=label) from e
    return ddf, label
