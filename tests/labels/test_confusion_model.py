"""The ordinal confusion model: its array functions against direct computations, and its labels
on crowds whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from ordmix_core.labels import confusion_model as lm


def test_design_builds_adjacent_category_logits():
    d = lm.design(3)
    a = np.array([0.5, 1.5, -0.25, 2.0])  # (s=1, c<1), (s=1, c>=1), (s=2, c<2), (s=2, c>=2)
    logits = np.einsum("ckj,j->ck", d, a)
    expected = np.array(
        [
            [0.0, 0.5, 0.5 - 0.25],  # truth 0: below both thresholds
            [0.0, 1.5, 1.5 - 0.25],  # truth 1: at/above threshold 1, below 2
            [0.0, 1.5, 1.5 + 2.0],  # truth 2: at/above both
        ]
    )
    np.testing.assert_allclose(logits, expected)


def test_confusion_rows_are_distributions():
    rng = np.random.default_rng(0)
    p = lm.confusion(rng.normal(size=(7, 8)), lm.design(5))
    assert p.shape == (7, 5, 5)
    np.testing.assert_allclose(p.sum(axis=2), 1.0)
    assert (p > 0).all()


def _crowd(rng, n_ann=30, n_items=200, k=4, per_item=5, noise=0.15):
    truth = rng.integers(0, k, n_items)
    ann = np.concatenate([rng.choice(n_ann, per_item, replace=False) for _ in range(n_items)])
    inst = np.repeat(np.arange(n_items), per_item)
    step = rng.choice([-1, 1], size=ann.size)
    wrong = rng.random(ann.size) < noise
    rating = np.clip(truth[inst] + wrong * step, 0, k - 1)
    return ann, inst, rating, truth


def test_soft_tables_match_a_loop():
    rng = np.random.default_rng(1)
    ann, inst, rating, _ = _crowd(rng, n_ann=6, n_items=20, k=3, per_item=3)
    q = rng.dirichlet(np.ones(3), size=20)
    t = lm.soft_tables(q, ann, inst, rating, 6)
    loop = np.zeros((6, 3, 3))
    for n, m, r in zip(ann, inst, rating, strict=True):
        loop[n, :, r] += q[m]
    np.testing.assert_allclose(t, loop)


def test_item_log_lik_matches_a_loop():
    rng = np.random.default_rng(2)
    ann, inst, rating, _ = _crowd(rng, n_ann=5, n_items=12, k=3, per_item=3)
    logp = np.log(lm.confusion(rng.normal(size=(5, 4)), lm.design(3)))
    ll = lm.item_log_lik(logp, ann, inst, rating, 12)
    loop = np.zeros((12, 3))
    for n, m, r in zip(ann, inst, rating, strict=True):
        loop[m] += logp[n, :, r]
    np.testing.assert_allclose(ll, loop)


def test_careless_split_is_each_cells_careless_part():
    """A cell of the soft table splits as its chance does: ``gamma / K`` careless against
    ``(1 - gamma) p`` from the adjacent categories; the new share is the careless total over
    the table's, with ``CARELESS_PRIOR`` ratings more at the crowd's pooled share (all of it
    for an annotator without ratings)."""
    rng = np.random.default_rng(5)
    p = lm.confusion(rng.normal(size=(3, 4)), lm.design(3))
    t = rng.uniform(0, 4, size=(3, 3, 3))
    t[2] = 0.0
    gamma = np.array([0.1, 0.6, 0.3])
    kept, share = lm.careless_split(t, p, gamma)
    careless = np.zeros(3)
    for n in range(3):
        mixed = (1 - gamma[n]) * p[n] + gamma[n] / 3
        part = t[n] * (gamma[n] / 3) / mixed
        careless[n] = part.sum()
        np.testing.assert_allclose(kept[n], t[n] - part, rtol=1e-12, atol=1e-15)
    pooled = careless.sum() / t.sum()
    prior = lm.CARELESS_PRIOR
    want = (careless + prior * pooled) / (t.sum(axis=(1, 2)) + prior)
    np.testing.assert_allclose(share, want, rtol=1e-12)
    assert share[2] == pytest.approx(pooled, rel=1e-12) and not kept[2].any()
    np.testing.assert_allclose(lm.with_careless(p, gamma).sum(axis=2), 1.0)
    np.testing.assert_allclose(lm.with_careless(p, gamma)[1], 0.4 * p[1] + 0.2, rtol=1e-12)


def test_a_crowd_that_answers_at_random_a_share_of_the_time_is_learned_careless():
    """Every annotator right 80% of the time and otherwise at any other level of five: the
    careless share that says so is 0.2 / (1 - 1/5) = 0.25 (a random answer hits the truth a
    fifth of the time), and the labels keep the truth; never at random, no share. Twenty
    careful annotators and one random 60% of the time: the careful ones stay near 0 and the
    labels keep the truth (the one's random answers go to a flat confusion or to its careless
    share)."""
    rng = np.random.default_rng(6)
    ann, inst, rating, truth = _crowd(rng, n_ann=21, n_items=400, k=5, per_item=6, noise=0.0)
    careless = rng.random(ann.size) < 0.25
    noisy = np.where(careless, rng.integers(0, 5, ann.size), rating)
    fit = lm.fit(ann, inst, noisy, 21, 400, 5)
    assert 0.15 < np.median(fit.careless) < 0.3  # some of it goes to the confusion's spread
    assert np.mean(fit.q.argmax(axis=1) != truth) <= 0.02
    np.testing.assert_allclose(fit.confusion.sum(axis=2), 1.0)
    careful = lm.fit(ann, inst, rating, 21, 400, 5)  # the same crowd, never at random
    assert np.max(careful.careless) < 0.02
    sloppy = np.where((ann == 0) & (rng.random(ann.size) < 0.6), rng.integers(0, 5, ann.size),
                      rating)  # fmt: skip
    fit = lm.fit(ann, inst, sloppy, 21, 400, 5)
    assert np.max(fit.careless[1:]) < 0.1
    assert np.mean(fit.q.argmax(axis=1) != truth) < 0.02


def test_newton_iterations_reach_the_penalised_optimum():
    """Repeated steps converge to the optimum a general-purpose optimiser finds."""
    rng = np.random.default_rng(3)
    d = lm.design(3)
    t = rng.uniform(0, 5, size=(1, 3, 3))
    a_bar = rng.normal(size=4)
    lam = np.diag([0.5, 1.0, 2.0, 0.7])

    def neg(a):
        logp = np.log(lm.confusion(a[None], d))[0]
        dev = a - a_bar
        return -(t[0] * logp).sum() + 0.5 * dev @ lam @ dev

    a = np.zeros((1, 4))
    for _ in range(30):
        a, _ = lm.newton_step(a, t, d, a_bar, lam)
    ref = minimize(neg, np.zeros(4), method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose(a[0], ref, atol=1e-5)


def _spd(rng, n, j):
    """(n, j, j) random symmetric positive definite matrices."""
    m = rng.normal(size=(n, j, j))
    return m @ m.transpose(0, 2, 1) + 0.3 * np.eye(j)


def _projection(x0: np.ndarray, var: np.ndarray) -> np.ndarray:
    """The ordered point nearest ``x0`` (J,) in the metric of ``var``'s inverse, found by
    SLSQP (the reference ``ordered`` is compared with)."""
    s = x0.size // 2
    cons = [{"type": "ineq", "fun": (lambda x, t=t: x[2 * t + 1] - x[2 * t])} for t in range(s)]
    h = np.linalg.inv(var)

    def dist(x):
        return 0.5 * (x - x0) @ h @ (x - x0), h @ (x - x0)

    opts = {"ftol": 1e-14, "maxiter": 500}
    return minimize(dist, x0, jac=True, constraints=cons, method="SLSQP", options=opts).x


def test_ordered_is_the_best_ordered_point_in_the_newton_steps_metric():
    """``ordered``: each annotator's parameters moved to the point with every threshold's
    'at or above' parameter at least its 'below' one that is nearest in the metric of the
    inverse of ``var`` (the quadratic model of the Newton step), as a general-purpose
    constrained optimiser finds it."""
    rng = np.random.default_rng(11)
    n, s = 40, 4
    a = rng.normal(scale=2.0, size=(n, 2 * s))
    var = _spd(rng, n, 2 * s)
    out = lm.ordered(a, var)
    assert (out[:, 1::2] >= out[:, 0::2] - 1e-12).all()
    broken = (a[:, 1::2] < a[:, 0::2]).any(axis=1)
    assert broken.sum() > n // 2 and (~broken).any()
    np.testing.assert_array_equal(out[~broken], a[~broken])  # already ordered: untouched
    for i in np.flatnonzero(broken)[:12]:
        np.testing.assert_allclose(out[i], _projection(a[i], var[i]), atol=1e-6)


def test_ordered_moves_a_lone_broken_annotator():
    """One annotator broken among ordered ones is projected like any other."""
    a = np.array([[-1.0, 1.0, -0.5, 0.5], [1.0, -0.5, 0.0, 0.2], [0.0, 0.0, -2.0, 2.0]])
    var = np.broadcast_to(np.eye(4), (3, 4, 4)).copy()
    var[1, 0, 2] = var[1, 2, 0] = 0.3
    out = lm.ordered(a, var)
    np.testing.assert_array_equal(out[[0, 2]], a[[0, 2]])
    np.testing.assert_allclose(out[1], _projection(a[1], var[1]), atol=1e-8)
    assert out[1, 1] >= out[1, 0] - 1e-12 and out[1, 3] >= out[1, 2] - 1e-12


def test_ordered_keeps_a_threshold_that_the_projection_would_break():
    """A threshold ordered at the start (gap 0.1) that the projection onto the broken one
    (gap -1) would break, through the metric's correlation (``var[1, 3] = -0.6``: raising
    the first threshold's 'at or above' parameter lowers the second's), joins the active set
    and stays in it: the point is the constrained optimum with both thresholds at equality."""
    a = np.array([[1.0, 0.0, 0.0, 0.1]])
    var = np.eye(4)[None].copy()
    var[0, 1, 3] = var[0, 3, 1] = -0.6
    out = lm.ordered(a, var)[0]
    ref = _projection(a[0], var[0])
    np.testing.assert_allclose(out, ref, atol=1e-8)
    np.testing.assert_allclose([out[1] - out[0], out[3] - out[2]], [0.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("s", [2, 3, 4])
def test_ordered_meets_the_projections_optimality_conditions(s):
    """Every projected annotator (1,000 a scale, metrics near singular among them, where
    the active set changes most) is the projection's unique optimum, checked by its KKT
    conditions: ordered, ``x - a = var C' mu`` with the multipliers ``mu >= 0`` and zero
    wherever the threshold is not at equality (``C x``: the gaps)."""
    rng = np.random.default_rng(s)
    n, j = 1000, 2 * s
    a = rng.normal(scale=2.0, size=(n, j))
    m = rng.normal(size=(n, j, j))
    var = m @ m.transpose(0, 2, 1) + 0.05 * np.eye(j)
    out = lm.ordered(a, var)
    c = np.zeros((s, j))
    c[np.arange(s), 2 * np.arange(s)], c[np.arange(s), 2 * np.arange(s) + 1] = -1.0, 1.0
    for i in np.flatnonzero((a[:, 1::2] < a[:, 0::2]).any(axis=1)):
        gap = c @ out[i]
        move = np.linalg.solve(var[i], out[i] - a[i])  # = C' mu
        mu, *_ = np.linalg.lstsq(c.T, move, rcond=None)
        scale = 1.0 + np.abs(move).max()
        assert (gap >= -1e-9).all(), i
        np.testing.assert_allclose(c.T @ mu, move, atol=1e-7 * scale, err_msg=str(i))
        assert (mu >= -1e-7 * scale).all(), i
        assert (np.abs(mu * gap) <= 1e-7 * scale).all(), i


def test_ordered_falls_back_to_the_mean_where_its_metric_cannot_move():
    """An annotator whose quadratic model cannot move (a zero covariance: the projection
    stays where it is) gets, at each threshold still broken, the mean of its two
    parameters; its ordered thresholds keep theirs."""
    a = np.array([[1.0, 0.0, -0.5, 0.5, 2.0, 1.0]])
    out = lm.ordered(a, np.zeros((1, 6, 6)))
    np.testing.assert_allclose(out, [[0.5, 0.5, -0.5, 0.5, 1.5, 1.5]], rtol=0, atol=0)


def test_the_label_fits_annotators_answer_higher_for_a_higher_truth():
    """Every fitted annotator is ordered (``m_step`` applies ``ordered``), so a higher truth
    never makes a rating of at least any level less likely, careless answers aside: five
    annotators who read the scale backwards (left free, their every threshold is learned
    reversed) are not read backwards, and the crowd's labels still hold."""
    rng = np.random.default_rng(12)
    ann, inst, rating, truth = _crowd(rng)
    rating = np.where(ann < 5, 3 - rating, rating)
    fit = lm.fit(ann, inst, rating, 30, 200, 4)
    assert np.mean(fit.q.argmax(axis=1) != truth) < 0.05
    assert (fit.params[:, 1::2] >= fit.params[:, 0::2] - 1e-12).all()
    at_least = np.cumsum(fit.careful[:, :, ::-1], axis=2)[:, :, ::-1]  # P(rating >= k | truth c)
    assert (np.diff(at_least, axis=1) >= -1e-12).all()


