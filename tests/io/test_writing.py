"""``io/writing.py``'s own formatting of CSV rows: the bytes of pandas' ``to_csv``, which it
stands in for, on any frame; pandas' writer only where it cannot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordmix_core.io import to_csv_bytes, write_csv_chunks, writing
from ordmix_core.io.writing import csv_safe

FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1e16, 1e-4, 9.999999999999999e-05, 1e-5, 5e-324]),
    st.floats(0, 1),
)
TEXT = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", "a,b", 'say "x"', "two\nlines", "cr\r", "=1+1", "'-x", " lead", "é"]),
)


def column(kind: str, n: int) -> st.SearchStrategy:
    """A column of ``n`` values of one kind: what the tables hold, and what pandas keeps."""
    if kind == "float64":
        return st.lists(FLOATS, min_size=n, max_size=n).map(lambda v: np.array(v, float))
    if kind == "int64":
        ints = st.integers(-(2**63), 2**63 - 1)
        return st.lists(ints, min_size=n, max_size=n).map(lambda v: np.array(v, np.int64))
    if kind == "bool":
        return st.lists(st.booleans(), min_size=n, max_size=n).map(np.array)
    if kind == "text":
        cells = st.one_of(TEXT, st.none(), st.just(np.nan))
        return st.lists(cells, min_size=n, max_size=n).map(lambda v: np.array(v, object))
    if kind == "string":
        cells = st.one_of(TEXT, st.none())
        return st.lists(cells, min_size=n, max_size=n).map(lambda v: pd.array(v, "string"))
    if kind == "float32":  # pandas' own: its shortest text is float32's
        return st.lists(st.floats(0, 1, width=32), min_size=n, max_size=n).map(
            lambda v: np.array(v, np.float32)
        )
    mixed = st.one_of(TEXT, st.integers(), st.floats(0, 1))  # pandas' own: not all text
    return st.lists(mixed, min_size=n, max_size=n).map(lambda v: np.array(v, object))


KINDS = ["float64", "int64", "bool", "text", "string", "float32", "mixed"]


@st.composite
def frames(draw) -> pd.DataFrame:
    n = draw(st.integers(0, 9))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=5))
    data = {f"c{j}" if j else draw(TEXT): draw(column(k, n)) for j, k in enumerate(kinds)}
    df = pd.DataFrame(data)
    index = draw(st.sampled_from(["range", "named", "unnamed", "numbers"]))
    if index == "numbers":
        df.index = pd.Index(np.arange(n) * 2.5, name="x")
    elif index != "range":
        df.index = pd.Index([f"i{j}" for j in range(n)], name="item" if index == "named" else None)
    return df


@settings(max_examples=300, deadline=None)
@given(df=frames(), rows=st.sampled_from([1, 2, 3, writing.FAST_ROWS]))
def test_any_frame_is_written_as_pandas_writes_it(df, rows):
    """Float64 (NaN, infinities, -0.0, subnormals, either side of the exponent's switch),
    integers, booleans, text with missing cells and cells that need quotes, pandas' string
    dtype, an index of either kind: the bytes of ``to_csv``, however the rows are cut."""
    index = not (isinstance(df.index, pd.RangeIndex) and df.index.name is None)
    expected = csv_safe(df).to_csv(index=index, lineterminator="\n").encode()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writing, "FAST_ROWS", rows)
        assert to_csv_bytes(df) == expected


def test_a_table_of_numbers_and_ids_is_formatted_without_pandas_writer(tmp_path, monkeypatch):
    """What the fit's tables hold (float64, integers, booleans, text IDs and named levels)
    never reaches pandas' writer: the speed of ``items.csv`` rests on it."""
    n = 50
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "instance": pd.array([f"=i{j}" if j % 7 == 0 else f"i{j}" for j in range(n)], "string"),
            "estimate": rng.normal(size=n),
            "sd": np.where(np.arange(n) % 5 == 0, np.nan, rng.random(n)),
            "n_ratings": rng.integers(0, 9, n),
            "unstable": rng.random(n) < 0.5,
            "label": np.array(["G", "P, or R", None, 'X "adult"', "R"] * 10, dtype=object),
        }
    )
    expected = csv_safe(df, ["instance"]).to_csv(index=False, lineterminator="\n").encode()
    monkeypatch.setattr(writing, "FAST_ROWS", 7)

    def refused(*args, **kwargs):
        raise AssertionError("pandas' writer called")

    monkeypatch.setattr(pd.DataFrame, "to_csv", refused)
    path = write_csv_chunks([df.iloc[:20], df.iloc[20:].reset_index(drop=True)], tmp_path / "t.csv",
                            ["instance"])  # fmt: skip
    assert path.read_bytes() == expected
