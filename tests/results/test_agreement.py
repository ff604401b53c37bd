"""Krippendorff's ordinal alpha of the crowd and each annotator's agreement with the others:
against a hand computation, against the ``krippendorff`` package, and in the fit's files."""

from __future__ import annotations

import json
import time
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordmix_core import OrdinalMixture, prepare
from ordmix_core.results import agreement
from ordmix_core.results.outputs import annotators_table, write_fit_outputs

DEMO = Path(__file__).resolve().parents[2] / "demo_data"

#: a small table worked by hand: items u1..u4, annotators a..d, levels 1 < 2 < 3
HAND = [
    ("a", "u1", 1), ("b", "u1", 1), ("c", "u1", 2),
    ("a", "u2", 2), ("b", "u2", 3),
    ("a", "u3", 3), ("b", "u3", 3), ("c", "u3", 3), ("d", "u3", 1),
    ("a", "u4", 1),  # rated once: carries no agreement
]  # fmt: skip


def _crowd(rows) -> object:
    return prepare(pd.DataFrame(rows, columns=["annotator", "instance", "rating"]))


def test_the_crowds_alpha_by_hand() -> None:
    """Coincidences: u1 (m=3) gives o11 = 2/2, o12 = o21 = 2/2; u2 (m=2) o23 = o32 = 1;
    u3 (m=4) o33 = 6/3, o13 = o31 = 3/3. So n = (3, 2, 4), n = 9; ordinal distances
    d12 = (5 - 2.5)^2 = 6.25, d23 = (6 - 3)^2 = 9, d13 = (9 - 3.5)^2 = 30.25;
    sum o d = 2 (6.25 + 30.25 + 9) = 91, sum n_c n_k d = 2 (37.5 + 363 + 72) = 945,
    alpha = 1 - 8 * 91 / 945 = 217 / 945."""
    data = _crowd(HAND)
    o = agreement.coincidences(agreement.level_counts(data))
    assert o.tolist() == [[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 2.0]]
    d = agreement.ordinal_distance(o.sum(axis=1))
    assert [d[0, 1], d[1, 2], d[0, 2]] == [6.25, 9.0, 30.25] and np.diag(d).tolist() == [0] * 3
    crowd = agreement.crowd_agreement(data)
    assert crowd.alpha == pytest.approx(217 / 945, abs=1e-15)
    assert (crowd.items, crowd.ratings) == (3, 9)
    # the package agrees with the hand: a coder per row, a unit per column, NaN: not rated
    nan = np.nan
    table = [[1, 2, 3, 1], [1, 3, 3, nan], [2, nan, 3, nan], [nan, nan, 1, nan]]
    assert krippendorff.alpha(table, level_of_measurement="ordinal") == pytest.approx(217 / 945)


def test_each_annotators_agreement_by_hand() -> None:
    """D_e = 945 / (9 * 8). a: u1's 1 against 1 and 2 (distances 0, 6.25: mean 3.125), u2's 2
    against 3 (9), u3's 3 against 3, 3, 1 (mean 30.25 / 3); u4 alone does not count:
    D_o(a) = (3.125 + 9 + 30.25 / 3) / 3 = 533 / 72, agreement 1 - 533 / 945. d: u3's 1
    against three 3s: 1 - 30.25 / (945 / 72)."""
    got = agreement.annotator_agreement(_crowd(HAND))
    assert got.index.tolist() == ["a", "b", "c", "d"] and got.name == "agreement"
    assert got["a"] == pytest.approx(1 - 533 / 945, abs=1e-15)
    assert got["d"] == pytest.approx(1 - 30.25 * 72 / 945, abs=1e-15)
    # weighted by their ratings of shared items (3, 3, 2, 1), they make the crowd's alpha
    weights = pd.Series({"a": 3, "b": 3, "c": 2, "d": 1})
    assert (got * weights).sum() / weights.sum() == pytest.approx(217 / 945, abs=1e-14)