def test_the_prior_mean_is_an_unbiased_annotator_of_the_crowds_sharpness():
    """``anchored_mean``: -kappa below the truth and +kappa at or above it at every threshold,
    kappa the mean half-difference of the annotators' parameters, never below 0."""
    a = np.array([[-1.0, 3.0, -2.0, 0.0], [0.0, 1.0, -1.0, 2.0]])  # half-differences 2, 1, 0.5, 1.5
    np.testing.assert_allclose(lm.anchored_mean(a), [-1.25, 1.25, -1.25, 1.25])
    backwards = np.array([[1.0, -1.0, 2.0, 0.0]])  # every step likelier from below the truth
    assert (lm.anchored_mean(backwards) == 0).all()


def test_prior_update_is_the_moment_match_about_the_anchored_mean():
    a = np.array([[-1.0, 3.0], [1.0, 1.0]])
    var = np.zeros((2, 2, 2))
    a_bar, lam = lm.prior_update(a, var)
    np.testing.assert_allclose(a_bar, [-1.0, 1.0])
    dev = a - a_bar  # [[0, 2], [2, 0]]
    cov = (dev[:, :, None] * dev[:, None, :]).mean(axis=0)
    np.testing.assert_allclose(lam, np.linalg.inv(cov + lm.PRIOR_RIDGE * np.eye(2)), rtol=1e-6)
    # a variance beyond 1 / MIN_PRECISION is capped, the correlation kept (compared as
    # covariances: the precision of nearly collinear parameters hides the cap behind the ridge)
    a = np.array([[10.0, 11.0], [-10.0, -7.0]])  # about a_bar = (-1, 1): (11, 10), (-9, -8)
    _, lam = lm.prior_update(a, var)
    cap = 1.0 / lm.MIN_PRECISION
    cov = np.array([[101.0, 91.0], [91.0, 82.0]])
    sd = np.sqrt(np.diag(cov))
    capped = cov / np.outer(sd, sd) * cap + lm.PRIOR_RIDGE * np.eye(2)
    np.testing.assert_allclose(np.linalg.inv(lam), capped, rtol=1e-6)


