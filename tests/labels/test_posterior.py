"""One posterior, every item column read from it: ties, the interval, the estimate, the flag,
and the expected gain of one more rating."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ordmix_core.labels.policy import LabelPolicy
from ordmix_core.labels.posterior import (
    LabelPosterior,
    decide,
    expected_gain,
    item_flags,
    level_interval,
    mean_and_sd,
)


def test_decide_marks_ties():
    p = np.array([[0.5, 0.3, 0.2], [0.4, 0.2, 0.395], [0.1, 0.1, 0.8]])
    best, tie = decide(p, 0.01)
    np.testing.assert_array_equal(best, [0, 0, 2])
    np.testing.assert_array_equal(tie, [False, True, False])
    # on a scale of up to 11 levels the values change nothing
    np.testing.assert_array_equal(decide(p, 0.01, np.array([0.0, 1.0, 2.0]))[1], tie)


def test_on_a_slider_neighbouring_values_are_no_tie():
    # 0..100: a runner-up less than a tenth of the range (10 points) away is as good an answer
    values = np.arange(0.0, 101.0)
    p = np.full((3, 101), 0.1 / 98)
    p[0, [50, 51]] = 0.45  # neighbours: no tie
    p[1, [50, 59]] = 0.45  # 9 points apart: no tie
    p[2, [20, 80]] = 0.45  # two answers far apart: undetermined
    best, tie = decide(p, 0.01, values)
    np.testing.assert_array_equal(best, [50, 50, 20])
    np.testing.assert_array_equal(tie, [False, False, True])
    np.testing.assert_array_equal(decide(p, 0.01)[1], [True, True, True])  # without the values


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.001, 1.0), min_size=2, max_size=6),
    st.floats(0.05, 0.99),
)
def test_level_interval_holds_the_label_and_the_mass(weights, mass):
    p = np.asarray(weights)[None, :] / np.sum(weights)
    best, _ = decide(p, 0.0)
    lo, hi = level_interval(p, best, mass)
    assert lo[0] <= best[0] <= hi[0]
    assert p[0, lo[0] : hi[0] + 1].sum() >= mass - 1e-9
    # the narrowest such run: dropping either end leaves less than the mass (or the label)
    if hi[0] > lo[0]:
        assert min(p[0, lo[0] + 1 : hi[0] + 1].sum(), p[0, lo[0] : hi[0]].sum()) < mass


def test_mean_and_sd_are_the_level_values_moments():
    p = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    values = np.array([1.0, 2.0, 4.0])
    mean, sd = mean_and_sd(p, values)
    np.testing.assert_allclose(mean, [0.2 + 0.6 + 2.0, 1.0])
    var0 = 0.2 * (1 - 2.8) ** 2 + 0.3 * (2 - 2.8) ** 2 + 0.5 * (4 - 2.8) ** 2
    np.testing.assert_allclose(sd, [np.sqrt(var0), 0.0], atol=1e-12)
    # and the posterior's sd column is the same
    cols = LabelPosterior(p, values, np.zeros(2), "confusion").read()
    np.testing.assert_allclose(cols["sd"], [np.sqrt(var0), 0.0], atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3).filter(lambda w: sum(w) > 0))
def test_estimate_is_inside_the_scale(weights):
    p = np.asarray(weights)[None, :] / np.sum(weights)
    mean, _ = mean_and_sd(p, np.array([1.0, 2.0, 3.0]))
    assert 1.0 <= mean[0] <= 3.0


def _gain_by_enumeration(q, rater, report):
    """The expected gain written out: every answer, its chance, the max after it."""
    out = []
    for row in q:
        now = (row @ report).max()
        after = 0.0
        for k in range(rater.shape[1]):
            joint = row * rater[:, k]
            pk = joint.sum()
            if pk > 0:
                after += pk * ((joint / pk) @ report).max()
        out.append(after - now)
    return np.array(out)


def test_expected_gain_matches_enumeration_and_is_never_negative():
    rng = np.random.default_rng(3)
    q = rng.dirichlet(np.ones(4), size=50)
    rater = rng.dirichlet(np.ones(4) * 2, size=4) + 2 * np.eye(4)
    rater /= rater.sum(axis=1, keepdims=True)
    report = 0.7 * np.eye(4) + 0.3 / 4
    got = expected_gain(q, rater, report)
    np.testing.assert_allclose(got, _gain_by_enumeration(q, rater, report), atol=1e-12)
    assert (got >= 0).all()


def test_expected_gain_is_zero_for_a_settled_item_and_for_an_uninformative_rater():
    q = np.array([[1.0, 0.0, 0.0], [0.4, 0.35, 0.25]])
    honest = np.eye(3) * 0.8 + 0.2 / 3
    assert expected_gain(q[:1], honest, np.eye(3))[0] == 0.0
    noise = np.full((3, 3), 1 / 3)  # answers at random: teaches nothing
    np.testing.assert_allclose(expected_gain(q, noise, np.eye(3)), 0.0, atol=1e-15)
    assert expected_gain(q[1:], honest, np.eye(3))[0] > 0.0


def test_read_gives_every_column_from_the_one_posterior():
    p = np.array([[0.7, 0.2, 0.1], [0.4, 0.405, 0.195], [0.02, 0.03, 0.95]])
    post = LabelPosterior(p, np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.2, 0.0]), "confusion")
    cols = post.read(LabelPolicy(tie=0.01, confidence=0.9, interval=0.9))
    np.testing.assert_array_equal(cols["label"], [0, 1, 2])
    np.testing.assert_allclose(cols["p_wrong"], 1 - p[np.arange(3), cols["label"]])
    assert list(cols["flag"]) == ["uncertain", "undetermined", "confident"]
    np.testing.assert_allclose(cols["estimate"], p @ [1.0, 2.0, 3.0])
    for i, (lo, hi) in enumerate(zip(cols["lower"], cols["upper"], strict=True)):
        assert lo <= cols["label"][i] <= hi and p[i, lo : hi + 1].sum() >= 0.9 - 1e-12
    np.testing.assert_array_equal(cols["expected_gain"], [0.1, 0.2, 0.0])


def test_undetermined_marks_the_items_read_flags_undetermined():
    p = np.array([[0.7, 0.2, 0.1], [0.4, 0.405, 0.195], [0.5, 0.0, 0.5], [0.02, 0.03, 0.95]])
    post = LabelPosterior(p, np.array([1.0, 2.0, 3.0]), np.zeros(4), "confusion")
    for tie in (0.001, 0.01, 0.3):
        policy = LabelPolicy(tie=tie)
        expected = post.read(policy)["flag"] == "undetermined"
        np.testing.assert_array_equal(post.undetermined(policy), expected)
    np.testing.assert_array_equal(post.undetermined(LabelPolicy(tie=0.01)), [0, 1, 1, 0])


def test_rows_take_a_slice_of_every_per_item_array():
    p = np.eye(3)[[0, 1, 2, 1]]
    est = np.arange(4.0) / 2
    post = LabelPosterior(p, np.arange(3.0), np.arange(4.0), "continuous", est, np.ones(4))
    part = post.rows(slice(1, 3))
    np.testing.assert_array_equal(part.proba, p[1:3])
    np.testing.assert_array_equal(part.gain, [1.0, 2.0])
    np.testing.assert_array_equal(part.estimates()[0], [0.5, 1.0])


def test_decide_on_two_levels_and_on_one():
    # two levels: the general rule, ties included
    best, tie = decide(np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]), 0.01)
    np.testing.assert_array_equal(best, [0, 0, 1])
    np.testing.assert_array_equal(tie, [True, False, False])
    # one level (every rating the same answer): that level, never a tie
    best, tie = decide(np.ones((3, 1)), 0.01)
    np.testing.assert_array_equal(best, [0, 0, 0])
    assert tie.dtype == bool and tie.shape == (3,) and not tie.any()


def test_a_runner_up_exactly_the_tie_apart_is_no_tie():
    # 0.625 - 0.375 is exactly 0.25 in binary: "closer than" the tie is a tie, this is not
    p = np.array([[0.625, 0.375], [0.375, 0.625]])
    np.testing.assert_array_equal(decide(p, 0.25)[1], [False, False])
    np.testing.assert_array_equal(decide(p, 0.25 + 2**-20)[1], [True, True])


def test_on_a_slider_only_close_probabilities_far_apart_are_a_tie():
    values = np.arange(0.0, 101.0)  # a fit unit of 10 points
    p = np.full((3, 101), 0.1 / 99)
    p[0, [50, 60]] = 0.45  # exactly the fit unit apart: no longer neighbours
    p[1, 20], p[1, 80] = 0.6, 0.3  # far apart, but the label clearly more probable
    p[2, [50, 51]] = 0.45
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(decide(p, 0.01, values)[1], [True, False, False])


def test_a_label_exactly_at_the_confidence_is_confident():
    flags = item_flags(np.array([False, False, True]), np.array([0.9, 0.9 - 2**-40, 0.95]), 0.9)
    assert list(flags) == ["confident", "uncertain", "undetermined"]


def test_level_interval_edges():
    def interval(p, mass):
        p = np.asarray(p, dtype=float)
        lo, hi = level_interval(p, decide(p, 0.0)[0], mass)
        return list(zip(lo.tolist(), hi.tolist(), strict=True))

    # the label alone holds exactly the mass: nothing added; each row grows on its own
    assert interval([[0.05, 0.9, 0.05], [0.3, 0.4, 0.3]], 0.9) == [(1, 1), (0, 2)]
    # equal neighbours: the lower level first
    assert interval([[0.2, 0.6, 0.2]], 0.7) == [(0, 1)]
    # a neighbour of probability 0 is still a neighbour: the run stays adjacent levels
    assert interval([[0.3, 0.0, 0.7], [0.7, 0.0, 0.3]], 0.9) == [(0, 2), (0, 2)]


def test_the_estimate_is_clipped_to_the_scale_when_rounding_overshoots():
    # a normalised posterior can sum to one plus an ulp; its mean stays on the scale
    over = np.nextafter(1.0, 2.0)
    values = np.array([-1.0, 0.0, 1.0])
    p = np.array([[0.0, 0.0, over], [over, 0.0, 0.0]])
    assert (p @ values)[0] > 1.0 and (p @ values)[1] < -1.0  # the overshoot is real
    np.testing.assert_array_equal(mean_and_sd(p, values)[0], [1.0, -1.0])


def test_read_and_undetermined_on_a_slider_use_its_values():
    values = np.arange(0.0, 101.0)
    p = np.full((2, 101), 0.1 / 99)
    p[0, [50, 51]] = 0.45  # neighbours: no tie on a slider
    p[1, [20, 80]] = 0.45  # far apart: undetermined
    post = LabelPosterior(p, values, np.zeros(2), "confusion")
    assert list(post.read()["flag"]) == ["uncertain", "undetermined"]
    np.testing.assert_array_equal(post.undetermined(), [False, True])


def test_rows_keep_the_sd_and_work_without_an_estimate():
    p = np.eye(3)[[0, 1, 2, 1]]
    post = LabelPosterior(p, np.arange(3.0), np.zeros(4), "continuous", np.zeros(4), np.arange(4.0))
    np.testing.assert_array_equal(post.rows(slice(1, 3)).estimates()[1], [1.0, 2.0])
    own = LabelPosterior(p, np.array([1.0, 2.0, 5.0]), np.zeros(4), "confusion")
    part = own.rows(slice(2, 4))
    assert part.estimate is None and part.sd is None
    np.testing.assert_array_equal(part.estimates()[0], [5.0, 2.0])
