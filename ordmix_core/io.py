"""Reading rating files and writing results, safely.

Everything a user uploads or names on the command line comes through :func:`read_table`:
files are only ever *parsed as data* (CSV/TSV text or Parquet; no pickle, no eval), every
column is read as a string (IDs such as ``"007"`` keep their leading zeros) and anything
unusable is refused with one :class:`~ordmix_core.errors.InputError` naming the file, the
row or column, and the fix. Results are written through ``outpaths.atomic_output_dir`` (an
interrupted run never leaves half an output) and :func:`csv_safe` (no spreadsheet formulas
smuggled in through IDs).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from .data import COLUMN_ALIASES, Scale, as_scale, fmt_scale, map_aliases, normalize_columns
from .errors import InputError

#: Largest upload the dashboard accepts, in megabytes (its ``server.maxUploadSize``): over
#: 10 million ratings as CSV with short IDs. Readers take any size given as a path.
MAX_UPLOAD_MB = 200

#: accepted extensions -> format ("csv" means delimited text with that default delimiter)
TEXT_EXTENSIONS = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".txt": "\t"}
PARQUET_EXTENSIONS = (".parquet", ".pq")
ACCEPTED = ", ".join([*TEXT_EXTENSIONS, *PARQUET_EXTENSIONS])
#: delimiters tried when sniffing, in order of preference after the extension's default
DELIMITERS = (",", "\t", ";", "|")
#: column names of the gold-standard file -> canonical name
GOLD_ALIASES = {
    "instance": "instance",
    "task": "instance",
    "item": "instance",
    "truth": "truth",
    "true_label": "truth",
    "label": "truth",
    "gold": "truth",
}
#: cells a spreadsheet would execute start with one of these
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

_KNOWN_NAMES = set(COLUMN_ALIASES) | set(GOLD_ALIASES)
_SNIFF_BYTES = 1 << 16
_BOM = b"\xef\xbb\xbf"
_DELIM_NAMES = {
    ",": "comma",
    "\t": "tab",
    ";": "semicolon",
    "|": "pipe",
    " ": "space",
    ":": "colon",
}
_ROW = "(counting the header as row 1)"


Source = str | os.PathLike | bytes | bytearray | memoryview | IO[bytes]


# --------------------------------------------------------------------------- reading


def read_table(source: Source, name: str | None = None) -> pd.DataFrame:
    """Read a CSV/TSV/Parquet table with every column as string.

    ``source`` is a path, or the bytes / binary file object of an upload with ``name`` its
    original filename (the extension picks the format; without one the content does).
    Empty cells are ``""``. Raises InputError for anything that is not a clean table.
    """
    data, label, ext = _load(source, name)
    if not data:
        raise InputError(
            "the file is empty (0 bytes); export the ratings again with a header row "
            "annotator,instance,rating",
            source=label,
        )
    kind = _sniff_kind(data)
    if ext in PARQUET_EXTENSIONS or (ext is None and kind == "parquet"):
        if kind != "parquet":
            what = "text (it starts " + repr(_preview(data)) + ")" if kind == "text" else kind
            raise InputError(
                f"the file is named {ext or 'as Parquet'} but is not a Parquet file: it is "
                f"{what}; rename it to .csv/.tsv if it is text, or export it again as Parquet",
                source=label,
            )
        return _read_parquet(data, label)
    if kind != "text":
        raise InputError(
            f"the file is {'a Parquet file' if kind == 'parquet' else kind}, not "
            f"{'CSV/TSV' if ext is None else ext} text; {_kind_fix(kind)}",
            source=label,
        )
    return _read_text(data, label, TEXT_EXTENSIONS.get(ext or ".csv", ","))


def read_ratings(
    source: Source,
    name: str | None = None,
    scale: Scale | Sequence[float] | str | None = None,
) -> pd.DataFrame:
    """Read a ratings file into ``annotator, instance, rating[, query]`` (see normalize_columns).

    With ``scale`` given, every rating must be on it; without, the scale is the distinct
    values seen. Repeated (annotator, instance) pairs are kept as separate ratings.
    """
    label = _label(source, name)
    df = normalize_columns(read_table(source, name), source=label)
    if scale is not None:
        r = df["rating"].to_numpy(dtype=float)
        sc = as_scale(scale, r)
        off = sc.index_of(r) < 0
        if off.any():
            row = int(np.flatnonzero(off)[0])
            raise InputError(
                f"row {row + 2} {_ROW}: rating {r[row]:g} is not on the scale "
                f"{fmt_scale(sc.values)} ({int(off.sum())} such row(s)); fix the rating or "
                "give the scale that includes it (--scale)",
                source=label,
            )
    return df


def read_gold(source: Source, name: str | None = None) -> pd.Series:
    """Read known true labels: a float Series named ``truth`` indexed by instance (string).

    Columns ``instance, truth`` (or ``task``/``item`` and ``true_label``/``label``/``gold``).
    An instance listed twice must have the same truth both times.
    """
    label = _label(source, name)
    df = read_table(source, name)
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
            f"row {row + 2} {_ROW}: empty 'instance' cell; fill it in or delete the row",
            source=label,
        )
    truth = pd.to_numeric(df["truth"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(truth)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raw = str(df["truth"].iloc[row])
        what = "empty" if raw.strip() == "" else repr(raw[:40])
        raise InputError(
            f"row {row + 2} {_ROW}: truth {what} is not a number ({int(bad.sum())} such "
            "row(s)); true labels must be numbers on the rating scale",
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
                f"row {row + 2} {_ROW}: instance {key!r} has truth {truth[row]:g} here but "
                f"{first[row]:g} earlier; keep one true label per instance",
                source=label,
            )
        s = s[~s.index.duplicated(keep="first")]
    return s.rename("truth")


def _label(source: Source, name: str | None) -> str:
    """The file name used in messages: ``name``, else the path, else the object's name."""
    if name:
        return str(name)
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    got = getattr(source, "name", None)
    return str(got) if isinstance(got, (str, os.PathLike)) and str(got) else "upload"


