"""The ordinal scale's threshold rule, its refusals, and the one-query-per-instance rule.

Thresholds (paper, docs/model.md): inner ones at the midpoints of neighbouring levels, the
outer ones half a level step outside (0.5 ... 5.5 for 1..5); the fit uses exactly these.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _sweeps import record_sweeps

from ordmix_core import InputError, OrdinalMixture, Scale
from ordmix_core.data.scale import FINE_END_RANGES, MAX_COARSE_LEVELS


def _rule(values: list[float]) -> list[float]:
    v = list(map(float, values))
    if len(v) == 1:
        return [v[0] - 0.5, v[0] + 0.5]
    mids = [(a + b) / 2 for a, b in zip(v[:-1], v[1:], strict=True)]
    return [v[0] - (v[1] - v[0]) / 2, *mids, v[-1] + (v[-1] - v[-2]) / 2]


@pytest.mark.parametrize(
    "values,expected",
    [
        ([1, 2, 3, 4, 5], [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]),  # the paper's
        ([0, 1, 3, 4], [-0.5, 0.5, 2.0, 3.5, 4.5]),  # uneven: each outer end by its own step
        ([0, 10, 100], [-5.0, 5.0, 55.0, 145.0]),
        ([-2.5, -1.0], [-3.25, -1.75, -0.25]),
        ([7], [6.5, 7.5]),  # one level: +- 0.5
    ],
)
def test_thresholds_midpoints_and_half_a_step_outside(values, expected) -> None:
    assert _rule(values) == pytest.approx(expected)
    assert list(Scale(np.array(values, dtype=float)).thresholds) == pytest.approx(expected)


@pytest.mark.filterwarnings("ignore:the chosen restart did not converge")
def test_the_fit_uses_the_rule(monkeypatch) -> None:
    """hyperparams_ reports the thresholds, and every rating's interval in the engine is its
    level's [b_{r-1}, b_r)."""
    df = pd.DataFrame(
        {"annotator": list("abcabc"), "instance": list("iiijjj"), "rating": [0, 1, 3, 4, 3, 0]}
    )
    calls = record_sweeps(monkeypatch)
    m = OrdinalMixture("instance", n_restarts=1, max_iter=3, random_state=0).fit(df)
    b = _rule([0, 1, 3, 4])
    assert m.hyperparams_["thresholds"] == pytest.approx(b)
    assert m.hyperparams_["scale"] == [0.0, 1.0, 3.0, 4.0]
    p = calls[0].problem
    level = {0: 0, 1: 1, 3: 2, 4: 3}
    lo = [b[level[r]] for r in df["rating"]]
    hi = [b[level[r] + 1] for r in df["rating"]]
    np.testing.assert_array_equal(p.thresholds[p.level], lo)
    np.testing.assert_array_equal(p.thresholds[p.level + 1], hi)
    # a declared scale wider than the ratings seen moves the outer thresholds with it
    wide = OrdinalMixture("instance", scale=[0, 1, 2, 3, 4], n_restarts=1, max_iter=3).fit(df)
    assert wide.hyperparams_["thresholds"] == pytest.approx([-0.5, 0.5, 1.5, 2.5, 3.5, 4.5])


@pytest.mark.parametrize("scale", [[3, 2, 1], [1, 2, 2, 3], [1, 3, 2], "5,4,3,2,1", "1,1"], ids=str)
def test_non_increasing_scale_is_refused(scale) -> None:
    df = pd.DataFrame({"annotator": ["a", "b"], "instance": ["i", "i"], "rating": [1, 2]})
    with pytest.raises(InputError, match="strictly increasing without repeats"):
        OrdinalMixture("instance", scale=scale).fit(df)
    with pytest.raises(InputError, match="strictly increasing"):
        Scale.parse(scale) if isinstance(scale, str) else Scale(np.array(scale, dtype=float))


def test_ratings_off_the_scale_are_refused_with_the_row() -> None:
    df = pd.DataFrame({"annotator": ["a", "b", "c"], "instance": ["i"] * 3, "rating": [1, 2, 2.5]})
    with pytest.raises(InputError, match=r"row 4 .*rating 2\.5 is not on the scale 1,2,3"):
        OrdinalMixture("instance", scale=[1, 2, 3]).fit(df)


def test_an_instance_belongs_to_one_query() -> None:
    df = pd.DataFrame(
        {
            "annotator": ["a", "b", "c", "d"],
            "instance": ["i1", "i2", "i1", "i2"],
            "rating": [1, 2, 3, 2],
            "query": ["q1", "q1", "q2", "q1"],
        }
    )
    msg = r"row 4 .*instance 'i1' has query 'q2' here but 'q1' earlier; an instance belongs to one"
    for gran in ("query", "instance", "global"):  # the rule holds whatever the granularity
        with pytest.raises(InputError, match=msg):
            OrdinalMixture(gran).fit(df)
    ok = OrdinalMixture("query", n_restarts=1).fit(df.assign(query=["q1", "q1", "q1", "q1"]))
    assert list(ok.categories_.index) == ["q1"]


# --------------------------------------------------------------------------- named levels


