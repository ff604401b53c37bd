"""What a source is: its bytes, the name messages use, its extension and its real format.

Every reader starts here. A source is a path, or the bytes / binary file object of an upload
with its original file name. The extension chooses the format; the content (magic bytes)
must agree, so that a workbook, an archive, a pickle or UTF-16 or UTF-32 text is refused by
name with the fix instead of being parsed as garbage.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

from ..errors import InputError

#: Largest upload the dashboard accepts, in megabytes (its ``server.maxUploadSize``): over
#: 10 million ratings as CSV with short IDs. Readers take any size given as a path.
MAX_UPLOAD_MB = 200

#: accepted extensions -> format ("csv" means delimited text with that default delimiter)
TEXT_EXTENSIONS = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".txt": "\t"}
PARQUET_EXTENSIONS = (".parquet", ".pq")
ACCEPTED = ", ".join([*TEXT_EXTENSIONS, *PARQUET_EXTENSIONS])
ROW = "(counting the header as row 1)"

Source = str | os.PathLike | bytes | bytearray | memoryview | IO[bytes]


def label_of(source: Source, name: str | None) -> str:
    """The file name used in messages: ``name``, else the path, else the object's name."""
    if name:
        return str(name)
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    got = getattr(source, "name", None)
    return str(got) if isinstance(got, (str, os.PathLike)) and str(got) else "upload"


def load(source: Source, name: str | None) -> tuple[bytes, str, str | None]:
    """Bytes, display label and lower-case extension (None when unknown and unnamed)."""
    label = label_of(source, name)
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


def sniff_kind(data: bytes) -> str:
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
    if head.startswith(b"\xff\xfe\x00\x00") or head.startswith(b"\x00\x00\xfe\xff"):
        return "UTF-32 encoded text"
    if head.startswith(b"\xff\xfe") or head.startswith(b"\xfe\xff"):
        return "UTF-16 encoded text"
    order = _utf16_without_bom(data)
    if order:
        return f"UTF-16 encoded text ({order}, without a byte-order mark)"
    return "text"


def _utf16_without_bom(data: bytes) -> str | None:
    """'little-endian' / 'big-endian' when the start decodes as UTF-16 text (not UTF-8)."""
    sample = data[:4096]
    if b"\x00" not in sample or len(sample) < 4:
        return None
    sample = sample[: len(sample) // 2 * 2]
    for codec, order in (("utf-16-le", "little-endian"), ("utf-16-be", "big-endian")):
        text = sample.decode(codec, errors="replace")
        shown = sum(ch.isprintable() or ch in "\t\r\n" for ch in text)
        if shown >= 0.95 * len(text) and "\ufffd" not in text[:-1] and "\x00" not in text:
            if any(d in text for d in ",\t;|") or "\n" in text or "\r" in text:
                return order
    return None


def kind_fix(kind: str) -> str:
    if kind == "parquet":
        return "rename it to .parquet (or export it as CSV)"
    if "Excel" in kind or "spreadsheet" in kind:
        return "save the sheet as CSV (UTF-8) and use that file"
    if kind.startswith(("UTF-16", "UTF-32")):
        return "save it as UTF-8 (e.g. Excel's 'CSV UTF-8')"
    if kind == "a Python pickle":
        return "pickles are never loaded (they can run code); export the table as CSV"
    return "decompress or convert it to CSV first"


def preview(data: bytes | str, n: int = 40) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.splitlines()[0] if text.strip() else text
    return text[:n] + ("..." if len(text) > n else "")


def short(e: BaseException, n: int = 160) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return msg[:n] + ("..." if len(msg) > n else "")


def check_header(names: list[str], label: str) -> None:
    """Two columns with the same (stripped) name are refused, naming both positions."""
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
