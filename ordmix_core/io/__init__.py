"""Reading rating files and writing results, safely.

Everything a user uploads or names on the command line comes through these readers: files
are only ever *parsed as data* (CSV/TSV text or Parquet; no pickle, no eval), every column is
read as text (IDs such as ``"007"`` keep their leading zeros) and anything unusable is refused
with one :class:`~ordmix_core.errors.InputError` naming the file, the row or column, and the
fix. Tables are written through :func:`write_csv` / :func:`csv_safe` (no spreadsheet formulas
smuggled in through IDs); whole output folders through ``ordmix_core.results.output_paths``.

One module per concern:

- :mod:`.sniff`: what a source is (bytes, name, extension, magic bytes: workbooks, archives,
  pickles, UTF-16 and UTF-32 are refused by name);
- :mod:`.text`: CSV/TSV encoding, dialect, strict validation and the fast pyarrow parse;
- :mod:`.parquet`: Parquet files as text columns;
- :mod:`.readers`: :func:`read_table`, :func:`read_ratings` (IDs coded: Categoricals of the
  sorted distinct IDs), :func:`read_crowd` (straight to ``CrowdData``), :func:`read_gold`;
  the column checks are ``ordmix_core.data.crowd``'s;
- :mod:`.writing`: :func:`csv_safe`, :func:`csv_unescape`, :func:`write_csv`,
  :func:`write_csv_chunks`, :func:`to_csv_bytes`.
"""

from ..data.columns import GOLD_ALIASES
from .readers import read_arrow, read_crowd, read_gold, read_ratings, read_table
from .sniff import ACCEPTED, MAX_UPLOAD_MB, PARQUET_EXTENSIONS, TEXT_EXTENSIONS, Source
from .text import DELIMITERS, MAX_CELL_CHARS
from .writing import (
    ESCAPED,
    FORMULA_PREFIXES,
    csv_safe,
    csv_unescape,
    to_csv_bytes,
    write_csv,
    write_csv_chunks,
)

__all__ = [
    "ACCEPTED",
    "DELIMITERS",
    "ESCAPED",
    "FORMULA_PREFIXES",
    "GOLD_ALIASES",
    "MAX_CELL_CHARS",
    "MAX_UPLOAD_MB",
    "PARQUET_EXTENSIONS",
    "TEXT_EXTENSIONS",
    "Source",
    "csv_safe",
    "csv_unescape",
    "read_arrow",
    "read_crowd",
    "read_gold",
    "read_ratings",
    "read_table",
    "to_csv_bytes",
    "write_csv",
    "write_csv_chunks",
]