def test_the_em_starts_from_even_confusions_and_an_even_class_prior():
    """``first_parameters``: two parameters a threshold for each annotator, all at the
    prior's mean 0 (each row of the confusion even), ``CARELESS_START`` careless, an identity
    prior precision and an even class prior."""
    par = lm.first_parameters(3, 5)
    assert par.a.shape == (3, 8) and par.a_bar.shape == (8,) and par.lam.shape == (8, 8)
    assert (par.a == 0).all() and (par.a_bar == 0).all() and (par.lam == np.eye(8)).all()
    np.testing.assert_allclose(par.p, np.full((3, 5, 5), 0.2), rtol=1e-15)
    assert (par.gamma == lm.CARELESS_START).all() and (par.rho == 0.2).all()


def test_recovers_the_truth_of_a_careful_crowd():
    rng = np.random.default_rng(4)
    ann, inst, rating, truth = _crowd(rng)
    fit = lm.fit(ann, inst, rating, 30, 200, 4)
    np.testing.assert_allclose(fit.q.sum(axis=1), 1.0)
    assert fit.converged
    assert np.mean(fit.q.argmax(axis=1) != truth) < 0.03


def test_favourite_answer_spammers_do_not_take_the_majority_level():
    """Spammers who always answer the most common level do not make an honest majority of
    that level look like spam: an item rated eight times 0 and twice 1 by careful annotators
    is labelled 0."""
    rng = np.random.default_rng(5)
    k, n_items = 4, 400
    truth = rng.choice(k, n_items, p=[0.4, 0.2, 0.2, 0.2])
    honest, spammers = 40, 10
    ann, inst, rating = [], [], []
    for m in range(n_items):
        raters = rng.choice(honest, 6, replace=False)
        for n in raters:
            wrong = rng.random() < 0.15
            r = truth[m] + (rng.choice([-1, 1]) if wrong else 0)
            ann.append(n), inst.append(m), rating.append(int(np.clip(r, 0, k - 1)))
        for n in rng.choice(spammers, 3, replace=False):
            ann.append(honest + n), inst.append(m), rating.append(0)
    # the probe item: eight 0s and two 1s from careful annotators, no spammer
    probe = n_items
    for i, r in enumerate([0] * 8 + [1] * 2):
        ann.append(i), inst.append(probe), rating.append(r)
    ann, inst, rating = map(np.asarray, (ann, inst, rating))
    fit = lm.fit(ann, inst, rating, honest + spammers, n_items + 1, k)
    p = fit.q
    assert p[probe].argmax() == 0
    assert np.mean(p[:n_items].argmax(axis=1) != truth) < 0.1
    # the spammers' confusion rows all point at level 0, whatever the truth
    assert (fit.confusion[honest:, :, 0] > 0.8).all()


