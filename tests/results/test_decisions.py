"""decisions.py: each quantity against an independent computation, properties for any input,
and the flags on the demo data (TREC and the simulated crowd with known spammers)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, stats
from scipy.special import betaln

from ordmix_core.data.scale import Scale
from ordmix_core.data.simulate import simulate_crowd
from ordmix_core.errors import InputError
from ordmix_core.estimators.ordinal_mixture import OrdinalMixture
from ordmix_core.labels.policy import LabelPolicy
from ordmix_core.labels.posterior import LabelPosterior
from ordmix_core.results import decisions as D
from ordmix_core.results import evidence, reliability

ROOT = Path(__file__).resolve().parents[2]
THRESHOLDS = np.array([0.5, 1.5, 2.5, 3.5])


# --------------------------------------------------------------------------- items
def test_level_probabilities_match_scipy_norm():
    rng = np.random.default_rng(1)
    mean = rng.uniform(-1, 5, 50)
    sd = rng.uniform(0.01, 4, 50)
    p = D.level_probabilities(mean, sd, THRESHOLDS)
    edges = [-np.inf, 1.5, 2.5, np.inf]
    for k in range(3):
        want = stats.norm.cdf(edges[k + 1], mean, sd) - stats.norm.cdf(edges[k], mean, sd)
        np.testing.assert_allclose(p[:, k], want, atol=1e-12)


def test_expected_gain_matches_quadrature_and_is_a_martingale():
    mean, sd, rho, share = 1.8, 0.4, 3.0, 0.7
    prec_after = 1 / sd**2 + rho
    spread = np.sqrt(sd**2 - 1 / prec_after)

    def after(m):
        return D.level_probabilities(np.array([m]), np.array([prec_after**-0.5]), THRESHOLDS)[0]

    dens = stats.norm(mean, spread).pdf
    lim = (mean - 12 * spread, mean + 12 * spread)
    e_max = integrate.quad(lambda m: after(m).max() * dens(m), *lim, points=[1.5, 2.5])[0]
    now = D.level_probabilities(np.array([mean]), np.array([sd]), THRESHOLDS)[0]
    # each level's probability is a martingale: its expectation after the rating is today's
    for k in range(3):
        e_k = integrate.quad(lambda m, k=k: after(m)[k] * dens(m), *lim, points=[1.5, 2.5])[0]
        assert e_k == pytest.approx(now[k], abs=1e-7)
    gain = D.expected_gain(np.array([mean]), np.array([sd]), THRESHOLDS, np.array([rho]), share)
    assert gain[0] == pytest.approx(share * (e_max - now.max()), abs=2e-4)
    assert gain[0] > 0.01


def test_expected_gain_small_for_settled_items():
    mean = np.array([2.0, 2.0, 1.5])
    sd = np.array([0.05, 0.5, 0.002])  # settled; open; settled exactly on a threshold
    g = D.expected_gain(mean, sd, THRESHOLDS, np.full(3, 3.0), 1.0)
    assert g[1] > 10 * max(g[0], g[2])


def _frames(mean, sd):
    items = pd.DataFrame(
        {"estimate": mean, "sd": sd, "category": "c"},
        index=pd.Index([f"i{k}" for k in range(len(mean))], name="instance"),
    )
    hp = {"thresholds": THRESHOLDS, "scale": [1, 2, 3], "lambda": 0.1, "alpha": 2, "beta": 1}
    return items, hp


def test_continuous_posterior_is_the_paper_models_levels_gain_and_estimate():
    items, hp = _frames([1.0, 2.4, 2.0, 1.45], np.array([0.1, 0.3, 10**0.5, 0.3]))
    mean, sd = items["estimate"].to_numpy(), items["sd"].to_numpy()
    post = D.continuous_posterior(mean, sd, hp, np.full(4, 2.0), 0.8)
    np.testing.assert_array_equal(post.proba, D.level_probabilities(mean, sd, THRESHOLDS))
    want = D.expected_gain(mean, sd, THRESHOLDS, np.full(4, 4.0), 0.8)
    np.testing.assert_array_equal(post.gain, want)
    assert post.source == "continuous"
    np.testing.assert_array_equal(post.estimates()[0], mean)  # the paper's posterior mean of z


def test_item_columns_read_everything_from_the_posterior():
    proba = np.array([[0.92, 0.05, 0.03], [0.45, 0.446, 0.104], [0.2, 0.5, 0.3], [0.7, 0.2, 0.1]])
    post = LabelPosterior(proba, np.array([1.0, 2.0, 3.0]), np.arange(4) / 10, "confusion")
    index = pd.Index([f"i{k}" for k in range(4)], name="instance")
    out = D.item_columns(post, index, LabelPolicy(), truth_weight=np.ones(4))
    assert list(out.columns) == [
        "label", "p_wrong", "p_level_1", "p_level_2", "p_level_3", "lower_90", "upper_90",
        "truth_weight", "expected_gain", "flag",
    ]  # fmt: skip
    assert out["label"].tolist() == [1, 1, 2, 1]
    assert out["flag"].tolist() == ["confident", "undetermined", "uncertain", "uncertain"]
    np.testing.assert_allclose(out["p_wrong"], [0.08, 0.55, 0.5, 0.3])
    np.testing.assert_allclose(out[["p_level_1", "p_level_2", "p_level_3"]], proba)
    assert out["lower_90"].tolist() == [1, 1, 1, 1]
    assert out["upper_90"].tolist() == [1, 3, 3, 2]
    np.testing.assert_array_equal(out["expected_gain"], np.arange(4) / 10)
    # the label and the interval's ends are levels of a whole-number scale (3, not 3.0)
    for col in ("label", "lower_90", "upper_90"):
        assert out[col].dtype == np.int64, col
    stricter = D.item_columns(post, index, LabelPolicy(confidence=0.95))
    assert stricter["flag"].tolist()[0] == "uncertain"


def test_reflagged_reads_the_flags_again_from_the_written_probabilities():
    items = pd.DataFrame(
        {"p_level_1": [0.92, 0.45, 0.2], "p_level_2": [0.05, 0.446, 0.5],
         "p_level_3": [0.03, 0.104, 0.3], "flag": ["confident", "undetermined", "uncertain"]}
    )  # fmt: skip
    assert D.reflagged(items, [1, 2, 3], 0.95)["flag"].tolist() == [
        "uncertain", "undetermined", "uncertain"
    ]  # fmt: skip
    with pytest.raises(InputError, match="confidence"):
        D.reflagged(items, [1, 2, 3], 0.3)


@given(
    mean=st.lists(st.floats(-50, 50), min_size=1, max_size=20),
    log_sd=st.floats(-6, 3),
    values=st.lists(st.floats(-10, 10), min_size=1, max_size=6, unique=True),
)
@settings(max_examples=80, deadline=None)
def test_probabilities_sum_to_one_and_the_gain_is_a_probability(mean, log_sd, values):
    from ordmix_core.data.scale import Scale

    values = sorted(values)
    if len(values) > 1 and np.min(np.diff(values)) < 1e-3:
        return
    t = Scale(np.array(values)).thresholds
    mean = np.array(mean)
    sd = np.full(mean.size, np.exp(log_sd))
    p = D.level_probabilities(mean, sd, t)
    assert np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    gain = D.expected_gain(mean, sd, t, np.full(mean.size, 2.0), 0.5)
    assert np.all((gain >= 0) & (gain <= 1))


# --------------------------------------------------------------------------- annotators
def _mixture_posterior(log_r, a0=1.0, b0=1.0):
    """The exact posterior as a Beta mixture: prod (1-e+e r) = sum_k e_k(r) e^k (1-e)^(n-k)."""
    coef = np.array([1.0])
    for r in np.exp(log_r):
        coef = np.convolve(coef, [1.0, r])  # coefficient k: elementary symmetric poly e_k
    n = len(log_r)
    k = np.arange(n + 1)
    log_w = np.log(np.maximum(coef, 1e-300)) + betaln(a0 + k, b0 + n - k)
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    dists = [stats.beta(a0 + kk, b0 + n - kk) for kk in k]
    return w, dists


#: the grid (default: 481 nodes; 161 above ``_BIG_L`` ratings) -> (the most ratings per
#: annotator drawn, tolerance of p_below, mean, quantiles)
GRIDS = {None: (12, 1e-5, 1e-4, 1e-4), reliability._GRID_N_BIG: (40, 1e-4, 1e-3, 2e-4)}


@pytest.mark.parametrize("nodes", list(GRIDS), ids=["481-nodes", "161-nodes"])
@pytest.mark.parametrize("seed", range(6))
def test_reliability_posterior_matches_the_exact_beta_mixture(seed, nodes):
    most, tol_p, tol_mean, tol_q = GRIDS[nodes]
    rng = np.random.default_rng(seed)
    prior = [(1.0, 1.0), (0.5, 0.5), (2.0, 3.0)][seed % 3]
    ann = np.repeat(np.arange(4), rng.integers(1, most, size=4))
    log_r = rng.normal(0, 1.5, ann.size)
    post = reliability.reliability_posterior(
        ann, log_r, 4, threshold=0.4, interval=0.8, prior=prior, nodes=nodes
    )
    for n in range(4):
        w, dists = _mixture_posterior(log_r[ann == n], *prior)

        def cdf(x, w=w, dists=dists):
            return sum(wk * d.cdf(x) for wk, d in zip(w, dists, strict=True))

        assert post["p_below"][n] == pytest.approx(cdf(0.4), abs=tol_p)
        assert post["mean"][n] == pytest.approx(
            sum(wk * d.mean() for wk, d in zip(w, dists, strict=True)), abs=tol_mean
        )
        for col, q in (("lower", 0.1), ("upper", 0.9)):
            want = optimize.brentq(lambda x, q=q: cdf(x) - q, 1e-12, 1 - 1e-12)
            assert post[col][n] == pytest.approx(want, abs=tol_q)


def test_more_than_big_l_ratings_use_the_coarser_grid(monkeypatch):
    rng = np.random.default_rng(0)
    ann = np.repeat(np.arange(3), [5, 9, 30])
    log_r = rng.normal(0, 1.5, ann.size)
    fine, coarse = (reliability.reliability_posterior(ann, log_r, 3, nodes=k) for k in (481, 161))
    pd.testing.assert_frame_equal(reliability.reliability_posterior(ann, log_r, 3), fine)
    monkeypatch.setattr(reliability, "_BIG_L", ann.size - 1)
    pd.testing.assert_frame_equal(reliability.reliability_posterior(ann, log_r, 3), coarse)
    assert not fine.equals(coarse)


def test_decisive_evidence_gives_the_beta_posterior():
    ann = np.repeat([0, 1, 2], [3, 7, 40])
    log_r = np.r_[np.full(3, -50.0), np.full(7, 50.0), np.full(40, -50.0)]
    post = reliability.reliability_posterior(ann, log_r, 3, threshold=0.5, prior=(1, 1))
    # all-spam evidence: Beta(1, 1 + n); all-truth evidence: Beta(1 + n, 1)
    assert post["p_below"][0] == pytest.approx(stats.beta.cdf(0.5, 1, 4), abs=1e-5)
    assert post["p_below"][1] == pytest.approx(stats.beta.cdf(0.5, 8, 1), abs=1e-5)
    assert post["p_below"][2] == pytest.approx(stats.beta.cdf(0.5, 1, 41), abs=1e-5)
    assert post["upper"][2] == pytest.approx(stats.beta.ppf(0.95, 1, 41), rel=1e-3)


def test_no_evidence_leaves_the_prior():
    post = reliability.reliability_posterior(np.zeros(500, int), np.zeros(500), 1, prior=(2, 5))
    assert post["p_below"][0] == pytest.approx(stats.beta.cdf(0.5, 2, 5), abs=1e-5)


def test_fewest_ratings_to_flag():
    assert reliability.fewest_ratings_to_flag() == 3  # 1 - 0.5**4 = 0.9375 >= 0.9; 1 - 0.5**3 < 0.9
    assert reliability.fewest_ratings_to_flag(confidence=0.95) == 4
    assert stats.beta.cdf(0.5, 1, 1 + 2) < 0.9 <= stats.beta.cdf(0.5, 1, 1 + 3)


@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=6),
    data=st.data(),
    threshold=st.floats(0.05, 0.95),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_reliability_posterior_properties(sizes, data, threshold):
    n = len(sizes)
    ann = np.repeat(np.arange(n), sizes)
    log_r = np.array(data.draw(st.lists(st.floats(-60, 60), min_size=ann.size, max_size=ann.size)))
    post = reliability.reliability_posterior(ann, log_r, n, threshold=threshold)
    p = post["p_below"].to_numpy()
    assert np.all((p >= 0) & (p <= 1))
    assert np.all((0 <= post["lower"]) & (post["lower"] <= post["mean"]))
    assert np.all((post["mean"] <= post["upper"]) & (post["upper"] <= 1))
    # never more certain than all-spam / all-truth evidence from the same number of ratings
    k = np.array(sizes)
    assert np.all(p <= stats.beta.cdf(threshold, 1, 1 + k) + 1e-6)
    assert np.all(1 - p <= stats.beta.sf(threshold, 1 + k, 1) + 1e-6)
    # more evidence of truth in one rating lowers P(reliability < threshold)
    up = log_r.copy()
    up[0] = min(up[0] + 3, 60)
    posterior = reliability.reliability_posterior(ann, up, n, threshold=threshold)
    assert posterior["p_below"][0] <= p[0] + 1e-6


def test_leave_one_out_and_rating_evidence_against_direct_computation():
    inst = np.array([0, 0, 0, 1])
    omega = np.array([0.9, 0.2, 1.0, 0.7])
    rho = np.array([3.0, 2.0, 4.0, 1.5])
    ex = np.array([1.2, 2.9, 1.1, 3.0])
    mean, prec = evidence.leave_one_out(inst, omega, rho, ex, 2.0, 0.1, 2)
    for j in range(4):
        others = (inst == inst[j]) & (np.arange(4) != j)
        w = omega[others] * rho[others]
        assert prec[j] == pytest.approx(0.1 + w.sum())
        assert mean[j] == pytest.approx((0.1 * 2.0 + (w * ex[others]).sum()) / (0.1 + w.sum()))
    level = np.array([0, 2, 0, 2])
    pi = np.array([0.2, 0.5, 0.3])
    log_r = evidence.rating_evidence(level, mean, prec, rho, THRESHOLDS, pi)
    pred = stats.norm(mean, np.sqrt(1 / prec + 1 / rho))
    p_level = pred.cdf(THRESHOLDS[level + 1]) - pred.cdf(THRESHOLDS[level])
    p_scale = pred.cdf(THRESHOLDS[-1]) - pred.cdf(THRESHOLDS[0])
    np.testing.assert_allclose(log_r, np.log(p_level / p_scale / pi[level]), rtol=1e-10)


def test_label_evidence_against_direct_computation():
    """``log r_l = log q_{-l}(level_l) - log pi_level``, with q_{-l} the product over the item's
    other ratings computed directly (not by dividing the full posterior)."""
    rng = np.random.default_rng(4)
    n, m, k = 3, 4, 3
    conf = rng.dirichlet(np.ones(k), size=(n, k))  # [n, c, x]
    rho = np.array([0.5, 0.3, 0.2])
    ann = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    inst = np.array([0, 0, 0, 1, 1, 2, 2, 3])
    level = np.array([0, 2, 1, 1, 1, 2, 0, 2])
    pi = np.bincount(level, minlength=k) / level.size

    def post(rows: np.ndarray) -> np.ndarray:
        p = rho.copy()
        for r in rows:
            p = p * conf[ann[r], :, level[r]]
        return p / p.sum()

    q = np.array([post(np.flatnonzero(inst == i)) for i in range(m)])
    log_r = evidence.ratings_label_evidence(
        ann, inst, level, q, conf, evidence.level_log_shares(np.bincount(level, minlength=k))
    )
    for j in range(level.size):
        others = np.flatnonzero((inst == inst[j]) & (np.arange(level.size) != j))
        assert log_r[j] == pytest.approx(np.log(post(others)[level[j]] / pi[level[j]]), rel=1e-10)
    assert log_r[7] == pytest.approx(np.log(rho[2] / pi[2]))  # alone on its item: the prior


def test_label_evidence_is_clipped_and_level_shares_count_an_unchosen_level_once():
    q = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    own = np.log(np.full((2, 3), 0.5))
    log_r = evidence.label_evidence(q, own, np.array([2, 0]), np.array([-60.0, -60.0, -1.0]))
    # the other ratings rule level 2 out: log 0 clipped; level 0 at share e^-60: 60 clipped
    np.testing.assert_array_equal(log_r, [-evidence.LOG_R_CLIP, evidence.LOG_R_CLIP])
    np.testing.assert_allclose(
        evidence.level_log_shares(np.array([0, 1, 3])), np.log(np.array([1, 1, 3]) / 5)
    )


@pytest.mark.parametrize("labels", ["continuous", "continuous-not-ordinal", "confusion-on-classes"])
def test_each_rating_is_judged_against_the_posterior_the_labels_come_from(labels):
    """The continuous posterior's labels: the evidence against q(z) (``ratings_evidence``,
    of the fit's own ``ordinal``); a slider's labels from the confusion model: against its
    classes' posterior."""
    if labels.startswith("continuous"):
        ordinal = labels == "continuous"
        crowd = simulate_crowd(n_items=80, n_annotators=8, random_state=3)
        m = _fit(crowd.ratings, n_restarts=1, labels="continuous", ordinal=ordinal)
        d = m.data_
        want = evidence.ratings_evidence(
            d.ann, d.inst, d.cat, d.level, m.omega_,
            m.annotators_["expertise"].to_numpy(float),
            m.categories_["difficulty"].to_numpy(float), m.items_["z_mean"].to_numpy(float),
            m.hyperparams_, ordinal,
        )  # fmt: skip
    else:
        crowd = simulate_crowd(n_items=80, n_annotators=8, scale=Scale(np.arange(101.0)),
                               random_state=3)  # fmt: skip
        m = _fit(crowd.ratings, n_restarts=1, labels="confusion")
        d, result = m.data_, m.label_result_
        assert result.classes is not None and result.fit.q.shape[1] < 101
        level = result.classes[d.level]
        want = evidence.ratings_label_evidence(
            d.ann, d.inst, level, result.fit.q, result.fit.confusion,
            evidence.level_log_shares(np.bincount(level)),
        )  # fmt: skip
    np.testing.assert_array_equal(evidence.annotator_evidence(m), want)
    assert not np.allclose(want, 0.0)


