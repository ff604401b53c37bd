"""Delimited text (CSV/TSV): encoding, dialect, strict validation, then a fast parse.

:func:`read_text` turns the bytes of a text file into a ``pyarrow.Table`` of string columns
(empty cells ``""``), or raises one InputError naming the row and the fix. Two paths give the
same table and the same messages:

- **fast**: when the data rows hold no quote character and no blank line, every physical line
  is a record, so pyarrow's multithreaded CSV parser (no quoting) is exact; it also counts the
  fields of every row. Anything it does not accept goes to the precise path.
- **precise**: Python's ``csv`` module in strict mode reads record by record and names the
  first bad row (broken quoting, wrong field count, blank line, a value too long); pyarrow then
  parses the validated text, with quoting, and both must agree on the shape.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..data.columns import COLUMN_ALIASES, GOLD_ALIASES
from ..errors import InputError
from .sniff import ROW, check_header, short

#: delimiters tried when sniffing, in order of preference after the extension's default
DELIMITERS = (",", "\t", ";", "|")
#: the longest value read, in characters, on both paths (Python csv's field limit is raised to
#: it while a file is read, and restored after)
MAX_CELL_CHARS = 1 << 20
#: pyarrow's block: a row must fit in one, so it holds the longest value at 4 bytes a character
_BLOCK_BYTES = 4 * MAX_CELL_CHARS + (1 << 20)
_KNOWN_NAMES = set(COLUMN_ALIASES) | set(GOLD_ALIASES)
_SNIFF_BYTES = 1 << 16
_BOM = b"\xef\xbb\xbf"
_NONBLANK = re.compile(rb"[^ \t\r\n\x0b\x0c]")
_DELIM_NAMES = {
    ",": "comma",
    "\t": "tab",
    ";": "semicolon",
    "|": "pipe",
    " ": "space",
    ":": "colon",
}


def read_text(data: bytes, label: str, default: str, large: bool = True) -> Any:
    """Validate and parse delimited text; a ``pyarrow.Table`` of string columns
    (``large_string``, pandas' ``str``, or with ``large=False`` the smaller ``string``)."""
    with _csv_field_limit():
        return _read_text(data, label, default, large)


@contextlib.contextmanager
def _csv_field_limit() -> Iterator[None]:
    """Python csv's field limit at ``MAX_CELL_CHARS`` for the block, the caller's after."""
    old = csv.field_size_limit(MAX_CELL_CHARS)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _read_text(data: bytes, label: str, default: str, large: bool) -> Any:
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(
            f"contains a NUL byte at byte offset {nul} (line {_line_of(data, nul)}): "
            "this is a binary file, not CSV/TSV text; export the ratings as CSV (UTF-8)",
            source=label,
        )
    try:
        pos, delim = _dialect(data, default, label)
    except InputError:
        _refuse_invalid_utf8(data, label)  # a wrong encoding is the first thing to say
        raise
    text = pa_text_type(large)
    table = _fast(data, pos, delim, label, text)  # checks UTF-8 as it parses
    if table is None:
        _refuse_invalid_utf8(data, label)
        table = _precise(data[pos:], delim, label, text)
    return table


def _dialect(data: bytes, default: str, label: str) -> tuple[int, str]:
    """Where the header starts (after a BOM and Excel's ``sep=`` line) and the delimiter."""
    pos = 3 if data.startswith(_BOM) else 0
    m = re.match(rb"sep=([^\r\n])(\r\n|\r|\n)", data[pos : pos + 16])
    if m:  # Excel's "sep=;" hint line: obey it and drop it
        delim = m.group(1).decode("utf-8", "replace")
        pos += m.end()
        if delim not in DELIMITERS:
            raise InputError(
                f"the first line asks for delimiter {delim!r}; ordmix reads comma-, tab-, "
                "semicolon- or pipe-separated files: export again with one of those",
                source=label,
            )
    if not _NONBLANK.search(data, pos):
        raise InputError(
            "has no header row (only blank lines); the first row must name the columns "
            "annotator,instance,rating",
            source=label,
        )
    if not m:
        delim = _choose_delimiter(data[pos : pos + _SNIFF_BYTES + 1], default, label)
    return pos, delim


def pa_text_type(large: bool) -> Any:
    """``large_string`` (what pandas' ``str`` holds: no copy into pandas) or ``string``."""
    import pyarrow as pa

    return pa.large_string() if large else pa.string()


def _refuse_invalid_utf8(data: bytes, label: str) -> None:
    bad = _invalid_utf8_at(data)
    if bad is not None:
        raise InputError(
            f"is not UTF-8 text: byte 0x{data[bad]:02X} at byte offset {bad} "
            f"(line {_line_of(data, bad)}) is invalid; save the file as UTF-8 "
            "(e.g. Excel's 'CSV UTF-8')",
            source=label,
        )


def _invalid_utf8_at(data: bytes) -> int | None:
    """Byte offset of the first invalid UTF-8 sequence, else None (no decoded copy made)."""
    import pyarrow as pa

    offsets = pa.array([0, len(data)], type=pa.int64()).buffers()[1]
    raw = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])
    try:
        raw.cast(pa.large_string())  # validates, shares the buffer
        return None
    except pa.ArrowInvalid:
        pass
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return None  # pragma: no cover - pyarrow and Python disagree: trust Python


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


