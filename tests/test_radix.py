"""radix.py: coding short text IDs by radix-partitioned hashing gives exactly the codes and
sorted IDs of pyarrow's path (``data._code_arrow`` below ``RADIX_MIN_ROWS``), and of Python's
own sort; it declines (None) what it does not handle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ordmix_core import data as D
from ordmix_core import kernels, radix
from ordmix_core.io import read_ratings

pytestmark = pytest.mark.skipif(not kernels.USE_JIT, reason="the radix path needs numba")

#: characters that stress the byte order: NUL, whitespace, ASCII, 2-, 3- and 4-byte UTF-8
ALPHABET = st.sampled_from(list("\x00 \t09AZaz~\x7f") + ["é", "ÿ", "Ω", "中", "\u3000", "😀"])
SHORT = st.text(ALPHABET, max_size=6).filter(lambda s: len(s.encode()) <= radix.MAX_BYTES)


def _independent(values: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes into the sorted distinct values, by Python (code point order = UTF-8 byte order)."""
    uniq = sorted(set(values))
    where = {v: k for k, v in enumerate(uniq)}
    return np.array([where[v] for v in values], dtype=np.int32), uniq


def _pyarrow_path(arr, monkeypatch):
    monkeypatch.setattr(D, "RADIX_MIN_ROWS", 10**15)
    return D._code_arrow(arr)


def _arrow(values: list[str], large: bool, cut: int | None, offset: int):
    typ = pa.large_string() if large else pa.string()
    padded = ["pad"] * offset + values
    if cut is None:
        return pa.array(padded, typ).slice(offset)  # a slice: the offsets start at ``offset``
    cut = min(cut, len(values))
    return pa.chunked_array([values[:cut], values[cut:]], typ)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pool=st.lists(SHORT | st.text(ALPHABET, min_size=8, max_size=10), min_size=1, max_size=40),
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=300),
    large=st.booleans(),
    cut=st.none() | st.integers(0, 300),
    offset=st.integers(0, 3),
)
def test_codes_and_sorted_ids_are_pyarrows_and_pythons(pool, picks, large, cut, offset):
    values = [pool[k % len(pool)] for k in picks]
    values = [v for v in values if len(v.encode()) <= radix.MAX_BYTES] or [""]
    arr = _arrow(values, large, cut, offset)
    got = radix.code_short_ids(arr)
    assert got is not None
    codes, ordered = got
    want_codes, want_uniq = _independent(values)
    assert codes.dtype == np.int32
    np.testing.assert_array_equal(codes, want_codes)
    assert ordered.to_pylist() == want_uniq
    with pytest.MonkeyPatch.context() as mp:
        ref_codes, ref_uniq, ref_blank = _pyarrow_path(arr, mp)
        mp.setattr(D, "RADIX_MIN_ROWS", 0)  # data's own hook takes the radix path
        d_codes, d_uniq, d_blank = D._code_arrow(arr)
    np.testing.assert_array_equal(codes, ref_codes)
    assert list(ref_uniq) == want_uniq
    np.testing.assert_array_equal(d_codes, ref_codes)
    assert list(d_uniq) == list(ref_uniq)
    np.testing.assert_array_equal(d_blank, ref_blank)


@pytest.mark.parametrize("first_slots", [2, 8, radix.FIRST_SLOTS])
def test_tables_and_key_arrays_grow(first_slots):
    """More distinct IDs than a partition's first table holds (``first_slots``: it doubles and
    takes its keys again as it fills) and than the distinct keys' first arrays hold (2**16:
    they grow): still exact."""
    rng = np.random.default_rng(1)
    values = [f"id{k:09d}" for k in rng.permutation(200_000)] + ["id000000007"] * 5
    codes, ordered = radix.code_short_ids(pa.array(values), first_slots)
    want_codes, want_uniq = _independent(values)
    np.testing.assert_array_equal(codes, want_codes)
    assert ordered.to_pylist() == want_uniq


def test_one_id_repeated():
    codes, ordered = radix.code_short_ids(pa.array(["same"] * 70_000))
    assert (codes == 0).all() and ordered.to_pylist() == ["same"]


@pytest.mark.parametrize(
    "values",
    [
        ["a", None, "b"],  # a null: pyarrow's path gives it -1
        ["a", "x" * 17, "b"],  # 17 bytes
        ["a", "é" * 9, "b"],  # 9 characters, 18 bytes
        [],
    ],
)
def test_declines_nulls_long_ids_and_nothing(values, monkeypatch):
    arr = pa.array(values, pa.string())
    assert radix.code_short_ids(arr) is None
    ref = _pyarrow_path(arr, monkeypatch)
    monkeypatch.setattr(D, "RADIX_MIN_ROWS", 0)
    got = D._code_arrow(arr)  # falls back: the same as pyarrow's path
    np.testing.assert_array_equal(got[0], ref[0])
    assert list(got[1]) == list(ref[1])


def test_declines_non_text():
    assert radix.code_short_ids(pa.array([1, 2, 3])) is None
    assert radix.code_short_ids(pa.array(["a", "b"]).dictionary_encode()) is None


def test_read_ratings_is_the_same_with_the_radix_path(tmp_path, monkeypatch):
    """The reader end to end: the coded frame is identical whichever path codes the IDs, and
    the checks of docs/reliability.md still name the blank ID's row."""
    rng = np.random.default_rng(3)
    n = 5000
    df = pd.DataFrame(
        {
            "annotator": [f"w{k}" for k in rng.integers(0, 50, n)],
            "instance": [f"item{k:05d}" for k in rng.integers(0, 900, n)],
            "rating": rng.integers(1, 6, n),
            "query": "q1",
        }
    )
    path = tmp_path / "r.csv"
    df.to_csv(path, index=False)
    ref = read_ratings(path)
    monkeypatch.setattr(D, "RADIX_MIN_ROWS", 0)
    got = read_ratings(path)
    pd.testing.assert_frame_equal(got, ref)
    df.loc[17, "instance"] = "  "
    df.to_csv(path, index=False)
    with pytest.raises(D.InputError, match=r"row 19 .*empty 'instance' cell"):
        read_ratings(path)
