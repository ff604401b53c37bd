"""data.py: coding IDs (sorted, whatever the column type), what ratings must be, inferred scales.

The reader cases of docs/reliability.md's "round two" section that raise at ``prepare`` (an
inferred scale with outlying values, an instance in two queries, rating columns of dates or
complex numbers) are asserted here with their messages.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ordmix_core.cli.main import main
from ordmix_core.data.coding import factorize_sorted
from ordmix_core.data.columns import WHITESPACE
from ordmix_core.data.crowd import normalize_columns, prepare
from ordmix_core.data.scale import OUTLIER_GAP_RANGE, OUTLIER_GAP_STEP, infer_scale, outlying_levels
from ordmix_core.errors import InputError
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.io import read_ratings

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: value -> count of Snow et al. (2008)'s affect ratings (the raw ``response`` column of
#: /work/shared/data/snow2008-affect/raw/*.tsv), three of the seven emotions
SNOW = {
    "anger": "0:693 1:1 2:3 3:2 4:1 5:16 8:1 9:2 10:29 12:2 13:1 15:14 20:32 21:1 25:15 30:21 "
    "32:1 35:1 40:12 45:2 46:2 50:27 54:1 55:1 56:1 60:14 63:1 64:1 65:1 66:1 70:9 75:6 80:20 "
    "85:1 86:1 87:1 90:12 95:1 99:6 100:43",
    "valence": "-100:56 -99:4 -95:1 -90:11 -89:1 -85:3 -80:17 -79:1 -76:1 -75:10 -70:11 -65:1 "
    "-60:15 -50:38 -45:4 -40:23 -35:5 -30:20 -25:16 -20:33 -18:1 -15:6 -12:3 -10:30 -5:11 -2:2 "
    "-1:1 0:411 1:5 2:5 3:3 4:1 5:14 6:1 7:1 10:18 12:1 15:7 18:1 20:23 23:1 25:13 30:17 38:1 "
    "40:19 45:2 50:40 54:1 55:1 60:8 65:3 66:1 70:6 75:8 80:24 85:4 87:1 90:9 95:1 99:3 100:21",
    "surprise": "0:571 1:2 2:3 3:3 4:1 5:42 6:1 7:1 10:71 12:1 14:1 15:13 16:1 20:57 23:1 25:22 "
    "30:38 32:2 35:5 40:23 42:2 45:3 50:47 51:1 55:3 60:10 61:1 65:2 66:1 70:10 75:9 76:1 "
    "80:10 82:1 84:2 85:2 89:2 90:16 95:1 99:3 100:14",
}


def _snow(name: str) -> np.ndarray:
    pairs = [p.split(":") for p in SNOW[name].split()]
    return np.repeat([float(v) for v, _ in pairs], [int(n) for _, n in pairs])


def _frame(ratings, query=None) -> pd.DataFrame:
    n = len(ratings)
    df = pd.DataFrame(
        {
            "annotator": [f"w{i % 7}" for i in range(n)],
            "instance": [f"t{i // 3}" for i in range(n)],
            "rating": ratings,
        }
    )
    if query is not None:
        df["query"] = query
    return df


def _csv(ratings) -> bytes:
    return _frame(ratings).to_csv(index=False).encode()


# --------------------------------------------------------------------------- inferred scales

LIKERT = [1, 2, 3, 4, 5, 3, 2, 4, 1, 5, 3, 3]


@pytest.mark.parametrize(
    "extra,shown",
    [("55", "rating 55 "), ("99", "rating 99 "), ("99999999999999999999", "rating 1e+20 ")],
    ids=["55", "no-answer-99", "20-digit"],
)
def test_a_stray_value_among_1_to_5_is_refused_with_its_row_and_the_fix(extra, shown):
    ratings = [str(r) for r in LIKERT]
    ratings[6] = extra  # row 8 of the file, counting the header as row 1
    df = read_ratings(_csv(ratings), name="likert.csv")
    with pytest.raises(InputError) as err:
        prepare(df)
    msg = str(err.value)
    assert msg.startswith("likert.csv: row 8 (counting the header as row 1): " + shown), msg
    assert "far outside the other ratings (1 to 5, typically 1 apart)" in msg
    assert "--scale" in msg and "\n" not in msg
    # and the CLI says the same on one line, exit 2, nothing written


def test_the_cli_refuses_an_outlier_before_any_compute(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_bytes(_csv([*LIKERT[:-1], 99]))
    assert main(["fit", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"ordmix: error: {path}: row 13 "), err
    assert "rating 99 lies far outside" in err[0]
    assert not (tmp_path / "out").exists()
    # the scale given explicitly is the fix
    out = tmp_path / "out2"
    assert (
        main(["fit", str(path), "--out", str(out), "--scale", "1,2,3,4,5,99", "--restarts", "1"])
        == 0
    )


def test_several_outliers_and_huge_values_are_named_together():
    r = [*LIKERT, 55, 99, 99, 1e308]
    with pytest.raises(InputError) as err:
        prepare(_frame(r), source="f.csv")
    msg = str(err.value)
    assert "ratings 55 (row 14), 99 (rows 15, 16), 1e+308 (row 17) lie far outside" in msg


@pytest.mark.parametrize("name", sorted(SNOW))
def test_snow_0_to_100_ratings_and_their_subsets_are_accepted(name):
    r = _snow(name)
    data = prepare(_frame(r))
    assert data.scale.k == np.unique(r).size
    rng = np.random.default_rng(0)
    for _ in range(100):  # fixed draws: random subsets of 100 ratings
        sub = rng.choice(r, 100, replace=False)
        assert not outlying_levels(*np.unique(sub, return_counts=True)).any()


@pytest.mark.parametrize(
    "ratings",
    [
        [0, 1, 2, 2, 1, 0, 2],
        [-2, -1, 0, 1, 2, 0],
        [1, 2, 3, 4, 5, 10],  # an unused stretch, not an outlier
        [0, 10, 20, 50, 100, 0, 0],
        [0, 1],
        [7, 7, 7],
    ],
)
def test_legitimate_small_scales_are_accepted(ratings):
    sc, level = infer_scale(np.asarray(ratings, dtype=float))
    assert np.array_equal(sc.values[level], ratings)


def test_continuous_ratings_with_sparse_tails_are_accepted():
    rng = np.random.default_rng(0)
    r = rng.uniform(1, 5, 300) + rng.normal(0, 1.5, 300)
    assert prepare(_frame(r)).scale.k == np.unique(r).size


@FAST
@given(
    k=st.integers(3, 11),
    step=st.floats(0.01, 100),
    start=st.floats(-1000, 1000),
    counts=st.lists(st.integers(1, 50), min_size=11, max_size=11),
    far=st.floats(1.01, 1e6),
)
def test_evenly_spaced_scales_pass_and_one_far_value_is_caught(k, step, start, counts, far):
    values = start + step * np.arange(k)
    c = np.asarray(counts[:k])
    assert not outlying_levels(values, c).any()
    spread = values[-1] - values[0]
    gap = max(OUTLIER_GAP_RANGE * spread, OUTLIER_GAP_STEP * step) * far
    with_far = np.append(values, values[-1] + gap)
    flags = outlying_levels(with_far, np.append(c, 1))
    assert flags.tolist() == [False] * k + [True]


# --------------------------------------------------------------------------- rating columns


@pytest.mark.parametrize(
    "column,what",
    [
        (pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-03"]), "dates or durations"),
        (pd.to_timedelta([1, 2, 3], unit="D"), "dates or durations"),
        (np.array([1 + 1j, 2, 3]), "complex numbers"),
        (pd.Series([1 + 2j, 2, 3], dtype=object), "complex numbers"),
    ],
    ids=["datetime64", "timedelta64", "complex128", "complex-objects"],
)
def test_rating_columns_of_dates_or_complex_numbers_are_refused(column, what):
    df = pd.DataFrame({"annotator": ["a", "b", "c"], "instance": ["x", "x", "y"]})
    df["rating"] = column
    with pytest.raises(InputError, match=f"the rating column holds {what}"):
        OrdinalMixture(n_restarts=1).fit(df)


def test_booleans_and_numbers_as_text_read_as_numbers():
    df = pd.DataFrame({"annotator": ["a", "b"], "instance": ["x", "x"], "rating": [True, False]})
    assert prepare(df).scale.values.tolist() == [0.0, 1.0]
    df["rating"] = [" 3", "3.0"]
    assert prepare(df).scale.values.tolist() == [3.0]


def test_ratings_given_as_names_are_refused_with_how_to_number_them():
    """G/P/R/X-style ratings: their order is not in the file, so the refusal names the
    distinct names and says to number them lowest first; one stray word gets no such hint."""
    df = pd.DataFrame(
        {"annotator": list("abcde"), "instance": ["x"] * 5, "rating": ["P", "G", " R", "X", "P"]}
    )
    with pytest.raises(InputError) as e:
        prepare(df)
    msg = str(e.value)
    assert "row 2 (counting the header as row 1): rating 'P' is not a number" in msg
    assert "the names 'G', 'P', 'R', 'X'" in msg and "lowest level first" in msg
    assert msg.endswith("(5 such row(s))")
    df["rating"] = ["1", "2", "good", "3", "2"]
    with pytest.raises(InputError) as e:
        prepare(df)
    assert "rating 'good' is not a number; ratings must be numbers" in str(e.value)
    assert "names" not in str(e.value)


# --------------------------------------------------------------------------- queries, names


def test_an_instance_in_two_queries_is_reported_with_the_file_name(tmp_path, capsys):
    content = b"annotator,instance,rating,query\na,t1,1,q1\nb,t2,2,q1\nc,t1,3,q2\n"
    msg = (
        "q.csv: row 4 (counting the header as row 1): instance 't1' has query 'q2' here but "
        "'q1' earlier; an instance belongs to one query"
    )
    df = read_ratings(content, name="q.csv")
    with pytest.raises(InputError) as err:
        OrdinalMixture("query", n_restarts=1).fit(df)
    assert str(err.value) == msg
    path = tmp_path / "q.csv"
    path.write_bytes(content)
    assert main(["fit", str(path), "--out", str(tmp_path / "o"), "--granularity", "query"]) == 2
    assert capsys.readouterr().err.strip() == f"ordmix: error: {tmp_path}/{msg}"


def test_invisible_characters_in_column_names_are_shown():
    df = pd.DataFrame({"\u200bannotator": ["a"], "instance\u00a0": ["x"], "rating": [1]})
    with pytest.raises(InputError) as err:
        normalize_columns(df, source="zw.csv")
    msg = str(err.value)
    assert "required column(s) annotator missing (found: '\\u200bannotator', instance, " in msg
    assert "U+200B (ZERO WIDTH SPACE)" in msg


# --------------------------------------------------------------------------- coding IDs

_IDS = st.lists(
    st.text(alphabet=st.sampled_from(list("ab01 ,\"'\t\n=é工😀") + ["\x85", "\u3000"]), max_size=4),
    min_size=1,
    max_size=30,
)


def _as(kind: str, ids: list[str]) -> pd.Series:
    if kind == "object":
        return pd.Series(ids, dtype=object)
    if kind == "str":
        return pd.Series(ids, dtype="str")
    if kind == "arrow":
        return pd.Series(pd.arrays.ArrowExtensionArray(pa.array(ids)))
    cats = list(dict.fromkeys(reversed(ids))) + ["unused"]  # unsorted, with an unused one
    return pd.Series(pd.Categorical(ids, categories=cats))


@FAST
@given(_IDS, st.sampled_from(["object", "str", "arrow", "categorical"]))
def test_factorize_sorted_equals_pandas_sorted_factorize(ids, kind):
    codes, uniq = factorize_sorted(_as(kind, ids))
    ref_codes, ref_uniq = pd.factorize(pd.Series(ids, dtype=object), sort=True)
    assert codes.dtype == np.int32 and uniq.dtype == object
    assert codes.tolist() == ref_codes.tolist()
    assert uniq.tolist() == list(ref_uniq)


def test_categories_that_merge_as_text_are_merged():
    col = pd.Series(pd.Categorical([1, "1", 2, "10"], categories=[2, "1", 1, "10"]))
    codes, uniq = factorize_sorted(col)
    assert uniq.tolist() == ["1", "10", "2"] and codes.tolist() == [0, 0, 2, 1]


@FAST
@given(
    st.lists(
        st.tuples(_IDS.map(lambda x: x[0]), _IDS.map(lambda x: x[0]), st.integers(1, 3)),
        min_size=1,
        max_size=25,
    ),
    st.randoms(use_true_random=False),
)
def test_the_reader_codes_like_the_dataframe_path_whatever_the_row_order(rows, rnd):
    df = pd.DataFrame(rows, columns=["annotator", "instance", "rating"])
    if (df["annotator"].str.strip() == "").any() or (df["instance"].str.strip() == "").any():
        with pytest.raises(InputError, match="empty"):
            read_ratings(df.to_csv(index=False).encode(), name="r.csv")
        return
    ref = prepare(df)
    got = read_ratings(df.to_csv(index=False).encode(), name="r.csv")
    assert isinstance(got["annotator"].dtype, pd.CategoricalDtype)
    data = prepare(got)
    for f in ("ann", "inst", "level"):
        assert getattr(data, f).tolist() == getattr(ref, f).tolist()
    assert data.annotators.tolist() == ref.annotators.tolist()
    assert data.instances.tolist() == ref.instances.tolist()
    order = list(range(len(df)))
    rnd.shuffle(order)
    shuffled = prepare(read_ratings(df.iloc[order].to_csv(index=False).encode(), name="r.csv"))
    assert shuffled.instances.tolist() == ref.instances.tolist()
    assert shuffled.inst.tolist() == ref.inst[order].tolist()


def test_blank_ids_are_refused_whatever_the_whitespace():
    assert WHITESPACE == "".join(c for c in map(chr, range(0x110000)) if c.isspace())
    for blank in ["", " ", "\u3000", "\x85 ", "\x1c"]:
        df = pd.DataFrame({"annotator": ["a", blank], "instance": ["x", "y"], "rating": [1, 2]})
        for frame in (df, df.astype({"annotator": "category"}), df.astype({"annotator": "str"})):
            for check in (prepare, normalize_columns):
                with pytest.raises(InputError, match=r"row 3 .*empty 'annotator' cell"):
                    check(frame)


def _crowd_frame(seed: int = 4) -> pd.DataFrame:
    from ordmix_core.data.simulate import simulate_crowd

    r = simulate_crowd(n_items=60, n_annotators=8, random_state=seed).ratings
    r["query"] = "q" + (r["instance"].str.len() % 3).astype(str)
    return r


def test_many_instance_ids_are_kept_arrow_backed_and_read_back_as_the_same_strings(
    monkeypatch,
):
    """From ``COMPACT_IDS`` instances on, ``CrowdData.instances`` holds no Python string per
    ID (those cost 138 MB at 2M IDs, alive through every sweep); ``id_array`` gives them back."""
    import ordmix_core.data.coding as coding
    import ordmix_core.data.coding as data_mod

    frame = _crowd_frame()
    plain = prepare(frame)
    assert isinstance(plain.instances, np.ndarray) and plain.instances.dtype == object
    monkeypatch.setattr(data_mod, "COMPACT_IDS", plain.n_instances)
    compact = prepare(frame)
    assert not isinstance(compact.instances, np.ndarray)
    assert compact.instances.dtype.storage == "pyarrow"
    assert compact.n_instances == plain.n_instances
    assert compact.categories is compact.instances  # instance granularity: the same IDs
    back = coding.id_array(compact.instances)
    assert back.dtype == object and back.tolist() == plain.instances.tolist()
    assert coding.id_array(plain.instances) is plain.instances  # no copy of an object array
    monkeypatch.setattr(data_mod, "COMPACT_IDS", plain.n_instances + 1)
    assert isinstance(prepare(frame).instances, np.ndarray)


@pytest.mark.parametrize("granularity", ["instance", "query"])
def test_a_fit_from_arrow_backed_ids_equals_the_fit_from_object_ids(monkeypatch, granularity):
    """The results name the same instances and categories, with the same numbers, whichever
    way ``CrowdData`` keeps the IDs (the fit's frames are built from ``id_array``)."""
    import ordmix_core.data.coding as data_mod
    from ordmix_core.estimators.baselines import DawidSkene

    frame = _crowd_frame(seed=7)
    kw = dict(n_restarts=2, random_state=0, granularity=granularity)
    fits, ds = [], []
    for compact in (False, True):
        monkeypatch.setattr(data_mod, "COMPACT_IDS", 1 if compact else 10**9)
        data = prepare(frame, granularity=granularity)
        assert isinstance(data.instances, np.ndarray) is not compact
        fits.append(OrdinalMixture(**kw).fit(data))
        ds.append(DawidSkene().fit(prepare(frame)).estimates_)
    for attr in ("items_", "annotators_", "categories_"):
        pd.testing.assert_frame_equal(getattr(fits[0], attr), getattr(fits[1], attr))
    pd.testing.assert_series_equal(ds[0], ds[1])


def test_the_reader_hands_many_instance_ids_over_in_arrow_and_ordmix_fit_writes_the_same(
    tmp_path, monkeypatch
):
    """``io.read_ratings`` codes ``COMPACT_IDS`` or more instances into a Categorical whose
    categories are the Arrow array of the sorted IDs (no Python string per ID), which
    ``read_crowd`` keeps as ``CrowdData.instances``; ``ordmix fit`` writes the same bytes."""
    import ordmix_core.data.coding as data_mod
    from ordmix_core.io import read_crowd
    from ordmix_core.results.outputs import FILES

    path = tmp_path / "ratings.csv"
    _crowd_frame(seed=5).to_csv(path, index=False)
    written = []
    for compact in (False, True):
        monkeypatch.setattr(data_mod, "COMPACT_IDS", 5 if compact else 10**9)
        cats = read_ratings(path)["instance"].cat.categories
        assert (cats.dtype == object) is not compact
        crowd = read_crowd(path, granularity="query")
        assert isinstance(crowd.instances, np.ndarray) is not compact
        assert isinstance(crowd.annotators, np.ndarray) and crowd.annotators.dtype == object
        out = tmp_path / f"out{int(compact)}"
        args = ["fit", str(path), "--out", str(out), "--restarts", "2", "--seed", "0"]
        assert main([*args, "--granularity", "query", "--quiet"]) == 0
        # summary.json holds the fit's seconds
        written.append({f: (out / f).read_bytes() for f in FILES if f != "summary.json"})
    assert written[0] == written[1]