# --------------------------------------------------------------------------- dialect


def _sample_rows(sample: str, delim: str) -> tuple[list[list[str]], bool]:
    """Rows of the sample under ``delim`` and whether they parsed cleanly."""
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(sample, newline=""), delimiter=delim, strict=True):
            rows.append(row)
    except csv.Error:
        return rows, False
    return rows, True


def _choose_delimiter(head: bytes, default: str, label: str) -> str:
    """Pick the delimiter giving a multi-column header, consistent rows and known names.

    ``head``: the text's first ``_SNIFF_BYTES`` bytes (one more tells that it was cut).
    """
    truncated = len(head) > _SNIFF_BYTES
    sample = head[:_SNIFF_BYTES].decode("utf-8", "ignore")
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


def _names(header: list[str]) -> list[str]:
    """Column names: an empty header cell (say, from a trailing delimiter) is ``Unnamed: i``."""
    return [h if h.strip() else f"Unnamed: {i}" for i, h in enumerate(header)]


# --------------------------------------------------------------------------- fast path


def _fast(data: bytes, pos: int, delim: str, label: str, text: Any) -> Any | None:
    """The table when every data row is one line without quotes or blank lines, else None."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    nl = [i for i in (data.find(b"\n", pos), data.find(b"\r", pos)) if i >= 0]
    eol = min(nl) if nl else len(data)
    head = data[pos:eol]
    if head.count(b'"') % 2:  # a line break inside a quoted header name
        return None
    try:
        header = next(csv.reader([head.decode("utf-8")], delimiter=delim, strict=True))
    except (csv.Error, StopIteration, UnicodeDecodeError):
        return None
    if len(header) < 2:
        return None
    start = eol + (2 if data.startswith(b"\r\n", eol) else 1)
    end = len(data)
    while end > start and data[end - 1] in (10, 13):  # trailing blank lines are fine
        end -= 1
    if end <= start or data.find(b'"', start, end) >= 0:
        return None
    fields = [f"f{i}" for i in range(len(header))]
    try:
        table = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(data).slice(start, end - start)),
            read_options=pacsv.ReadOptions(column_names=fields, block_size=_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(
                delimiter=delim, quote_char=False, ignore_empty_lines=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={f: text for f in fields},
                strings_can_be_null=False,
            ),
        )
    except Exception:  # wrong field count, invalid UTF-8, ...: say which, precisely
        return None
    if _has_empty_row(table):  # a blank line (or a row of empty cells): say which, precisely
        return None
    check_header(header, label)
    names = _names(header)
    _refuse_long_cells(table, names, label)
    return table.rename_columns(names)


def _has_empty_row(table: Any) -> bool:
    """Some row has every cell empty (pyarrow reads a blank line so, as ``,,`` is read)."""
    import pyarrow.compute as pc

    empty = None
    for col in table.columns:
        if pc.min(pc.binary_length(col)).as_py() != 0:
            return False  # this column is never empty, so no row is all empty
        e = pc.equal(pc.binary_length(col), 0)
        empty = e if empty is None else pc.and_(empty, e)
    return bool(pc.any(empty).as_py())


def _refuse_long_cells(table: Any, names: list[str], label: str) -> None:
    """The precise path's limit on a value's length, with the same message."""
    import pyarrow.compute as pc

    for name, col in zip(names, table.columns, strict=True):
        longest = pc.max(pc.binary_length(col)).as_py() or 0
        if longest <= MAX_CELL_CHARS:
            continue
        chars = np.asarray(pc.utf8_length(col), dtype=np.int64)
        over = np.flatnonzero(chars > MAX_CELL_CHARS)
        if over.size:
            i = int(over[0])
            raise InputError(_long_message(i + 2, name, int(chars[i])), source=label)


def _long_message(row: int, name: str, length: int) -> str:
    return (
        f"row {row} {ROW}: the value in column {name!r} is {length:,} characters long; "
        f"values longer than {MAX_CELL_CHARS:,} characters are not read (an ID or rating is "
        "short text): check that row, e.g. for a pasted text or a missing delimiter"
    )


# --------------------------------------------------------------------------- precise path


def _precise(body: bytes, delim: str, label: str, text: Any) -> Any:
    """Strict record-by-record validation, then pyarrow with quoting; shapes must agree."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    nrows, header = _validate_rows(body, delim, label)
    # The strict pass above is the validator; pyarrow then parses the same dialect fast
    # (every column as string, empty cells as "", trailing blank lines ignored).
    try:
        table = pacsv.read_csv(
            pa.BufferReader(body),
            read_options=pacsv.ReadOptions(block_size=_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=delim, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={h: text for h in header},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        table = table.rename_columns(_names(header))
    except Exception as e:
        raise InputError(
            f"could not be parsed ({short(e)}); check the quoting and delimiters", source=label
        ) from None
    if (table.num_rows, table.num_columns) != (nrows, len(header)):  # both passes agree
        raise InputError(
            f"could not be parsed consistently (read {table.num_rows} rows x "
            f"{table.num_columns} columns, expected {nrows} x {len(header)}); check quotes "
            "and line breaks inside values",
            source=label,
        )
    return table


def _reader(body: bytes, delim: str):
    text = io.TextIOWrapper(io.BytesIO(body), encoding="utf-8", newline="")
    return csv.reader(text, delimiter=delim, strict=True)


def _validate_rows(body: bytes, delim: str, label: str) -> tuple[int, list[str]]:
    """One strict pass over all records: quoting, blank rows, field counts, header names.

    Returns (data rows, header). Rows are counted as records, header = row 1, the same
    numbering :func:`~ordmix_core.data.crowd.normalize_columns` uses. This pass only counts
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
    check_header(header, label)
    return end, header


def _explain_rows(body: bytes, delim: str, label: str) -> tuple[int, list[str]]:
    """Record-by-record version of :func:`_validate_rows` that names the first bad row."""
    text = body.decode("utf-8")
    consumed = 0  # characters of ``text`` handed to the csv reader so far

    def lines():
        nonlocal consumed
        for line in io.StringIO(text, newline=""):
            consumed += len(line)
            yield line

    reader = csv.reader(lines(), delimiter=delim, strict=True)
    dname = _DELIM_NAMES.get(delim, repr(delim))
    row_no = 0
    ncols = 0
    header: list[str] = []
    blank_at = 0  # first blank row after the header (fine only if nothing but blanks follows)
    last = 1  # last non-blank row
    record_start = 0  # where the record being read starts in ``text``
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
                check_header(row, label)
                header = row
                ncols = len(row)
            elif not row:
                blank_at = blank_at or row_no
            elif blank_at:
                raise InputError(
                    f"row {blank_at} {ROW} is blank but more rows follow; delete the empty line(s)",
                    source=label,
                )
            elif len(row) != ncols:
                shown = delim.join(row)
                shown = shown[:60] + ("..." if len(shown) > 60 else "")
                raise InputError(
                    f"row {row_no} {ROW} has {len(row)} field(s) but the header has {ncols} "
                    f"({dname}-separated): {shown!r}; quote values that contain a {dname} "
                    "and fill in or remove missing/extra fields",
                    source=label,
                )
            else:
                last = row_no
            record_start = consumed
    except csv.Error as e:
        row_no += 1
        why = str(e)
        if "field limit" in why or "field larger" in why:
            found = _long_or_unclosed(text, record_start, delim)
            if found is not None and found[0] == "long":
                _, k, length = found
                name = _names(header)[k] if k < len(header) else f"field {k + 1}"
                raise InputError(_long_message(row_no, name, length), source=label) from None
            detail = "a quoted value opened on this row is never closed"
        elif "end of data" in why:
            detail = "a quoted value opened on this row is never closed"
        else:
            detail = f"stray quote character ({why})"
        raise InputError(
            f"row {row_no} {ROW}: broken quoting: {detail}; close the quote, or double "
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


def _long_or_unclosed(text: str, start: int, delim: str) -> tuple | None:
    """Why csv hit its field limit in the record at ``start``: ``("long", field, length)``
    for a value over ``MAX_CELL_CHARS``, ``("unclosed", field, None)`` for a quote never
    closed, None if neither is found."""
    n = len(text)
    p, k = start, 0
    while p <= n:
        if p < n and text[p] == '"':
            q = p + 1
            while True:  # the closing quote: a quote not doubled
                j = text.find('"', q)
                if j < 0:
                    return ("unclosed", k, None)
                if text.startswith('""', j):
                    q = j + 2
                    continue
                break
            length = j - p - 1 - text.count('""', p + 1, j)
            p = j + 1
        else:
            length = 0
        stop = min(
            (i for i in (text.find(delim, p), text.find("\n", p), text.find("\r", p)) if i >= 0),
            default=n,
        )
        length += stop - p
        if length > MAX_CELL_CHARS:
            return ("long", k, length)
        if stop >= n or text[stop] in "\r\n":
            return None
        p, k = stop + 1, k + 1
    return None