def _expert_prior(careful, rho):
    k = rho.size
    return 0.8 * np.eye(k) + 0.2 / k


def test_gold_is_the_experts_ratings_with_a_confusion_of_their_own():
    """Gold items are rated by one more annotator, the expert: their confusion is learned from
    the gold items (from a prior worth ``EXPERT_PRIOR_ITEMS`` items a level), the crowd's
    confusions and every item's posterior with the expert's ratings among the others; no
    numpy warning."""
    rng = np.random.default_rng(6)
    ann, inst, rating, truth = _crowd(rng, noise=0.35)
    gold = np.full(200, -1)
    gold[:40] = truth[:40]
    with np.errstate(divide="raise", invalid="raise", over="raise"):
        fit = lm.fit(ann, inst, rating, 30, 200, 4, gold=gold, expert_prior=_expert_prior)
    assert fit.confusion.shape == (30, 4, 4) and fit.expert.shape == (4, 4)
    # the expert's confusion: the gold items' soft table plus the prior, rows normalised
    prior = lm.EXPERT_PRIOR_ITEMS * _expert_prior(None, fit.rho)
    table = fit.q[:40].T @ np.eye(4)[truth[:40]] + prior
    np.testing.assert_allclose(fit.expert, table / table.sum(axis=1, keepdims=True), atol=2e-3)
    assert np.diag(fit.expert).min() > 0.8  # this expert is the truth
    # the same fit with the expert's ratings given as an annotator's: the same posterior
    a2, i2, r2 = lm.with_expert(ann, inst, rating, gold, 30)
    assert a2.size == ann.size + 40 and (a2[-40:] == 30).all() and (r2[-40:] == truth[:40]).all()
    np.testing.assert_array_equal(i2[-40:], np.arange(40))
    plain = lm.fit(ann, inst, rating, 30, 200, 4)
    assert plain.expert is None
    wrong = [np.mean(f.q[40:].argmax(1) != truth[40:]) for f in (fit, plain)]
    assert wrong[0] <= wrong[1]


