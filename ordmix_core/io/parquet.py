"""Parquet files as a table of text columns (numbers as ``"1"``, nulls as ``""``), in Arrow.

The columns stay Arrow strings (no Python object per value); the readers code IDs from them.
Everything that can go wrong (damaged pages, invalid UTF-8, duplicate column names, values
that are neither text nor numbers) is an InputError naming the file and the column.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .sniff import ROW, check_header, short
from .text import pa_text_type


def read_parquet(data: bytes, label: str, large: bool = True) -> Any:
    """A ``pyarrow.Table`` whose every column is text (``large_string``, or ``string`` with
    ``large=False``), nulls as ``""``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except Exception as e:
        _refuse_duplicate_names(data, label)  # pyarrow calls them "damaged"
        raise InputError(
            f"could not be read as Parquet ({short(e)}); the file may be truncated or "
            "damaged: export it again",
            source=label,
        ) from None
    try:
        names = [str(c) for c in table.column_names]
    except Exception:
        raise InputError(
            "has column names that are not valid UTF-8; the file is damaged: export it again",
            source=label,
        ) from None
    check_header(names, label)
    if table.num_rows == 0:
        raise InputError(
            "has columns but no rows; export the ratings again with at least one row",
            source=label,
        )
    text = pa_text_type(large)
    cols = []
    for nm, col in zip(names, table.columns, strict=True):
        try:
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            if col.type != text:
                col = col.cast(text)
            cols.append(pc.fill_null(col, ""))
        except Exception:
            raise InputError(
                f"column {nm!r} holds {col.type} values, which are not plain text or numbers; "
                "store IDs and ratings as text or numbers",
                source=label,
            ) from None
    del table
    for nm, col in zip(names, cols, strict=True):  # damaged pages can carry invalid UTF-8
        try:
            col.validate(full=True)
        except Exception:
            raise InputError(
                f"column {nm!r} holds text that is not valid UTF-8{_bad_utf8_row(col)}; the "
                "file is damaged or was written with a wrong encoding: export it again",
                source=label,
            ) from None
    return pa.table(cols, names=names)


def _refuse_duplicate_names(data: bytes, label: str) -> None:
    """The duplicate-column message, if the schema (read alone) has two equal names."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        names = [str(c) for c in pq.ParquetFile(pa.BufferReader(data)).schema_arrow.names]
    except Exception:
        return
    check_header(names, label)


def _bad_utf8_row(col: Any) -> str:
    """`` (row N, ...)`` for the first invalid UTF-8 value of a string column, if found."""
    import pyarrow as pa

    try:
        for i, v in enumerate(col.cast(pa.binary()).to_pylist()):
            if v is not None:
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError:
                    return f" (row {i + 2} {ROW})"
    except Exception:  # pragma: no cover - best effort only
        pass
    return ""
