"""simulate.py: the teaching options (biased raters, favourite-answer spammers) leave the
default crowd exactly as it was, and do what they say."""

from __future__ import annotations

import hashlib

import numpy as np

from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd

#: sha256 of ``simulate_crowd(random_state=0).ratings.to_csv(index=False)`` as drawn before
#: the options existed (the crowds of tests, benchmarks and the demo must not move)
DEFAULT_CROWD_SHA = "dc6c0113458b1822e8df05224eb88830f833a79088d2adf91fa4ccbaf8a60805"


def _sha(crowd) -> str:
    return hashlib.sha256(crowd.ratings.to_csv(index=False).encode()).hexdigest()


def test_the_default_crowd_is_byte_identical():
    assert _sha(simulate_crowd(random_state=0)) == DEFAULT_CROWD_SHA
    explicit = simulate_crowd(random_state=0, bias_sd=0.0, favourite_share=0.0)
    assert _sha(explicit) == DEFAULT_CROWD_SHA
    assert (explicit.bias == 0).all() and explicit.favourite.isna().all()


def test_favourite_answer_spammers_give_their_favourite():
    c = simulate_crowd(random_state=3, favourite_share=1.0, favourite_weight=1.0)
    spammers = c.spammers.index[c.spammers]
    assert c.favourite.loc[spammers].notna().all()
    assert c.favourite.loc[c.spammers.index[~c.spammers]].isna().all()
    r = c.ratings[c.ratings["annotator"].isin(spammers)]
    got = r.groupby("annotator")["rating"].agg(lambda x: set(x))
    assert all(got[a] == {c.favourite[a]} for a in got.index)
    # the honest raters' ratings are the same draws as without favourites
    plain = simulate_crowd(random_state=3)
    honest = ~c.ratings["annotator"].isin(spammers)
    np.testing.assert_array_equal(
        c.ratings.loc[honest, "rating"], plain.ratings.loc[honest, "rating"]
    )


def test_biased_raters_shift_their_ratings():
    c = simulate_crowd(n_items=2000, random_state=1, spammer_share=0.0, bias_sd=1.0)
    r = c.ratings.assign(err=c.ratings["rating"] - c.truth.reindex(c.ratings["instance"]).values)
    mean_err = r.groupby("annotator")["err"].mean()
    assert np.corrcoef(mean_err, c.bias.reindex(mean_err.index))[0, 1] > 0.8


def test_the_default_crowd_is_unchanged_by_the_slider_options():
    explicit = simulate_crowd(random_state=0, unit=None, round_share=0.0)
    assert _sha(explicit) == DEFAULT_CROWD_SHA


def _slider(**kw):
    return simulate_crowd(
        n_items=600, n_annotators=30, ratings_per_item=8, scale=Scale(np.arange(0.0, 101.0)),
        spammer_share=0.0, difficulty_spread=0.0, random_state=2, **kw,
    )  # fmt: skip


def _error_sd(c) -> float:
    """The ratings' spread around the truth, away from the ends (where they are cut)."""
    t = c.truth.reindex(c.ratings["instance"]).to_numpy()
    inside = (t > 30) & (t < 70)
    return float(np.std(c.ratings["rating"].to_numpy()[inside] - t[inside]))


def test_the_unit_sets_how_far_a_rating_lands_from_the_truth():
    # on 0..100 the step is 1 point: a good rating half a point off; unit=10, five points
    fine, coarse = _error_sd(_slider()), _error_sd(_slider(unit=10.0))
    assert fine < 1.0
    assert 3.0 < coarse < 8.0


def test_rounding_annotators_answer_in_multiples_of_round_to():
    c = _slider(unit=10.0, round_share=0.5, round_to=10.0)
    in_tens = c.ratings.groupby("annotator")["rating"].agg(lambda x: bool((x % 10 == 0).all()))
    assert 0.2 < in_tens.mean() < 0.8  # about half the annotators, and only those
    plain = _slider(unit=10.0)
    others = c.ratings["annotator"].isin(in_tens.index[~in_tens])
    np.testing.assert_array_equal(  # the others' ratings are the draws without rounding
        c.ratings.loc[others, "rating"], plain.ratings.loc[others, "rating"]
    )