def test_own_posterior_is_the_crowds_reading_of_an_item():
    rng = np.random.default_rng(7)
    ann, inst, rating, _ = _crowd(rng)
    fit = lm.fit(ann, inst, rating, 30, 200, 4)
    own = lm.own_posterior(fit, ann, inst, rating, np.array([3, 17]))
    ll = lm.item_log_lik(np.log(fit.confusion), ann, inst, rating, 200)
    want, _ = lm.posterior(ll, fit.rho)
    np.testing.assert_allclose(own, want[[3, 17]], rtol=1e-10)


def test_gold_levels_are_the_nearest_level_or_none():
    got = lm.gold_levels(np.array([1.0, np.nan, 2.6, 9.0]), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(got, [0, -1, 2, 2])


def test_fit_counts_its_rounds_and_reports_the_ratings_evidence():
    rng = np.random.default_rng(8)
    ann, inst, rating, truth = _crowd(rng, noise=0.35)
    one = lm.fit(ann, inst, rating, 30, 200, 4, max_iter=1)
    assert one.n_iter == 1 and not one.converged
    fit = lm.fit(ann, inst, rating, 30, 200, 4)
    assert fit.converged and 1 < fit.n_iter < lm.MAX_ITER
    assert fit.rho.sum() == pytest.approx(1.0, abs=1e-12)
    # the evidence: the ratings' log likelihood under the fitted confusions and class prior,
    # item by item, summed over the latent level
    want = 0.0
    for m in range(200):
        mine = inst == m
        like = fit.rho.copy()
        for a, r in zip(ann[mine], rating[mine], strict=True):
            like = like * fit.confusion[a, :, r]
        want += np.log(like.sum())
    assert fit.evidence == pytest.approx(want, rel=1e-10)
    # gold at the lowest level alone is gold all the same: the expert is learned
    gold = np.full(200, -1)
    gold[np.flatnonzero(truth == 0)[:10]] = 0
    assert (
        lm.fit(ann, inst, rating, 30, 200, 4, gold=gold, expert_prior=_expert_prior).expert
        is not None
    )