def _load(source: Source, name: str | None) -> tuple[bytes, str, str | None]:
    """Bytes, display label and lower-case extension (None when unknown and unnamed)."""
    label = _label(source, name)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InputError("file not found; check the path", source=label) from None
        except IsADirectoryError:
            raise InputError(
                "is a folder, not a file; give the ratings file", source=label
            ) from None
        except OSError as e:
            raise InputError(
                f"cannot be read ({e.strerror or e}); check it", source=label
            ) from None
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif hasattr(source, "read"):
        try:
            if hasattr(source, "seek"):
                with contextlib.suppress(Exception):
                    source.seek(0)
            data = source.read()
        except Exception as e:  # a broken stream is the caller's upload, not our bug
            raise InputError(f"cannot be read ({e}); upload it again", source=label) from None
        if isinstance(data, str):
            data = data.encode("utf-8")
        data = bytes(data)
    else:
        raise InputError(
            f"expected a file path, bytes or a binary file, got {type(source).__name__}",
            source=label,
        )
    named = name or (label if label != "upload" else None)
    ext = None
    if named:
        ext = os.path.splitext(named)[1].lower()
        if ext not in TEXT_EXTENSIONS and ext not in PARQUET_EXTENSIONS:
            hint = ""
            if ext in (".xlsx", ".xls", ".xlsm", ".ods", ".numbers"):
                hint = " Save the sheet as CSV (UTF-8) first."
            elif ext in (".gz", ".zip", ".bz2", ".xz", ".7z", ".tgz"):
                hint = " Decompress it first."
            elif ext in (".pkl", ".pickle", ".joblib", ".npy", ".npz"):
                hint = " Pickled/NumPy files are never loaded (they can run code); export CSV."
            raise InputError(
                f"unknown file type {ext or '(no extension)'!r}; accepted: {ACCEPTED}.{hint}",
                source=label,
            )
    return data, label, ext


def _sniff_kind(data: bytes) -> str:
    """'parquet', 'text' or a description of the binary format found by its magic bytes."""
    head = data[:8]
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        if b"xl/" in data[:65536]:
            return "an Excel workbook (.xlsx)"
        if b"opendocument.spreadsheet" in data[:200]:
            return "an OpenDocument spreadsheet (.ods)"
        return "a zip archive"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "an old Excel workbook (.xls)"
    if head.startswith(b"\x1f\x8b"):
        return "gzip-compressed"
    if (
        head.startswith(b"BZh")
        or head.startswith(b"\xfd7zXZ\x00")
        or head.startswith(b"7z\xbc\xaf")
    ):
        return "compressed (bz2/xz/7z)"
    if head.startswith(b"%PDF"):
        return "a PDF document"
    if head.startswith(b"\x80") and len(data) > 1 and data[1] in range(2, 6):
        return "a Python pickle"
    if head.startswith(b"\xff\xfe") or head.startswith(b"\xfe\xff"):
        return "UTF-16 encoded text"
    return "text"