def test_a_scale_of_names_is_values_one_to_k_that_keep_the_names() -> None:
    sc = Scale.parse(" G, P ,R,X ")
    assert sc.names == ("G", "P", "R", "X") and sc.values.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert sc.text == "G,P,R,X" and sc.labels.tolist() == ["G", "P", "R", "X"]
    assert list(sc.thresholds) == [0.5, 1.5, 2.5, 3.5, 4.5]  # the engine sees 1..4
    assert Scale.parse("1,2,3").names is None and Scale.parse("1,2,3").labels.dtype == np.int64
    assert Scale.parse("0,1,x").names == ("0", "1", "x")  # one name makes every level a name
    from ordmix_core.data.scale import as_scale

    assert as_scale(["low", "medium", "high"], []).names == ("low", "medium", "high")
    assert as_scale(["1", "2"], []).names is None and as_scale((1, 2), []).names is None
    assert not sc.same_as(Scale.parse("1,2,3,4")) and sc.same_as(Scale.named("GPRX"))
    for bad, why in (("G,P,G", "names 'G' more than once"), (" , ", "names no level")):
        with pytest.raises(InputError, match=why):
            Scale.parse(bad)
    with pytest.raises(InputError, match="has an empty name"):
        Scale.named(["a", " "])
    with pytest.raises(InputError, match="2 levels but 3 names"):
        Scale(np.array([1.0, 2.0]), ("a", "b", "c"))


def test_labels_written_as_the_scale_writes_them_map_to_their_values() -> None:
    sc = Scale.parse("G,P,R,X")
    got = sc.codes(["X", " G", None, "", "P"])
    assert got[[0, 1, 4]].tolist() == [4.0, 1.0, 2.0] and np.isnan(got[[2, 3]]).all()
    with pytest.raises(InputError, match=r"gold 'g' is not a level of the scale G,P,R,X \(1 such"):
        sc.codes(["G", "g"], "gold")
    num = Scale.parse("1,2,3")
    assert num.codes(["2", 3, 1.0]).tolist() == [2.0, 3.0, 1.0]
    with pytest.raises(InputError, match="'7' is not a level of the scale 1,2,3"):
        num.codes(["2", "7"])


def test_ratings_written_as_names_are_read_in_the_order_given() -> None:
    from ordmix_core import prepare

    levels = ["Not relevant", "Relevant", "Highly relevant"]
    df = pd.DataFrame(
        {
            "annotator": ["a", "b", "c", "a", "b"],
            "instance": ["x", "x", "x", "y", "y"],
            "rating": ["Relevant", " Highly relevant", "Relevant", "Not relevant", "Relevant"],
        }
    )
    d = prepare(df, levels)
    assert d.scale.names == tuple(levels) and d.values.tolist() == [2.0, 3.0, 2.0, 1.0, 2.0]
    backwards = prepare(df, levels[::-1])  # the order is the user's, not the file's
    assert backwards.values.tolist() == [2.0, 1.0, 2.0, 3.0, 2.0]
    with pytest.raises(InputError) as e:
        prepare(df.assign(rating=["Relevant", "relevant", "x", "y", "Relevant"]), levels)
    assert str(e.value) == (
        "ratings: row 3 (counting the header as row 1): rating 'relevant' is not one of the "
        "scale's levels Not relevant, Relevant, Highly relevant; fix the rating or give the "
        "scale that includes it (--scale, lowest level first) (3 such row(s))"
    )
    with pytest.raises(InputError, match="row 2 .*: empty rating cell"):
        prepare(df.assign(rating=[None, "Relevant", "Relevant", "Relevant", "Relevant"]), levels)
    # without the order, the refusal names the names and asks for it
    with pytest.raises(InputError, match="give their order as the scale, lowest level first"):
        prepare(df)


# --------------------------------------------------------------------------- fine scales
@pytest.mark.parametrize("values", [[1, 2, 3, 4, 5], list(range(0, 101, 10)), [0, 0.25, 0.5]])
def test_a_scale_of_up_to_eleven_levels_is_fitted_as_it_is(values) -> None:
    sc = Scale(np.array(values, dtype=float))
    assert not sc.fine
    assert sc.fit_unit == 1.0
    np.testing.assert_array_equal(sc.fit_thresholds, sc.thresholds)


@pytest.mark.parametrize(
    "values,unit",
    [(range(0, 101), 10.0), (range(1, 13), 1.1), (np.linspace(0.0, 1.0, 51), 0.1)],
)
def test_a_fine_scale_is_fitted_in_tenths_of_its_range_with_open_ends(values, unit) -> None:
    sc = Scale(np.asarray(list(values), dtype=float))
    assert sc.fine and sc.k > MAX_COARSE_LEVELS
    assert sc.fit_unit == pytest.approx(unit)
    b, span = sc.fit_thresholds, sc.values[-1] - sc.values[0]
    np.testing.assert_array_equal(b[1:-1], sc.thresholds[1:-1])  # the inner ones: midpoints
    assert b[0] == pytest.approx(sc.values[0] - FINE_END_RANGES * span)
    assert b[-1] == pytest.approx(sc.values[-1] + FINE_END_RANGES * span)


@pytest.mark.filterwarnings("ignore:the chosen restart did not converge")
@pytest.mark.filterwarnings("ignore:.*undetermined")
def test_the_fit_of_a_fine_scale_uses_its_open_ends_and_its_unit(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({
        "annotator": np.tile(list("abcd"), 30),
        "instance": np.repeat([f"i{i}" for i in range(30)], 4),
        "rating": rng.integers(0, 101, 120),
    })  # fmt: skip
    calls = record_sweeps(monkeypatch)
    m = OrdinalMixture("instance", n_restarts=1, max_iter=3, lam=0.1, random_state=0).fit(df)
    sc, p = m.scale_, calls[0].problem
    np.testing.assert_array_equal(p.thresholds, sc.fit_thresholds)
    assert m.hyperparams_["thresholds"] == pytest.approx(list(sc.fit_thresholds))
    assert p.lam == pytest.approx(0.1 / sc.fit_unit**2)  # lam is in the fit's units
    assert m.hyperparams_["lambda"] == pytest.approx(p.lam)