def test_an_annotator_is_not_measured_against_their_own_repeats() -> None:
    """``b`` rates u1 twice (1 and 3): against the others only, as if the repeat were not there
    for their first rating; and an annotator who shares no item with anyone has none."""
    rows = [("a", "u1", 1), ("b", "u1", 1), ("b", "u1", 3), ("a", "u2", 3), ("b", "u2", 3)]
    rows.append(("e", "u9", 2))
    got = agreement.annotator_agreement(_crowd(rows))
    assert np.isnan(got["e"])
    data = _crowd(rows)
    n_c = agreement.coincidences(agreement.level_counts(data)).sum(axis=1)
    d = agreement.ordinal_distance(n_c)
    expected = (n_c[:, None] * n_c[None, :] * d).sum() / (n_c.sum() * (n_c.sum() - 1))
    # b: u1's 1 against a's 1 (0), u1's 3 against a's 1 (d13), u2's 3 against a's 3 (0)
    assert got["b"] == pytest.approx(1 - (d[0, 2] / 3) / expected, abs=1e-14)
    # a: u1's 1 against b's 1 and 3 (mean d13 / 2), u2's 3 against b's 3 (0)
    assert got["a"] == pytest.approx(1 - (d[0, 2] / 2 / 2) / expected, abs=1e-14)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 5), st.integers(1, 4)), min_size=2, max_size=40
    ),
    st.sampled_from([1, 3, 1 << 20]),
)
def test_each_annotators_agreement_by_rating_pairs_in_chunks_of_any_size(rows, chunk) -> None:
    """Against the definition computed rating by rating (every other annotator's rating of the
    item, repeats of one's own left out), whatever the chunk the ratings are taken in."""
    data = _crowd([(f"w{a}", f"i{i}", r) for a, i, r in rows])
    n_c = agreement.coincidences(agreement.level_counts(data)).sum(axis=1)
    d = agreement.ordinal_distance(n_c)
    n = n_c.sum()
    expected = (n_c[:, None] * n_c[None, :] * d).sum() / (n * (n - 1)) if n > 1 else 0.0
    ann, inst, lev = data.ann, data.inst, data.level
    for j, name in enumerate(agreement.id_array(data.annotators)):
        means = [
            np.mean([d[lev[r], lev[s]] for s in np.flatnonzero((inst == inst[r]) & (ann != j))])
            for r in np.flatnonzero(ann == j)
            if ((inst == inst[r]) & (ann != j)).any()
        ]
        want = 1 - np.mean(means) / expected if means and expected > 0 else np.nan
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(agreement, "CHUNK", chunk)
            got = agreement.annotator_agreement(data)[name]
        if np.isnan(want):
            assert np.isnan(got)
        else:
            assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 7), st.integers(1, 4)), min_size=2, max_size=60
    ),
    st.integers(1, 4),
)
def test_the_figures_from_parts_of_the_items_are_the_whole_crowds(rows, n_parts) -> None:
    """Items split into parts, each with all its ratings (a Dask engine's blocks): the parts'
    rating patterns merged give the crowd's alpha and interval with the same bits, and the
    parts' per-annotator sums added give each annotator's agreement."""
    data = _crowd([(f"w{a}", f"i{i}", r) for a, i, r in rows])
    k = data.scale.k
    whole = agreement.crowd_agreement(data)
    part_of_item = np.arange(data.n_instances) % n_parts
    parts, sums = [], []
    for p in range(n_parts):
        mine = np.flatnonzero(part_of_item[data.inst] == p)
        items, inst = np.unique(data.inst[mine], return_inverse=True)
        counts = agreement.level_counts(data)[items]
        parts.append((mine, inst, counts))
    merged = agreement.merged_patterns([agreement.rating_patterns(c) for _, _, c in parts], k)
    got = agreement.patterns_agreement(merged)
    assert got.as_dict() == whole.as_dict()
    d, expected = agreement.expected_disagreement(merged)
    for mine, inst, counts in parts:
        ann, lev = data.ann[mine], data.level[mine]
        sums.append(agreement.agreement_sums(inst, ann, lev, counts, data.n_annotators, d))
    total, used = (sum(s[j] for s in sums) for j in (0, 1))
    each = agreement.agreement_from_sums(total, used, expected)
    want = agreement.annotator_agreement(data).to_numpy()
    np.testing.assert_allclose(each, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 7), st.integers(1, 4)), min_size=2, max_size=60
    )
)
def test_the_crowds_alpha_is_the_packages(rows) -> None:
    data = _crowd([(f"w{a}", f"i{i}", r) for a, i, r in rows])
    counts = agreement.level_counts(data)
    ours = agreement.crowd_agreement(data, draws=0).alpha
    try:
        with np.errstate(invalid="ignore", divide="ignore"):  # the package's 0 / 0
            theirs = krippendorff.alpha(value_counts=counts, level_of_measurement="ordinal")
    except ValueError:  # no item rated twice, or a single level: undefined
        assert np.isnan(ours)
        return
    if np.isnan(theirs):  # one level used by the pairable items
        assert np.isnan(ours)
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)