def _kind_fix(kind: str) -> str:
    if kind == "parquet":
        return "rename it to .parquet (or export it as CSV)"
    if "Excel" in kind or "spreadsheet" in kind:
        return "save the sheet as CSV (UTF-8) and use that file"
    if kind == "UTF-16 encoded text":
        return "save it as UTF-8 (e.g. Excel's 'CSV UTF-8')"
    if kind == "a Python pickle":
        return "pickles are never loaded (they can run code); export the table as CSV"
    return "decompress or convert it to CSV first"


def _preview(data: bytes | str, n: int = 40) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.splitlines()[0] if text.strip() else text
    return text[:n] + ("..." if len(text) > n else "")


def _read_parquet(data: bytes, label: str) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except Exception as e:
        raise InputError(
            f"could not be read as Parquet ({_short(e)}); the file may be truncated or "
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
    _check_header(names, label)
    if table.num_rows == 0:
        raise InputError(
            "has columns but no rows; export the ratings again with at least one row",
            source=label,
        )
    cols = {}
    for nm, col in zip(names, table.columns, strict=True):
        try:
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                col = col.cast(pa.string())
            cols[nm] = pc.fill_null(col, "")
        except Exception:
            raise InputError(
                f"column {nm!r} holds {col.type} values, which are not plain text or numbers; "
                "store IDs and ratings as text or numbers",
                source=label,
            ) from None
    for nm, col in cols.items():  # a damaged file can carry invalid UTF-8 in string pages
        try:
            col.validate(full=True)
        except Exception:
            raise InputError(
                f"column {nm!r} holds text that is not valid UTF-8{_bad_utf8_row(col)}; the "
                "file is damaged or was written with a wrong encoding: export it again",
                source=label,
            ) from None
    try:
        return pa.table(cols).to_pandas()
    except Exception as e:  # pragma: no cover - defensive
        raise InputError(f"could not be converted ({_short(e)})", source=label) from None


def _bad_utf8_row(col: Any) -> str:
    """`` (row N, ...)`` for the first invalid UTF-8 value of a string column, if found."""
    import pyarrow as pa

    try:
        for i, v in enumerate(col.cast(pa.binary()).to_pylist()):
            if v is not None:
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError:
                    return f" (row {i + 2} {_ROW})"
    except Exception:  # pragma: no cover - best effort only
        pass
    return ""


def _check_header(names: list[str], label: str) -> None:
    stripped = [n.strip() for n in names]
    seen: dict[str, int] = {}
    for i, n in enumerate(stripped):
        if n == "":
            continue
        if n in seen:
            raise InputError(
                f"column name {n!r} appears more than once (columns {seen[n] + 1} and {i + 1}); "
                "rename or delete the extra column",
                source=label,
            )
        seen[n] = i


def _read_text(data: bytes, label: str, default: str) -> pd.DataFrame:
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(
            f"contains a NUL byte at byte offset {nul} (line {_line_of(data, nul)}): "
            "this is a binary file, not CSV/TSV text; export the ratings as CSV (UTF-8)",
            source=label,
        )
    start = 3 if data.startswith(_BOM) else 0
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        off = e.start
        raise InputError(
            f"is not UTF-8 text: byte 0x{data[off]:02X} at byte offset {off} "
            f"(line {_line_of(data, off)}) is invalid; save the file as UTF-8 "
            "(e.g. Excel's 'CSV UTF-8')",
            source=label,
        ) from None
    body = data[start:]
    m = re.match(rb"sep=([^\r\n])(\r\n|\r|\n)", body)
    if m:  # Excel's "sep=;" hint line: obey it and drop it
        delim = m.group(1).decode("utf-8")
        body = body[m.end() :]
        if delim not in DELIMITERS:
            raise InputError(
                f"the first line asks for delimiter {delim!r}; ordmix reads comma-, tab-, "
                "semicolon- or pipe-separated files: export again with one of those",
                source=label,
            )
    if not body.strip():
        raise InputError(
            "has no header row (only blank lines); the first row must name the columns "
            "annotator,instance,rating",
            source=label,
        )
    if not m:
        delim = _choose_delimiter(body, default, label)
    nrows, header = _validate_rows(body, delim, label)
    # The strict pass above is the validator; pyarrow then parses the same dialect fast
    # (every column as string, empty cells as "", trailing blank lines ignored).
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(
            pa.BufferReader(body),
            parse_options=pacsv.ParseOptions(delimiter=delim, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={h: pa.string() for h in header},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        names = [h if h.strip() else f"Unnamed: {i}" for i, h in enumerate(header)]
        df = table.rename_columns(names).to_pandas()
    except Exception as e:
        raise InputError(
            f"could not be parsed ({_short(e)}); check the quoting and delimiters", source=label
        ) from None
    if df.shape != (nrows, len(header)):  # the strict pass and the parser must agree exactly
        raise InputError(
            f"could not be parsed consistently (read {df.shape[0]} rows x {df.shape[1]} "
            f"columns, expected {nrows} x {len(header)}); check quotes and line breaks "
            "inside values",
            source=label,
        )
    return df


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _short(e: BaseException, n: int = 160) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return msg[:n] + ("..." if len(msg) > n else "")


def _sample_rows(sample: str, delim: str) -> tuple[list[list[str]], bool]:
    """Rows of the sample under ``delim`` and whether they parsed cleanly."""
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(sample, newline=""), delimiter=delim, strict=True):
            rows.append(row)
    except csv.Error:
        return rows, False
    return rows, True


def _choose_delimiter(body: bytes, default: str, label: str) -> str:
    """Pick the delimiter giving a multi-column header, consistent rows and known names."""
    raw = body[:_SNIFF_BYTES]
    truncated = len(body) > _SNIFF_BYTES
    sample = raw.decode("utf-8", "ignore")
    if truncated:  # drop the (probably cut) last line
        cut = max(sample.rfind("\n"), sample.rfind("\r"))
        sample = sample[: cut + 1] if cut > 0 else sample
    order = [default] + [d for d in DELIMITERS if d != default]
    best: tuple | None = None
    fallback: tuple | None = None
    for d in order:
        rows, ok = _sample_rows(sample, d)
        rows = [r for r in rows if r]
        if not rows or len(rows[0]) < 2:
            continue
        header = rows[0]
        consistent = ok and all(len(r) == len(header) for r in rows[1:])
        known = sum(h.strip().lower() in _KNOWN_NAMES for h in header)
        score = (consistent, known, d == default)
        if consistent and (best is None or score > best[0]):
            best = (score, d)
        if fallback is None or (known, d == default) > fallback[0]:
            fallback = ((known, d == default), d)
    if best is not None and (best[0][1] > 0 or fallback is None or fallback[0][0] == 0):
        return best[1]
    if fallback is not None:
        return fallback[1]  # the strict pass then reports the offending row
    header = (sample.splitlines() or [""])[0]
    guess = max((" ", ":", "~", "^", "#"), key=header.count)
    seems = (
        f"the file seems to use delimiter {guess!r} ({_DELIM_NAMES.get(guess, guess)}); "
        if header.count(guess) > 0
        else ""
    )
    raise InputError(
        f"only one column found (header {header[:60]!r}); {seems}expected columns separated "
        "by commas (CSV) or tabs (TSV) (semicolons and pipes are detected too)",
        source=label,
    )


def _reader(body: bytes, delim: str) -> Iterator[list[str]]:
    text = io.TextIOWrapper(io.BytesIO(body), encoding="utf-8", newline="")
    return csv.reader(text, delimiter=delim, strict=True)


def _validate_rows(body: bytes, delim: str, label: str) -> tuple[int, list[str]]:
    """One strict pass over all records: quoting, blank rows, field counts, header names.

    Returns (data rows, header). Rows are counted as records, header = row 1, the same
    numbering :func:`~ordmix_core.data.normalize_columns` uses. The fast path only counts
    fields; anything irregular is re-read by :func:`_explain_rows` for the exact message.
    """
    reader = _reader(body, delim)
    try:
        header = next(reader, None)
        lens = np.fromiter(map(len, reader), dtype=np.int64)
    except csv.Error:
        return _explain_rows(body, delim, label)
    nonblank = np.flatnonzero(lens)
    if not header or nonblank.size == 0:
        return _explain_rows(body, delim, label)
    end = int(nonblank[-1]) + 1  # trailing blank lines are fine
    if not np.all(lens[:end] == len(header)):
        return _explain_rows(body, delim, label)
    _check_header(header, label)
    return end, header


def _explain_rows(body: bytes, delim: str, label: str) -> tuple[int, list[str]]:
    """Record-by-record version of :func:`_validate_rows` that names the first bad row."""
    reader = _reader(body, delim)
    dname = _DELIM_NAMES.get(delim, repr(delim))
    row_no = 0
    ncols = 0
    header: list[str] = []
    blank_at = 0  # first blank row after the header (fine only if nothing but blanks follows)
    last = 1  # last non-blank row
    try:
        for row in reader:
            row_no += 1
            if row_no == 1:
                if not row:
                    raise InputError(
                        "row 1 is blank; the first row must be the header "
                        "annotator,instance,rating: delete the empty line(s) at the top",
                        source=label,
                    )
                _check_header(row, label)
                header = row
                ncols = len(row)
                continue
            if not row:
                blank_at = blank_at or row_no
                continue
            if blank_at:
                raise InputError(
                    f"row {blank_at} {_ROW} is blank but more rows follow; delete the empty "
                    "line(s)",
                    source=label,
                )
            if len(row) != ncols:
                shown = delim.join(row)
                shown = shown[:60] + ("..." if len(shown) > 60 else "")
                raise InputError(
                    f"row {row_no} {_ROW} has {len(row)} field(s) but the header has {ncols} "
                    f"({dname}-separated): {shown!r}; quote values that contain a {dname} "
                    "and fill in or remove missing/extra fields",
                    source=label,
                )
            last = row_no
    except csv.Error as e:
        row_no += 1
        why = str(e)
        if "end of data" in why or "field limit" in why:
            detail = "a quoted value opened on this row is never closed"
        else:
            detail = f"stray quote character ({why})"
        raise InputError(
            f"row {row_no} {_ROW}: broken quoting: {detail}; close the quote, or double "
            'quotes inside quoted values ("")',
            source=label,
        ) from None
    data_rows = last - 1
    if data_rows <= 0:
        raise InputError(
            "has a header but no data rows; export the ratings again with at least one row",
            source=label,
        )
    return data_rows, header


# --------------------------------------------------------------------------- writing


def csv_safe(df: pd.DataFrame | pd.Series, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Copy of ``df`` with spreadsheet-formula cells neutralised by a leading ``'``.

    Text cells starting with ``= + - @``, tab or carriage return would be executed by Excel /
    LibreOffice on opening the CSV. Applies to ``columns`` (default: every non-numeric
    column), to a text index and to text column labels; numeric columns are left alone.
    """
    out = df.to_frame() if isinstance(df, pd.Series) else df.copy()
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


def _neutralise_one(x: Any) -> Any:
    return "'" + x if isinstance(x, str) and x.startswith(FORMULA_PREFIXES) else x


def _neutralise(values: pd.Series | pd.Index) -> Any:
    arr = np.asarray(values, dtype=object)
    is_str = np.fromiter((isinstance(x, str) for x in arr), bool, len(arr))
    if not is_str.any():
        return values
    s = pd.Series(arr)
    danger = is_str & s.where(is_str, "").astype(str).str.startswith(FORMULA_PREFIXES).to_numpy()
    if not danger.any():
        return values
    arr = arr.copy()
    arr[danger] = np.char.add("'", arr[danger].astype(str)).astype(object)
    if isinstance(values, pd.Series):
        return pd.Series(arr, index=values.index, name=values.name)
    return arr


def _frame_for_csv(df: pd.DataFrame | pd.Series, id_columns: Sequence[str] | None) -> tuple:
    safe = csv_safe(df, id_columns)
    default_index = isinstance(safe.index, pd.RangeIndex) and safe.index.name is None
    return safe, not default_index


def to_csv_bytes(df: pd.DataFrame | pd.Series, id_columns: Sequence[str] | None = None) -> bytes:
    """UTF-8 CSV of ``df`` (formula cells neutralised) for the dashboard's download buttons.

    A meaningful index (named, or not a plain 0..n-1 range) is written as the first column.
    """
    safe, index = _frame_for_csv(df, id_columns)
    return safe.to_csv(index=index, lineterminator="\n").encode("utf-8")


def write_csv(
    df: pd.DataFrame | pd.Series, path: str | os.PathLike, id_columns: Sequence[str] | None = None
) -> Path:
    """Write ``df`` as UTF-8 CSV with formula cells neutralised, atomically (temp + rename)."""
    path = Path(path)
    data = to_csv_bytes(df, id_columns)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path
