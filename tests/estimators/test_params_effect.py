"""User-set mu, lam, phi, eta and pi change the fit the way the model's math says.

q(z_m) = N(mu_m, 1/lambda_m) with ``lambda_m = lam + sum_l w_l`` and
``mu_m = (lam mu + sum_l w_l E[x_l]) / lambda_m``: a stronger prior lam pulls every estimate to
mu, and sd <= 1/sqrt(lam). delta ~ Gamma(phi, eta) (shape, rate): a strong prior pins E[delta]
at phi/eta; as the likelihood depends on tau_n delta_c only and the prior of tau is learned,
the expertise then absorbs the scale and nothing else moves. pi enters the log-odds of omega
as ``- log pi_r``.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from scipy.special import logit

from ordmix_core import OrdinalMixture as _OrdinalMixture
from ordmix_core.data.simulate import simulate_crowd

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: the paper's model: its priors and its fixed spam distribution pi (the extended
#: default learns pi)
OrdinalMixture = functools.partial(_OrdinalMixture, model="paper")


@pytest.fixture(scope="module")
def ratings() -> pd.DataFrame:
    return simulate_crowd(
        n_items=60, n_annotators=8, ratings_per_item=4, spammer_share=0.25, n_queries=4,
        random_state=11,
    ).ratings  # fmt: skip


def _fit(ratings, **kw) -> OrdinalMixture:
    return OrdinalMixture("query", **{"n_restarts": 2, "random_state": 0, **kw}).fit(ratings)


@pytest.mark.parametrize("spam", [True, False], ids=["spam", "nospam"])
def test_strong_lam_pulls_estimates_to_mu(ratings, spam) -> None:
    mu = 1.0  # the bottom of the scale 1..5, far from most items
    dist = []
    for lam in (0.01, 1.0, 100.0, 1e4):
        m = _fit(ratings, mu=mu, lam=lam, spam=spam)
        assert m.hyperparams_["mu"] == mu and m.hyperparams_["lambda"] == lam
        assert np.all(m.sd_ <= 1 / np.sqrt(lam) * (1 + 1e-12))  # lambda_m >= lam
        dist.append(float((m.estimates_ - mu).abs().mean()))
    assert dist[0] > 1.0  # a weak prior leaves the data in charge
    assert all(a > b for a, b in zip(dist[:-1], dist[1:], strict=True)), dist
    assert dist[-1] < 1e-3


@pytest.mark.parametrize("spam", [True, False], ids=["spam", "nospam"])
def test_mu_moves_every_estimate_its_way(ratings, spam) -> None:
    low = _fit(ratings, mu=1.0, lam=1.0, spam=spam).estimates_
    high = _fit(ratings, mu=5.0, lam=1.0, spam=spam).estimates_
    assert (high > low).all()


def test_default_mu_is_the_centre_of_the_scale() -> None:
    df = pd.DataFrame(
        {"annotator": list("abcabcab"), "instance": list("iiijjjkk"),
         "rating": [0, 1, 3, 4, 3, 0, 1, 1]}
    )  # fmt: skip
    auto = OrdinalMixture("instance", n_restarts=2, random_state=0).fit(df)
    assert auto.hyperparams_["mu"] == 2.0  # mean of 0, 1, 3, 4 (not of the ratings: 1.625)
    given = OrdinalMixture("instance", mu=2.0, n_restarts=2, random_state=0).fit(df)
    pd.testing.assert_series_equal(auto.estimates_, given.estimates_)
    other = OrdinalMixture("instance", mu=1.625, n_restarts=2, random_state=0).fit(df)
    assert not np.allclose(other.estimates_, auto.estimates_)


@pytest.mark.parametrize("spam", [True, False], ids=["spam", "nospam"])
def test_strong_phi_eta_pin_difficulty_and_expertise_takes_the_scale(ratings, spam) -> None:
    fits = {}
    for r in (0.5, 2.0):
        # eta up to the options table's 1e6
        m = _fit(ratings, phi=5e5, eta=5e5 / r, spam=spam, tol=1e-6)
        assert (m.hyperparams_["phi"], m.hyperparams_["eta"]) == (5e5, 5e5 / r)
        np.testing.assert_allclose(m.categories_["difficulty"], r, rtol=1e-3)
        fits[r] = m
    # only tau * delta is identified: expertise scales by 1/r, the truth does not move
    ratio = fits[0.5].annotators_["expertise"] / fits[2.0].annotators_["expertise"]
    np.testing.assert_allclose(ratio, 4.0, rtol=1e-3)
    np.testing.assert_allclose(fits[0.5].estimates_, fits[2.0].estimates_, atol=1e-3)
    # a weak prior lets the queries' difficulties spread
    weak = _fit(ratings, phi=1.0, eta=1.0, spam=spam).categories_["difficulty"]
    assert weak.max() / weak.min() > 1.5


def test_pi_is_normalised_and_reported(ratings) -> None:
    m = _fit(ratings, pi=[7, 1, 1, 1, 1])
    assert m.hyperparams_["pi"] == pytest.approx([7 / 11] + [1 / 11] * 4)
    default = _fit(ratings)
    assert default.hyperparams_["pi"] == pytest.approx([0.2] * 5)


def test_pi_shifts_the_log_odds_of_omega_by_log_pi(ratings) -> None:
    """One sweep from the same start (which does not depend on pi): the log-odds that a rating
    comes from the truth differ by exactly log pi_a(r) - log pi_b(r)."""
    kw = dict(n_restarts=1, max_iter=1, nospam_warmup=False, accelerate=False, random_state=0)
    pa, pb = np.array([7, 1, 1, 1, 1]) / 11, np.array([1, 2, 3, 4, 5]) / 15
    a = _fit(ratings, pi=list(pa), **kw)
    b = _fit(ratings, pi=list(pb), **kw)
    level = ratings["rating"].to_numpy(dtype=int) - 1
    shift = logit(b.omega_) - logit(a.omega_)
    np.testing.assert_allclose(shift, np.log(pa[level]) - np.log(pb[level]), atol=1e-9)


def test_pi_on_a_favourite_answer_marks_its_spammer(ratings) -> None:
    """An annotator who answers 1 to everything: the more pi expects spam to say 1, the more
    of that annotator's ratings are spam (lower reliability). With pi favouring 5 the fit ends
    at 0.36, as a 100x tighter one does (eps 0.33); before the stopping rule asked the
    annotators' reliabilities to settle it stopped at 0.97, 8 nats lower, with this
    annotator's eps still drifting."""
    first = ratings.groupby("instance")["query"].first()
    fav = pd.DataFrame(
        {"annotator": "fav", "instance": first.index, "rating": 1.0, "query": first.to_numpy()}
    )
    data = pd.concat([ratings, fav], ignore_index=True)
    rel = {
        name: _fit(data, pi=pi).annotators_.loc["fav", "reliability"]
        for name, pi in [("favours 5", [1, 1, 1, 1, 7]), ("uniform", None),
                         ("favours 1", [7, 1, 1, 1, 1])]
    }  # fmt: skip
    assert 0.5 > rel["favours 5"] > 0.3 > rel["uniform"] > rel["favours 1"], rel