def test_on_trec_the_figures_are_the_packages_fast_and_reproducible() -> None:
    """TREC RF10 (91,783 ratings): the package's alpha, a bootstrap interval around it that
    is the same every time, every annotator's agreement, all in a small fraction of a fit."""
    data = prepare(pd.read_csv(DEMO / "trec-rf10-ratings.csv", dtype=str))
    t0 = time.perf_counter()
    crowd = agreement.crowd_agreement(data)
    per = agreement.annotator_agreement(data)
    seconds = time.perf_counter() - t0
    counts = agreement.level_counts(data)
    theirs = krippendorff.alpha(value_counts=counts, level_of_measurement="ordinal")
    assert crowd.alpha == pytest.approx(theirs, abs=1e-12)
    assert crowd.lower < crowd.alpha < crowd.upper and crowd.upper - crowd.lower < 0.05
    assert crowd == agreement.crowd_agreement(data)  # a fixed seed: the same interval
    assert crowd.items == int((counts.sum(axis=1) >= 2).sum())
    assert per.notna().sum() > 0.9 * len(per) and (per.dropna() <= 1).all()
    assert seconds < 1.0, seconds  # measured 0.05 s; a fit of these ratings takes seconds


def test_the_interval_is_a_bootstrap_over_items() -> None:
    """More items of the same crowd, a narrower interval; no draws, no interval."""
    rng = np.random.default_rng(1)

    def crowd(n_items):
        truth = rng.integers(1, 6, n_items)
        rows = [
            (f"w{a}", f"i{i}", int(np.clip(truth[i] + rng.integers(-1, 2), 1, 5)))
            for i in range(n_items)
            for a in rng.choice(10, 3, replace=False)
        ]
        return agreement.crowd_agreement(_crowd(rows))

    small, big = crowd(40), crowd(640)
    assert small.upper - small.lower > 2 * (big.upper - big.lower)
    assert big.lower < big.alpha < big.upper
    none = agreement.crowd_agreement(_crowd(HAND), draws=0)
    assert np.isnan(none.lower) and none.as_dict()["lower"] is None
    assert "217" not in agreement.words(none.as_dict())
    assert agreement.words(none.as_dict()).startswith(
        "agreement between annotators (Krippendorff's alpha, ordinal): 0.230, over 3 items"
    )


def test_annotators_csv_and_summary_carry_the_agreement(tmp_path) -> None:
    ratings = pd.read_csv(DEMO / "simulated-ratings.csv", dtype=str)
    m = OrdinalMixture(n_restarts=2, random_state=0).fit(ratings)
    table = annotators_table(m)
    assert table.columns[-1] == "agreement"
    expected = agreement.annotator_agreement(m.data_)
    np.testing.assert_array_equal(table["agreement"], expected.reindex(table["annotator"]))
    # the spammers (the demo's answer key) agree with the others less than anyone honest
    spam = pd.read_csv(DEMO / "simulated-spammers.csv", dtype={"annotator": str})
    is_spam = table["annotator"].isin(spam.loc[spam["spammer"] == 1, "annotator"])
    assert table.loc[is_spam, "agreement"].max() < table.loc[~is_spam, "agreement"].min()
    assert "agreement" not in m.annotator_flags_  # the fit's own flags are left as they are
    summary = write_fit_outputs(m, tmp_path, settings={})
    written = json.loads((tmp_path / "summary.json").read_text())["agreement"]
    assert written == summary["agreement"]
    counts = agreement.level_counts(m.data_)
    theirs = krippendorff.alpha(value_counts=counts, level_of_measurement="ordinal")
    assert written["alpha"] == pytest.approx(theirs, abs=1e-12)
    assert written["lower"] < written["alpha"] < written["upper"]
    assert written["measure"] == "Krippendorff's alpha, ordinal distance"
    assert written["items"] == 300 and written["bootstrap_draws"] == agreement.DRAWS
