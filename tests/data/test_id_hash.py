"""idhash: the partitioned hash gives pyarrow's codes and sorted dictionary, or steps aside.

The reference is ``coding._code_arrow`` with the fast path switched off (pyarrow's hash and sort).
``MIN_ROWS`` and the sample's verdict are patched so that small arrays take the fast path.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ordmix_core.data import coding, id_hash
from ordmix_core.data import crowd as data
from ordmix_core.numerics import jit

pytestmark = pytest.mark.skipif(not jit.USE_JIT, reason="idhash needs numba")


@pytest.fixture
def forced(monkeypatch):
    """Every array of text takes the fast path where it can."""
    monkeypatch.setattr(id_hash, "MIN_ROWS", 0)
    monkeypatch.setattr(id_hash, "many_distinct", lambda arr: True)


def _reference(arr, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(id_hash, "sorted_codes", lambda arr: None)
        return coding._code_arrow(arr)


def _same(arr, monkeypatch) -> None:
    fast = id_hash.sorted_codes(arr)
    assert fast is not None
    got, want = coding._code_arrow(arr), _reference(arr, monkeypatch)
    np.testing.assert_array_equal(got[0], want[0])
    assert list(got[1]) == list(want[1])
    np.testing.assert_array_equal(got[2], want[2])


# IDs up to 16 bytes of UTF-8, with the awkward bytes: NUL, spaces, multi-byte characters,
# IDs that begin other IDs ("a" < "a\0" < "a\0\0"), the empty ID
_ID = st.text(alphabet=st.sampled_from(["a", "b", "\x00", " ", "é", "字", "\U0001f600", "Z"]),
              max_size=6).filter(lambda s: len(s.encode()) <= id_hash.MAX_BYTES)  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ids=st.lists(_ID, min_size=1, max_size=60), split=st.integers(0, 60))
def test_codes_and_dictionary_equal_pyarrows(ids, split, forced, monkeypatch):
    """Any IDs of at most 16 bytes, in one chunk or two (the second a slice with an offset).
    (The fixture only patches constants, the same for every example.)"""
    one = pa.array(ids, pa.string())
    _same(one, monkeypatch)
    k = min(split, len(ids))
    two = pa.chunked_array([pa.array(ids[:k], pa.large_string()),
                            pa.array(["pad", *ids[k:]], pa.large_string()).slice(1)])  # fmt: skip
    _same(two, monkeypatch)


@pytest.mark.parametrize("width", [7, 8, 9, 15, 16])
def test_ids_at_the_key_boundaries_sort_in_byte_order(width, forced, monkeypatch):
    """Lengths around the two 8-byte keys, with the length folded into the second key
    (at most 15 bytes) or sorted as a third key (16: "a" and "q", "\\0" and "\\x10" differ
    in the bit a folded length of 16 would set)."""
    rng = np.random.default_rng(width)
    stems = ["".join(rng.choice(list("abq\x00\x10"), size=rng.integers(0, width + 1)))
             for _ in range(400)]  # fmt: skip
    # IDs equal but in their last byte, in reverse byte order ("q" > "a", "\\x10" > "\\0")
    twins = [stem[: width - 1].ljust(width - 1, "b") + last for stem in stems[:40]
             for last in ("q", "a", "\x10", "\x00")]  # fmt: skip
    ids = [*stems, *twins, "x" * width, "x" * (width - 1), "x" * width]
    arr = pa.array(ids, pa.string())
    _same(arr, monkeypatch)
    codes, dictionary = id_hash.sorted_codes(arr)
    uniq = dictionary.to_pylist()
    assert uniq == sorted(set(ids), key=lambda s: s.encode())
    assert [uniq[c] for c in codes] == ids


@pytest.mark.parametrize("part_bits", [1, 2])
def test_ids_that_differ_only_in_trailing_nuls_stay_apart(part_bits, forced, monkeypatch):
    """ "a", "a\\0", "a\\0\\0" ... pack to the same two keys: only their lengths tell them
    apart, in the hash's probes too (two or four partitions: crowded tables, many probes)."""
    monkeypatch.setattr(id_hash, "PART_BITS", part_bits)
    ids = [f"{i}" + "\0" * k for i in range(300) for k in range(0, 16 - len(str(i)))]
    arr = pa.array(ids[::-1], pa.string())
    _same(arr, monkeypatch)
    assert len(id_hash.sorted_codes(arr)[1]) == len(set(ids))


def test_radix_order_is_lexsorts_order():
    rng = np.random.default_rng(0)
    k0 = rng.integers(0, 4, 5000).astype(np.uint64) << np.uint64(60)  # shared low digits
    k1 = rng.integers(0, 2**63, 5000).astype(np.uint64) * np.uint64(rng.integers(0, 2))
    ln = rng.integers(0, 17, 5000).astype(np.uint8)
    got = id_hash._radix_order([k0, k1, ln.astype(np.uint64)], [4, 4, 1])
    np.testing.assert_array_equal(got, np.lexsort((ln, k1, k0)))
    np.testing.assert_array_equal(id_hash._radix_order([k0, k1], [4, 4]), np.lexsort((k1, k0)))


