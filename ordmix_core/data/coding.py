"""Coding IDs and ratings: each ID column to integer codes of its sorted distinct IDs, without a
Python string per rating, and each rating parsed to a number once per distinct text.

Arrow-backed columns are coded in Arrow (hash and sort), a big column of many distinct short
IDs by ``id_hash``'s partitioned hash (the same codes in about a third of the time); from
``COMPACT_IDS`` instances on, the instance IDs stay Arrow-backed through the fit
(``compact_ids``), and every frame of results takes them through ``id_array``. Empty IDs and
ratings that are not numbers are refused, naming the first rows."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from .columns import (
    ID_COLUMNS,
    WHITESPACE,
    _is_arrow,
)
from .scale import _ROW, Scale, as_scale, fmt_scale, infer_scale


def _ids_dtype(uniq: Any) -> pd.CategoricalDtype:
    """The Categorical dtype of distinct, sorted, non-missing IDs (M,): object, or text
    backed by Arrow for ``COMPACT_IDS`` or more IDs (:func:`_arrow_ids`). pandas' constructor
    checks categories for missing values and duplicates (0.1 s for 2M IDs), which the coding
    rules out; its fast path skips that, where this pandas has it."""
    index = pd.Index(uniq, dtype=object) if isinstance(uniq, np.ndarray) else pd.Index(uniq)
    fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    return fast(index, False) if fast is not None else pd.CategoricalDtype(index)


def _bad_codes(codes: np.ndarray, blank: np.ndarray) -> np.ndarray:
    """(L,) bool: the ID is missing (code -1) or blank (``blank``: per distinct ID)."""
    bad = codes < 0
    if blank.any():
        bad |= blank[codes]
    return bad


def _as_text(col: pd.Series):
    """The column's values as text, without a Python string per row where avoidable."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = col.cat.categories
        if pd.api.types.infer_dtype(cats, skipna=False) == "string":
            return col.array
        return col.astype(str).array
    if _arrow_text(col) is not None:
        return col.array
    return col.astype(str).array


def _arrow_text(col):
    """The pyarrow (chunked) array behind an Arrow-backed text column, else None."""
    if _is_arrow(col):
        import pyarrow as pa

        typ = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        return col if pa.types.is_string(typ) or pa.types.is_large_string(typ) else None
    dt = col.dtype
    arrowish = (isinstance(dt, pd.StringDtype) and dt.storage == "pyarrow") or (
        isinstance(dt, pd.ArrowDtype)
    )
    if not arrowish:
        return None
    import pyarrow as pa

    arr = col.array.__arrow_array__()
    typ = arr.type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return arr
    return None


def _blank_text(arr) -> np.ndarray:
    """Per value of a pyarrow text array: null, or nothing but whitespace (``str.strip``)."""
    import pyarrow.compute as pc

    blank = pc.equal(pc.utf8_length(pc.utf8_trim(arr, WHITESPACE)), 0)
    return np.asarray(pc.fill_null(blank, True), dtype=bool)


def _blank_values(text: pd.Series) -> np.ndarray:
    """Per value of a text column: missing, or nothing but whitespace (``str.strip``)."""
    arr = _arrow_text(text)
    if arr is not None:
        return _blank_text(arr)
    return np.fromiter(
        (not isinstance(x, str) or not x.strip() for x in text), dtype=bool, count=len(text)
    )


