"""A fine scale (more than 11 levels, a 0..100 slider): the continuous model fitted in tenths
of the range with open ends, without the annotator bias or a learned spam distribution, and
labelled from its continuous posterior; a scale of up to 11 levels is fitted as before."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
import pytest

from ordmix_core import OrdinalMixture, Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.estimators.models import FINE_SCALE
from ordmix_core.labels.choose import MAX_CLASSES

SLIDER = Scale(np.arange(0.0, 101.0))


def _slider(seed: int = 0, floor: bool = False, **kw) -> tuple[pd.DataFrame, pd.Series]:
    """A 0..100 crowd: a good rating about 10 points off, 20% spammers. ``floor``: half the
    items at 0 (drawn on -100..100, everything below 0 put at 0, as a slider does)."""
    base = {"n_items": 300, "n_annotators": 30, "ratings_per_item": 8, "scale": SLIDER,
            "unit": 10.0, "expertise": 1.0, "spammer_share": 0.2, "random_state": seed}  # fmt: skip
    base.update(kw)
    if floor:
        base.update(scale=Scale(np.arange(-100.0, 101.0)), unit=20.0)
    c = simulate_crowd(**base)
    r = c.ratings[["annotator", "instance", "rating"]]
    if floor:
        return r.assign(rating=r["rating"].clip(lower=0.0)), c.truth.clip(lower=0.0)
    return r, c.truth


def _fit(ratings: pd.DataFrame, **params) -> OrdinalMixture:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OrdinalMixture(random_state=0, **params).fit(ratings)


def _mse(est: pd.Series, truth: pd.Series) -> float:
    return float(np.mean((est - truth.reindex(est.index)) ** 2))


@pytest.fixture(scope="module")
def slider():
    ratings, truth = _slider()
    return ratings, truth, _fit(ratings)


def test_a_slider_crowd_is_fitted_without_collapse(slider) -> None:
    ratings, _, m = slider
    assert not m.collapsed_
    honest = 1.0 - m.annotators_["spam_share"].mul(m.annotators_["n_ratings"]).sum() / len(ratings)
    assert 0.7 < honest < 0.9  # 20% of the ratings are spam
    spammers = m.annotators_["spam_share"] > 0.5
    assert spammers.sum() >= 3
    assert m.model_["bias"] is False and m.model_["spam_dist"] == "uniform"


def test_a_slider_crowd_is_recovered_better_than_by_its_median(slider) -> None:
    ratings, truth, m = slider
    median = ratings.groupby("instance")["rating"].median()
    mean = ratings.groupby("instance")["rating"].mean()
    ours = _mse(m.estimates_, truth)
    assert ours < 0.6 * _mse(median, truth)  # measured: 0.4 of it on 10,000 ratings
    assert ours < 0.3 * _mse(mean, truth)
    assert m.estimates_.between(0.0, 100.0).all()  # the posterior mean of a level's value
    labels = m.labels_.astype(float)
    assert np.mean(np.abs(labels - truth.reindex(labels.index)) > 10) < 0.1


def test_a_slider_is_labelled_from_the_continuous_posterior_and_says_why(slider) -> None:
    _, _, m = slider
    said = m.model_["labels"]
    assert said["model"].startswith("continuous posterior")
    assert f"a scale of {m.scale_.k} levels (more than {MAX_CLASSES})" in said["why"]
    assert m.label_result_.posterior.source == "continuous" and m.label_result_.fit is None
    # every item column from that one posterior: the estimate is its mean of the level's value
    p = m.label_result_.posterior.proba
    np.testing.assert_allclose(m.estimates_.to_numpy(), p @ m.scale_.values)


def test_a_floor_of_items_at_zero_does_not_shift_the_estimates() -> None:
    # half the items at 0: with the annotator bias the whole crowd moved by a third of the
    # range (its estimates 11 at 0, 119 at 90), with a learned spam distribution it collapsed
    ratings, truth = _slider(seed=1, floor=True, n_items=500)
    m = _fit(ratings)
    median = ratings.groupby("instance")["rating"].median()
    assert _mse(m.estimates_, truth) < 0.8 * _mse(median, truth)
    at_zero = truth.reindex(m.estimates_.index) == 0
    assert m.estimates_[at_zero].mean() < 5.0


def test_a_slider_is_fitted_as_its_positions_in_tenths_of_the_range() -> None:
    # 0..100 and the same ratings divided by 10 (0..10, also fine: its unit is 1) are one fit
    ratings, _ = _slider(seed=2, n_items=150)
    m = _fit(ratings)
    tenths = _fit(ratings.assign(rating=ratings["rating"] / 10.0))
    np.testing.assert_allclose(m.estimates_, 10.0 * tenths.estimates_, atol=0.05)
    assert m.hyperparams_["lambda"] == pytest.approx(tenths.hyperparams_["lambda"] / 100.0)


def test_explicit_choices_override_the_fine_scale_defaults(slider) -> None:
    ratings, _, _ = slider
    m = _fit(ratings, bias=True, spam_dist="global", labels="confusion", n_restarts=2)
    assert m.model_["bias"] is True and m.model_["spam_dist"] == "global"
    assert "classes" in m.model_["labels"] and "why" not in m.model_["labels"]


def test_a_scale_of_eleven_levels_keeps_the_extended_model_and_its_labels() -> None:
    c = simulate_crowd(n_items=200, scale=Scale(np.arange(0.0, 101.0, 10.0)), random_state=0)
    m = _fit(c.ratings, n_restarts=2)
    assert m.scale_.k == MAX_CLASSES and not m.scale_.fine
    assert m.model_["bias"] is True and m.model_["spam_dist"] == "global"
    assert m.model_["labels"]["model"].startswith("ordinal confusion model")
    assert "why" not in m.model_["labels"]
    assert m.hyperparams_["lambda"] == 0.1
    assert m.hyperparams_["thresholds"] == pytest.approx(list(m.scale_.thresholds))
    assert set(FINE_SCALE) == {"bias", "spam_dist", "labels"}


@pytest.mark.slow
def test_a_slider_crowd_of_10000_ratings_fits_in_seconds() -> None:
    ratings, truth = _slider(n_items=1000, n_annotators=50, ratings_per_item=10)
    _fit(ratings.head(400), n_restarts=1)  # the compiled kernels loaded once, not timed
    t0, c0 = time.perf_counter(), time.process_time()
    m = _fit(ratings)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert cpu < 10.0, f"{cpu:.1f} s of CPU ({wall:.1f} s wall)"  # measured: 1-2 s
    median = ratings.groupby("instance")["rating"].median()
    assert _mse(m.estimates_, truth) < 0.6 * _mse(median, truth)