def test_steps_aside_for_long_ids_nulls_small_columns_and_few_distinct(forced, monkeypatch):
    long = pa.array(["a" * 17, "b"])  # 17 bytes: pyarrow's path codes it
    assert id_hash.sorted_codes(long) is None
    assert coding._code_arrow(long)[1].tolist() == ["a" * 17, "b"]
    multibyte = pa.array(["é" * 9])  # 9 characters, 18 bytes
    assert id_hash.sorted_codes(multibyte) is None
    assert id_hash.sorted_codes(pa.array(["a", None])) is None
    assert id_hash.sorted_codes(pa.array([1, 2])) is None
    monkeypatch.setattr(id_hash, "MIN_ROWS", 3)
    assert id_hash.sorted_codes(pa.array(["a", "b"])) is None


def test_many_distinct_tells_instances_from_annotators():
    n = 200_000
    rng = np.random.default_rng(1)
    items = pa.array(np.char.add("item", rng.integers(0, n // 2, n).astype(str)))
    raters = pa.array(np.char.add("w", rng.integers(0, 2000, n).astype(str)))
    assert id_hash.many_distinct(items)
    assert not id_hash.many_distinct(raters)
    assert not id_hash.many_distinct(pa.array(["a"] * 10))


def test_preload_starts_once_and_only_for_a_big_file(monkeypatch):
    started = []
    monkeypatch.setattr(id_hash, "_PRELOADED", type(id_hash._PRELOADED)())
    monkeypatch.setattr(id_hash.threading, "Thread", lambda **kw: started.append(kw) or _NoThread())
    id_hash.preload(id_hash.PRELOAD_BYTES - 1)
    assert not started
    id_hash.preload(id_hash.PRELOAD_BYTES)
    id_hash.preload(id_hash.PRELOAD_BYTES)
    assert [kw["target"] for kw in started] == [id_hash._load_kernels]
    id_hash._load_kernels()  # and the kernels it loads accept empty input


class _NoThread:
    def start(self) -> None:
        pass


def test_a_big_column_takes_the_fast_path_through_normalize_columns(monkeypatch):
    """What ``io.read_ratings`` does with a table of text columns, at a patched size."""
    monkeypatch.setattr(id_hash, "MIN_ROWS", 1000)
    calls = []
    real = id_hash.sorted_codes
    monkeypatch.setattr(id_hash, "sorted_codes", lambda arr: calls.append(len(arr)) or real(arr))
    rng = np.random.default_rng(2)
    n = 5000
    inst = np.char.add("doc", rng.integers(0, 4000, n).astype(str))
    table = pa.table({
        "annotator": pa.array(np.char.add("w", rng.integers(0, 30, n).astype(str)), pa.string()),
        "instance": pa.array(inst, pa.string()),
        "rating": pa.array(rng.integers(1, 6, n).astype(str), pa.string()),
    })  # fmt: skip
    frame = data.normalize_columns(table, "t.csv", coded=True)
    assert calls == [n, n]  # annotators and instances asked; instances taken (many distinct)
    got = frame["instance"]
    assert list(got.cat.categories) == sorted(set(inst))
    np.testing.assert_array_equal(got.astype(str).to_numpy(), inst)


def test_the_readers_messages_hold_on_the_fast_path(monkeypatch, tmp_path):
    """``io.read_ratings`` on a file coded by idhash (sizes patched): the same frame as
    pyarrow's path, and a blank ID is refused naming its row, as docs/reliability.md says."""
    from ordmix_core import io
    from ordmix_core.errors import InputError

    monkeypatch.setattr(id_hash, "MIN_ROWS", 100)
    monkeypatch.setattr(id_hash, "PRELOAD_BYTES", 100)
    monkeypatch.setattr(id_hash, "_PRELOADED", type(id_hash._PRELOADED)())
    taken = []  # per ID column asked: whether idhash coded it
    real = id_hash.sorted_codes

    def spy(arr):
        got = real(arr)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(id_hash, "sorted_codes", spy)
    rows = [f"w{i % 7},doc{i:05d},{1 + i % 5}" for i in range(400)]
    good = tmp_path / "r.csv"
    good.write_text("annotator,instance,rating\n" + "\n".join(rows) + "\n")
    fast = io.read_ratings(good)
    assert taken == [False, True] and id_hash._PRELOADED.is_set()  # annotators: 7 distinct
    with monkeypatch.context() as m:
        m.setattr(id_hash, "sorted_codes", lambda arr: None)
        slow = io.read_ratings(good)
    for c in ("annotator", "instance"):
        assert list(fast[c].cat.categories) == list(slow[c].cat.categories)
        np.testing.assert_array_equal(fast[c].cat.codes, slow[c].cat.codes)
    np.testing.assert_array_equal(fast["rating"], slow["rating"])
    for blank in ("", "   "):
        bad = rows.copy()
        bad[250] = f"w1,{blank},3"
        path = tmp_path / "bad.csv"
        path.write_text("annotator,instance,rating\n" + "\n".join(bad) + "\n")
        with pytest.raises(InputError, match=r"row 252 .*empty 'instance' cell"):
            io.read_ratings(path)