def _blank_rows(col: pd.Series) -> np.ndarray:
    """(L,) bool: the ID cell is missing or blank."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = pd.Series(col.cat.categories.astype(str))
        blank_cat = np.append(_blank_values(cats), True)
        return blank_cat[col.cat.codes.to_numpy()]  # code -1 (missing) takes the last entry
    arr = _arrow_text(col)
    if arr is not None:
        return _blank_text(arr)
    return col.isna().to_numpy() | _blank_values(col.astype(str))


def _refuse_empty_ids(bad: np.ndarray, name: str, source: str) -> None:
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"row {row + 2} {_ROW}: empty {name!r} cell; fill it in or delete the row "
            f"({int(bad.sum())} such row(s))",
            source=source,
        )


def factorize_sorted(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """IDs -> ``int32`` codes in the sorted order of the IDs as text, and those distinct IDs.

    Equals ``pd.factorize(col.astype(str), sort=True)`` (codes (L,), uniques (M,) object array
    of ``str``; missing values get -1), without a Python string per row: a Categorical is
    recoded through its categories, Arrow-backed text through pyarrow's hash and sort.
    """
    codes, uniques, _, _ = _code_ids(col)
    return (codes if codes.flags.writeable else codes.copy()), id_array(uniques)


def _code_columns(
    cols: dict[str, pd.Series],
    source: str,
    names: Sequence[str] | None = None,
    spelled: dict[float, str] | None = None,
) -> dict[str, Callable[[], Any]]:
    """:func:`_code_ids` of each ID column and :func:`numeric_ratings` of the ratings (named
    levels ``names``, if given), concurrently for big tables (pyarrow's hash and sort and
    ``id_hash``'s kernels release the GIL, so the columns share the cores). Each column's
    result comes as a call that returns it or raises its InputError, so that the caller meets
    the errors in column order."""
    todo: dict[str, tuple] = {
        c: (_code_ids, col) if c in ID_COLUMNS else (numeric_ratings, col, source, names, spelled)
        for c, col in cols.items()
        if c in ID_COLUMNS or c == "rating"
    }
    n = len(next(iter(cols.values()))) if cols else 0
    workers = min(len(todo), os.cpu_count() or 1)
    if n < 200_000 or workers < 2:
        return {c: functools.partial(*job) for c, job in todo.items()}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # the longest first: the instance column
        names = sorted(todo, key=lambda c: c != "instance")
        futures = {c: pool.submit(*todo[c]) for c in names}
        wait(list(futures.values()))
    return {c: f.result for c, f in futures.items()}


def _code_ids(col: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """:func:`factorize_sorted`, which distinct IDs are blank (M,) bool, and whether the
    column already was that coding (a Categorical of sorted, used, text categories)."""
    arr = _arrow_text(col)
    if arr is not None:
        return (*_code_arrow(arr), False)
    if _is_arrow(col):
        col = col.to_pandas()
    if isinstance(col.dtype, pd.CategoricalDtype):
        return _code_categorical(col)
    text = col.astype(str)
    arr = _arrow_text(text)
    if arr is None:  # no pyarrow string storage: pandas' own sorted factorisation
        codes, uniq = pd.factorize(text, sort=True)
        uniq = np.asarray(uniq, dtype=object)
        blank = np.fromiter((u.strip() == "" for u in uniq), bool, uniq.size)
        return codes.astype(np.int32), uniq, blank, False
    return (*_code_arrow(arr), False)


def _encode_arrow(arr) -> tuple[np.ndarray, object]:
    """pyarrow's hash of a text (chunked) array: (L,) int32 indices (-1 for null) into one
    dictionary of the distinct values, in order of first appearance."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    enc = pc.dictionary_encode(arr)
    chunks = enc.chunks if isinstance(enc, pa.ChunkedArray) else [enc]
    if not chunks:
        return np.zeros(0, np.int32), pa.array([], pa.large_string())
    # the hash table is shared across chunks: every chunk's dictionary is a prefix of the
    # final one (same buffers); otherwise encode the combined array
    first = chunks[0].dictionary.buffers()[1]
    if any(c.dictionary.buffers()[1].address != first.address for c in chunks[1:]):
        combined = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        chunks = [pc.dictionary_encode(combined)]
    dictionary = max((c.dictionary for c in chunks), key=len)
    indices = pa.chunked_array([c.indices for c in chunks], type=chunks[0].indices.type)
    if indices.null_count:
        indices = pc.fill_null(indices, -1)
    return indices.to_numpy(), dictionary


def _code_arrow(arr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes, sorted uniques and blanks of a pyarrow text (chunked) array; nulls get -1.

    A big column of many distinct short IDs goes through ``id_hash`` (a partitioned hash, the
    same result in about a third of the time); anything else through pyarrow's hash and sort."""
    from . import id_hash

    codes, ordered = id_hash.sorted_codes(arr) or _sorted_by_pyarrow(arr)
    return codes, _arrow_ids(ordered), _blank_text(ordered)


def _arrow_ids(ordered) -> Any:
    """Sorted distinct IDs of a pyarrow text array as :func:`compact_ids` keeps them: an object
    array of ``str``, or from ``COMPACT_IDS`` on the Arrow array itself (no copy): 2M Python
    strings cost 0.2 s to make and 138 MB to keep."""
    import pyarrow as pa

    if len(ordered) >= COMPACT_IDS and (
        pa.types.is_string(ordered.type) or pa.types.is_large_string(ordered.type)
    ):
        if isinstance(ordered, pa.ChunkedArray):
            ordered = ordered.combine_chunks()
        return pd.arrays.ArrowStringArray(ordered)
    return ordered.to_numpy(zero_copy_only=False)


def _sorted_by_pyarrow(arr) -> tuple[np.ndarray, Any]:
    """``(codes (L,) int32, the distinct values sorted)`` by pyarrow's hash and sort."""
    import pyarrow.compute as pc

    idx, dictionary = _encode_arrow(arr)
    order = pc.sort_indices(dictionary)
    rank = np.empty(len(dictionary) + 1, dtype=np.int32)
    rank[order.to_numpy()] = np.arange(len(dictionary), dtype=np.int32)
    rank[-1] = -1  # index -1 (null) stays -1
    codes = rank[idx]
    del idx
    return codes, dictionary.take(order)


def _blank_sorted(uniq: np.ndarray) -> np.ndarray:
    """(M,) bool: which of these sorted distinct strings are blank (``str.strip() == ""``).

    A blank string is empty or starts with whitespace, so only the sorted ranges starting
    below ``"!"`` or with a non-ASCII whitespace character are looked at.
    """
    blank = np.zeros(uniq.size, dtype=bool)
    starts = [("", "!")] + [(c, chr(ord(c) + 1)) for c in WHITESPACE if c > "!"]
    for lo, hi in starts:
        i, j = np.searchsorted(uniq, [lo, hi])
        for k in range(int(i), int(j)):
            blank[k] = not uniq[k].strip()
    return blank


def _code_categorical(col: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    cats = col.cat.categories
    codes = np.asarray(col.array.codes)  # a read-only view: callers copy what they keep
    if pd.api.types.infer_dtype(cats, skipna=False) == "string" and cats.is_monotonic_increasing:
        remap = None  # already distinct strings in sorted order (io.read_ratings' columns)
        uniq = np.asarray(cats, dtype=object)
        blank = _blank_sorted(uniq)
    else:  # categories that are not sorted text (or that merge as text: 1 and "1")
        remap, uniq, blank, _ = _code_ids(pd.Series(cats.astype(str)))
    present = codes if codes.size == 0 or codes.min() >= 0 else codes[codes >= 0]
    used = np.bincount(present if remap is None else remap[present], minlength=uniq.size) > 0
    if remap is None and used.all():
        return codes.astype(np.int32, copy=False), uniq, blank, True
    if remap is None:
        remap = np.arange(uniq.size, dtype=np.int32)
    renumber = np.cumsum(used, dtype=np.int32) - 1
    full = np.append(renumber[remap], -1).astype(np.int32)  # code -1 (missing) stays -1
    return full[codes], uniq[used], blank[used], False


def numeric_ratings(
    col: pd.Series,
    source: str = "ratings",
    names: Sequence[str] | None = None,
    spelled: dict[float, str] | None = None,
) -> np.ndarray:
    """(L,) float ratings of a column; InputError naming the first row that is not a finite
    number, or for a column of dates, durations or complex numbers.

    Text is parsed per distinct value with ``pd.to_numeric`` (so ``" 3"`` and ``"3.0"`` read
    as 3 exactly as a whole-column parse would), never a Python object per row. With
    ``names`` (a scale of named levels, lowest first) each rating must be one of them and
    becomes its level's value, 1..K (:func:`named_ratings`). ``spelled``: filled, for
    ratings given as text, with each value's first spelling (``{3.0: "3"}``), which
    crowd-kit's labels keep.
    """
    if _is_arrow(col) and _arrow_text(col) is None:
        col = col.to_pandas()
    if names is not None:
        return named_ratings(col, names, source)
    if _arrow_text(col) is not None:
        return _parse_distinct(col, source, spelled)
    dt = col.dtype
    kind = getattr(dt, "kind", "O")
    what = None
    if pd.api.types.is_complex_dtype(dt):
        what = "complex numbers"
    elif kind in "mM" or isinstance(dt, (pd.DatetimeTZDtype, pd.PeriodDtype)):
        what = "dates or durations"
    elif isinstance(dt, pd.IntervalDtype):
        what = "intervals"
    if what is not None:
        raise InputError(
            f"the rating column holds {what} ({dt}), not ratings; ratings must be real "
            "numbers on an ordinal scale such as 1..5",
            source=source,
        )
    if pd.api.types.is_bool_dtype(dt):
        col = col.astype(float)
    if pd.api.types.is_numeric_dtype(col.dtype) and not isinstance(dt, pd.CategoricalDtype):
        values = col.to_numpy(dtype=float, na_value=np.nan)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            _refuse_rating(col.iloc[row], row, int(bad.sum()), source)
        return values
    return _parse_distinct(col, source, spelled)


def _parse_distinct(col, source: str, spelled: dict[float, str] | None = None) -> np.ndarray:
    """Ratings of a text (or mixed) column, parsed once per distinct value; ``spelled``:
    filled with each value's first spelling when every distinct value is text."""
    codes, uniques = _distinct(col)
    parsed = pd.to_numeric(pd.Series(uniques), errors="coerce")
    if pd.api.types.is_complex_dtype(parsed.dtype):
        raise InputError(
            "the rating column holds complex numbers, not ratings; ratings must be real "
            "numbers on an ordinal scale such as 1..5",
            source=source,
        )
    uval = np.append(parsed.to_numpy(dtype=float, na_value=np.nan), np.nan)  # -1: missing
    ubad = ~np.isfinite(uval)
    if ubad.any():
        bad = ubad[codes]
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raw = uniques[codes[row]] if codes[row] >= 0 else None
            names = [str(u).strip() for u, b in zip(uniques, ubad[:-1], strict=True) if b]
            _refuse_rating(raw, row, int(bad.sum()), source, [n for n in names if n])
    if spelled is not None and all(isinstance(u, str) for u in uniques):
        for u, v in zip(uniques, uval[:-1], strict=True):
            spelled.setdefault(float(v), u.strip())
    return uval[codes]


def named_ratings(col: pd.Series, names: Sequence[str], source: str = "ratings") -> np.ndarray:
    """(L,) the value 1..K of each rating, a name of the scale's levels (``names``, lowest
    first; compared as text without surrounding spaces), matched once per distinct value.
    InputError naming the first row whose rating is empty or not one of the names."""
    codes, uniques = _distinct(col)
    where = {str(n): float(i + 1) for i, n in enumerate(names)}

    def text(u: object) -> str:
        return f"{u:g}" if isinstance(u, (float, np.floating)) else str(u).strip()

    uval = np.array([where.get(text(u), np.nan) for u in uniques] + [np.nan])  # -1: missing
    bad = np.isnan(uval)[codes]
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raw = uniques[codes[row]] if codes[row] >= 0 else None
        where_ = f"row {row + 2} {_ROW}"
        if raw is None or (not isinstance(raw, str) and pd.isna(raw)) or not text(raw):
            msg = f"{where_}: empty rating cell; fill it in or delete the row"
        else:
            msg = (
                f"{where_}: rating {text(raw)[:40]!r} is not one of the scale's levels "
                f"{', '.join(names)}; fix the rating or give the scale that includes it "
                "(--scale, lowest level first)"
            )
        raise InputError(f"{msg} ({int(bad.sum())} such row(s))", source=source)
    return uval[codes]


def _distinct(col) -> tuple[np.ndarray, pd.Series]:
    """Codes (L,; -1 for missing) and distinct values of a column, by hashing."""
    arr = _arrow_text(col)
    if arr is not None:
        idx, dictionary = _encode_arrow(arr)
        return idx, pd.Series(dictionary.to_pandas(), dtype=object)
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(), pd.Series(col.cat.categories)
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    return codes, pd.Series(np.asarray(uniques, dtype=object), dtype=object)


#: at most this many distinct names among the ratings read as a scale of named levels
#: (G/P/R/X), for which the refusal says how to write them as numbers
NAMED_LEVELS_MAX = 12


def _refuse_rating(
    raw: object, row: int, n_bad: int, source: str, names: Sequence[str] = ()
) -> None:
    """InputError for the rating at ``row`` (0-based, of the data); ``names``: the distinct
    non-numeric texts of the column, named when they look like a scale of named levels."""
    where = f"row {row + 2} {_ROW}"
    if raw is None or (not isinstance(raw, str) and pd.isna(raw)) or str(raw).strip() == "":
        msg = f"{where}: empty rating cell; fill it in or delete the row"
    else:
        text = str(raw)[:40]
        hint, fix = "", "ratings must be numbers"
        if re.fullmatch(r"-?\d+,\d+", text.strip()):
            hint = " (decimal comma? write it with a point, e.g. 3.5)"
        elif 2 <= len(names) <= NAMED_LEVELS_MAX:
            shown = ", ".join(repr(n[:20]) for n in sorted(names))
            fix = (
                f"the ratings hold the names {shown}: give their order as the scale, lowest "
                f"level first (--scale {','.join(n[:20] for n in sorted(names))}, reordered "
                "to the levels' true order)"
            )
        msg = f"{where}: rating {text!r} is not a number{hint}; {fix}"
    raise InputError(f"{msg} ({n_bad} such row(s))", source=source)


def rating_levels(
    ratings: np.ndarray,
    scale: Scale | Sequence[float] | str | None,
    source: str | None = None,
) -> tuple[Scale, np.ndarray]:
    """The scale (given, or inferred and checked) and each rating's level index (L,) int32.

    The one home of the scale checks: a rating off a given scale, or an inferred scale with
    outlying values, is an InputError naming the row.
    """
    if scale is None:
        return infer_scale(ratings, source, rows=True)
    sc = as_scale(scale, ratings)
    level = sc.index_of(ratings)
    off = level < 0
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise InputError(
            f"row {row + 2} {_ROW}: rating {ratings[row]:g} is not on the scale "
            f"{fmt_scale(sc)} ({int(off.sum())} such row(s)); fix the rating or give the "
            "scale that includes it (--scale)",
            source=source,
        )
    return sc, level


#: from this many distinct instance IDs on, ``crowd_from_coded`` keeps them Arrow-backed
#: (``compact_ids``): 2M IDs of 11 characters are 138 MB as Python strings, alive through every
#: sweep of a fit that needs them only to start (``keyed_random.id_hash``) and to name its results
COMPACT_IDS = 1_000_000


def compact_ids(ids: Any) -> Any:
    """Distinct IDs ``ids`` (n,) as they are kept in :class:`CrowdData`: an object array as it
    is below ``COMPACT_IDS``, else an Arrow-backed pandas string array (about 20 bytes an ID
    of 11 characters instead of 69; one already, as ``io.read_ratings`` codes them, is kept).
    Either indexes like an array; :func:`id_array` turns either back into an object array."""
    if not isinstance(ids, np.ndarray) or len(ids) < COMPACT_IDS:
        return ids
    return pd.array(ids, dtype=pd.StringDtype("pyarrow"))


def _category_ids(cats: pd.Index, compact: bool) -> Any:
    """A coded column's distinct IDs: the Arrow array behind ``cats`` as it is when ``compact``
    and it holds ``COMPACT_IDS`` or more text IDs (``io.read_ratings``' instances), else an
    object array of them."""
    arrow = isinstance(cats.dtype, pd.StringDtype) and cats.dtype.storage == "pyarrow"
    if compact and arrow and len(cats) >= COMPACT_IDS:
        return cats.array
    return cats.to_numpy(dtype=object)


def id_array(ids: Any) -> np.ndarray:
    """IDs (n,) as an object array of ``str``: ``ids`` itself when it is one, else the strings
    of a :func:`compact_ids` array (made now: they live as long as the caller keeps them)."""
    if isinstance(ids, np.ndarray):
        return ids
    return np.asarray(ids, dtype=object)