def test_favourite_answer_spammers_are_not_reliable():
    """Answering one level whatever the item matches the items of that level only; spam drawn at
    the levels' shares explains those matches as well, so none of them is ``ok``."""
    crowd = simulate_crowd(
        300, 24, 5, spammer_share=0.4, random_state=3, favourite_share=1.0, favourite_weight=0.9
    )
    m = _fit(crowd.ratings, n_restarts=2)
    flags = reliability.annotator_flags(m)
    favourite = crowd.favourite.reindex(flags.index).notna()
    assert favourite.sum() >= 8
    assert (flags.loc[favourite, "flag"] != "ok").all()
    assert (flags.loc[favourite, "flag"] == "unreliable").sum() >= favourite.sum() - 1
    assert (flags.loc[~favourite, "flag"] != "unreliable").all()


def test_bad_flag_settings_are_input_errors():
    with pytest.raises(InputError, match="threshold"):
        D.check_flag_settings(threshold=1.0)
    with pytest.raises(InputError, match="confidence"):
        D.check_flag_settings(confidence=0.5)
    with pytest.raises(InputError, match="prior"):
        reliability.reliability_posterior(np.zeros(1, int), np.zeros(1), 1, prior=(0, 1))


# --------------------------------------------------------------------------- fitted models
def _fit(ratings, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OrdinalMixture(random_state=0, **kw).fit(ratings)


@st.composite
def crowds(draw):
    n_items = draw(st.integers(2, 8))
    n_ann = draw(st.integers(1, 5))
    k = draw(st.integers(2, 5))
    n = draw(st.integers(n_items, 40))
    rows = draw(
        st.lists(
            st.tuples(st.integers(0, n_ann - 1), st.integers(0, n_items - 1), st.integers(1, k)),
            min_size=n,
            max_size=n,
        )
    )
    df = pd.DataFrame(rows, columns=["annotator", "instance", "rating"])
    return df.astype({"annotator": str, "instance": str}), k


@given(crowds(), st.booleans())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_decisions_for_any_fit(crowd, spam):
    ratings, k = crowd
    m = _fit(ratings, scale=list(range(1, k + 1)), n_restarts=1, max_iter=30, spam=spam)
    t = m.scale_.thresholds
    items = D.item_decisions(m)
    p = items.filter(like="p_level_").to_numpy()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    values = m.scale_.values
    assert np.all((values[0] <= items["lower_90"]) & (items["lower_90"] <= items["upper_90"]))
    assert np.all(items["upper_90"] <= values[-1])
    assert set(items["flag"]) <= set(D.ITEM_FLAGS)
    # every item has a label, undetermined items included: the most probable level
    np.testing.assert_array_equal(items["label"], values[p.argmax(axis=1)])
    assert np.all((values[0] <= m.estimates_) & (m.estimates_ <= values[-1]))
    del t
    np.testing.assert_allclose(
        items["truth_weight"], np.bincount(m.data_.inst, weights=m.omega_), rtol=1e-12
    )
    flags = reliability.annotator_flags(m)
    pu = flags["p_unreliable"].to_numpy()
    assert np.all((pu >= 0) & (pu <= 1))
    n = m.annotators_["n_ratings"].to_numpy()
    unrel = (flags["flag"] == "unreliable").to_numpy()
    ok = (flags["flag"] == "ok").to_numpy()
    assert np.array_equal(unrel, pu >= 0.9) and np.array_equal(ok, pu <= 0.1)
    assert np.all(stats.beta.cdf(0.5, 1, 1 + n[unrel]) >= 0.9)
    assert np.all(stats.beta.sf(0.5, 1 + n[ok], 1) >= 0.9)


@pytest.fixture(scope="module")
def trec():
    ratings = pd.read_csv(ROOT / "demo_data" / "trec-rf10-ratings.csv", dtype=str)
    # the paper's model, whose TREC fit these tests describe (many items without truth weight,
    # many annotators below 0.5 reliability); the extended default (annotator bias, learned
    # spam distribution) leaves far fewer
    m = _fit(ratings, n_restarts=2, model="paper")
    return m, m.items_.join(D.item_decisions(m)), m.annotators_.join(reliability.annotator_flags(m))


@pytest.mark.slow
def test_trec_flags_need_enough_ratings(trec):
    m, _, ann = trec
    assert set(ann["flag"]) == set(D.ANNOTATOR_FLAGS)
    n = ann["n_ratings"].to_numpy()
    unrel = (ann["flag"] == "unreliable").to_numpy()
    ok = (ann["flag"] == "ok").to_numpy()
    # every flag is reachable with that many ratings at the stated confidence
    assert np.all(stats.beta.cdf(0.5, 1, 1 + n[unrel]) >= ann["flag_confidence"][unrel])
    assert np.all(stats.beta.sf(0.5, 1 + n[ok], 1) >= 0.9)
    assert n[unrel].min() >= reliability.fewest_ratings_to_flag()
    assert np.all(ann["p_unreliable"][unrel] >= 0.9)
    # few ratings with a low point estimate: too few to judge, not unreliable
    few_low = (ann["n_ratings"] <= 3) & (ann["reliability"] < 0.5)
    assert few_low.sum() >= 3
    assert (ann.loc[few_low, "flag"] == "undetermined").all()
    # the 0.5 rule on the point estimate flags many more than the evidence does
    assert unrel.sum() < 0.5 * (ann["reliability"] < 0.5).sum()
    assert ((ann["flag"] == "undetermined") & (ann["n_ratings"] <= 5)).sum() > 100


@pytest.mark.slow
def test_trec_items_without_truth_weight_are_ties_or_uncertain(trec):
    """The paper's model puts many TREC items at its prior (no truth weight): its q(z) spreads
    over the outer levels, so their labels are ties or uncertain, never confident."""
    m, items, _ = trec
    weak = items["truth_weight"] < 0.5
    assert weak.sum() > 100
    assert items["label"].notna().all()  # a label for every item; the flag says which to trust
    assert (items.loc[weak, "flag"] != "confident").all()
    p = items.filter(like="p_level_").to_numpy()
    np.testing.assert_array_equal(items["label"], m.scale_.values[p.argmax(axis=1)])


@pytest.mark.slow
def test_trec_next_batch_and_review(trec):
    m, items, ann = trec
    batch = D.next_batch(items, 40)
    assert list(batch.columns) == [
        "rank", "instance", "query", "label", "p_wrong", "expected_gain", "n_ratings", "flag"
    ]  # fmt: skip
    assert len(batch) == 40 and batch["rank"].tolist() == list(range(1, 41))
    assert batch["expected_gain"].is_monotonic_decreasing
    assert batch["expected_gain"].iloc[-1] >= items["expected_gain"].nlargest(40).iloc[-1]
    by_p = D.next_batch(items, 40, by="p_wrong")
    assert by_p["p_wrong"].is_monotonic_decreasing
    review = D.annotators_to_review(ann)
    assert len(review) == (ann["flag"] == "unreliable").sum()
    assert (review["flag"] == "unreliable").all()
    assert review["p_unreliable"].is_monotonic_decreasing


def test_simulated_spammers_are_the_unreliable_ones():
    ratings = pd.read_csv(ROOT / "demo_data" / "simulated-ratings.csv", dtype=str)
    spam = pd.read_csv(ROOT / "demo_data" / "simulated-spammers.csv", dtype={"annotator": str})
    m = _fit(ratings, n_restarts=2)
    flags = reliability.annotator_flags(m).join(spam.set_index("annotator")["spammer"])
    flags["reliability"] = m.annotators_["reliability"]
    spammer = flags["spammer"] == 1
    assert (flags.loc[spammer, "flag"] == "unreliable").all()
    # a careful annotator of this crowd gives its item's level on 37% to 97% of its ratings
    # (the rest near it): none is unreliable, and each is more reliable than every spammer
    assert (flags.loc[~spammer, "flag"] != "unreliable").all()
    assert (flags.loc[~spammer, "flag"] == "ok").mean() > 0.5
    assert flags.loc[~spammer, "reliability"].min() > flags.loc[spammer, "reliability"].max()


@pytest.mark.parametrize("has_levels", [False, True])
def test_annotator_flags_need_per_rating_results(has_levels):
    """A Dask fit keeps the label fit's q and the continuous fit's omega on its workers: its
    flags at other settings are an input error, whatever else it holds."""

    class Data:
        level = np.zeros(3, dtype=int)

    class Fake:
        omega_ = None
        data_ = Data() if has_levels else None
        label_result_ = type("Result", (), {"fit": type("Fit", (), {"q": None})()})()

    message = (
        "annotator flags need the fit's per-rating results \\(omega_\\), which the Dask engine "
        "keeps on its workers; fit with the in-memory engine"
    )
    with pytest.raises(InputError, match=message):
        reliability.annotator_flags(Fake())


def test_next_batch_input_errors():
    items = pd.DataFrame({"label": [1.0], "p_wrong": [0.1]}, index=pd.Index(["a"], name="instance"))
    with pytest.raises(InputError, match="expected_gain"):
        D.next_batch(items, 5)
    with pytest.raises(InputError, match="batch size"):
        D.next_batch(items, 0)
    with pytest.raises(InputError, match="rank the batch"):
        D.next_batch(items, 5, by="gain")


@pytest.mark.parametrize("ordinal", [True, False])
def test_flags_in_chunks_of_ratings_equal_flags_in_one_pass(monkeypatch, ordinal):
    """Big fits go a chunk of ratings at a time (memory); the result must not depend on it."""
    crowd = simulate_crowd(n_items=150, n_annotators=12, random_state=2)
    m = _fit(crowd.ratings, n_restarts=1, ordinal=ordinal)
    whole_r, whole = evidence.annotator_evidence(m), reliability.annotator_flags(m)
    monkeypatch.setattr(evidence, "CHUNK", 97)  # 750 ratings: 8 chunks, the last one short
    chunked_r, chunked = evidence.annotator_evidence(m), reliability.annotator_flags(m)
    np.testing.assert_allclose(chunked_r, whole_r, rtol=1e-12, atol=1e-12)
    pd.testing.assert_frame_equal(chunked, whole, rtol=1e-9)


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_item_decisions_a_chunk_at_a_time_are_the_whole(chunk) -> None:
    """``iter_item_decisions`` gives ``item_columns`` of all the items at once, exactly
    (every column is elementwise), in chunks of ``chunk`` rows in order."""
    crowd = simulate_crowd(n_items=50, n_annotators=6, ratings_per_item=3, random_state=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = OrdinalMixture("query", n_restarts=1, random_state=0).fit(crowd.ratings)
    d = m.data_
    whole = D.item_columns(
        m.label_result_.posterior,
        m.items_.index,
        m.label_result_.policy,
        np.bincount(d.inst, weights=m.omega_, minlength=d.n_instances),
    )
    parts = list(D.iter_item_decisions(m, chunk=chunk))
    assert [len(p) for p in parts[:-1]] == [chunk] * (len(parts) - 1)
    pd.testing.assert_frame_equal(pd.concat(parts), whole, check_exact=True)
    pd.testing.assert_frame_equal(D.item_decisions(m), whole, check_exact=True)


def test_level_probabilities_of_a_known_value_are_its_level():
    """sd 0 (a gold item): all the probability on the level holding the value, no warning."""
    t = np.array([0.5, 1.5, 2.5, 3.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = D.level_probabilities(np.array([1.0, 2.5, 3.2]), np.zeros(3), t)
        gain = D.expected_gain(np.array([1.0]), np.zeros(1), t, np.array([1.0]), 0.9)
    np.testing.assert_array_equal(p, [[1, 0, 0], [0, 0, 1], [0, 0, 1]])
    assert gain[0] == 0.0


def test_disputed_gold_items_are_more_than_a_level_from_their_gold():
    items = pd.DataFrame(
        {"estimate": [3.0, 3.0, 1.0, 2.4], "crowd_estimate": [1.9, 2.1, np.nan, np.nan]},
        index=pd.Index(["a", "b", "c", "d"], name="instance"),
    )
    got = D.disputed_gold(items, 1.0)
    assert got.to_dict() == {"a": True, "b": False, "c": False, "d": False}
    assert not D.disputed_gold(items.drop(columns="crowd_estimate"), 1.0).any()
