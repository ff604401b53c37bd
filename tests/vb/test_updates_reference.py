"""updates.py against references that share none of its code: model-notes' q(y) update with
mpmath's truncated normal, shapes for groups without ratings, the eps floor, and the Gamma
prior's type-II ML and inverse digamma against mpmath roots to 1e-10 over their whole range.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import digamma

from ordmix_core.vb.updates import (
    EPS_FLOOR,
    gamma_prior_mle,
    inverse_digamma,
    omega_logit,
    update_eps,
    update_gamma_factor,
)

_LOG_2PI = np.log(2 * np.pi)


def _mp_tn(lo: float, hi: float, mean: float, prec: float) -> tuple[float, ...]:
    """E[x], Var[x], H, log Z of N(mean, 1/prec) on [lo, hi), at 50 digits (mpmath)."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(50):
        sd = 1 / mp.sqrt(prec)
        a, b = (lo - mp.mpf(mean)) / sd, (hi - mp.mpf(mean)) / sd
        z = mp.ncdf(b) - mp.ncdf(a) if a + b <= 0 else mp.ncdf(-a) - mp.ncdf(-b)
        pa, pb = mp.npdf(a) / z, mp.npdf(b) / z
        m, e2 = pa - pb, 1 + a * pa - b * pb
        h = mp.log(sd * mp.sqrt(2 * mp.pi) * z) + e2 / 2
        return float(mean + m * sd), float((e2 - m * m) * sd * sd), float(h), float(mp.log(z))


def _case(seed: int = 0, n: int = 12):
    """Per-rating inputs of q(y): eps, pi, q(tau), q(delta) moments, q(z), the interval."""
    rng = np.random.default_rng(seed)
    eps = rng.uniform(0.05, 0.95, n)
    log_pi = np.log(rng.uniform(0.05, 0.6, n))
    tau_a, tau_b = rng.uniform(1, 30, n), rng.uniform(0.5, 10, n)
    del_a, del_b = rng.uniform(1, 30, n), rng.uniform(0.5, 10, n)
    mu_m, lam_m = rng.uniform(0, 5, n), rng.uniform(0.1, 20, n)
    lo = rng.integers(0, 5, n) + 0.5
    e_tau, e_logtau = tau_a / tau_b, digamma(tau_a) - np.log(tau_b)
    e_del, e_logdel = del_a / del_b, digamma(del_a) - np.log(del_b)
    rho = e_tau * e_del
    rows = [_mp_tn(*v) for v in zip(lo, lo + 1, mu_m, rho, strict=True)]
    ex, var, entropy, log_z = np.array(rows).T
    s_l = (ex - mu_m) ** 2 + var + 1 / lam_m  # S_l = E[(x - z)^2]
    return dict(eps=eps, log_pi=log_pi, e_logtau=e_logtau, e_logdel=e_logdel, rho=rho,
                lam_m=lam_m, s_l=s_l, entropy=entropy, log_z=log_z)  # fmt: skip


def test_exact_omega_logit_is_model_notes_formula_and_the_default() -> None:
    """logit(omega) = log eps - log(1 - eps) - log pi + log Z
    + 0.5 (E log tau + E log delta - log rho) - 0.5 rho / lambda_m   (docs/model.md)."""
    c = _case()
    want = (np.log(c["eps"]) - np.log1p(-c["eps"]) - c["log_pi"] + c["log_z"]
            + 0.5 * (c["e_logtau"] + c["e_logdel"] - np.log(c["rho"]))
            - 0.5 * c["rho"] / c["lam_m"])  # fmt: skip
    args = (np.log(c["eps"]), np.log1p(-c["eps"]), c["log_pi"], c["e_logtau"], c["e_logdel"],
            c["rho"], c["s_l"], c["entropy"])  # fmt: skip
    np.testing.assert_allclose(omega_logit(*args), want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(omega_logit(*args, exact=True), want, rtol=1e-9, atol=1e-9)


def test_paper_omega_logit_is_eq_4() -> None:
    """Eq. (4): E[tau]E[delta] plugged into the Gaussian, no entropy of q(x):
    log eps - log(1 - eps) - log pi + log N-density with precision rho at squared distance S."""
    c = _case(1)
    want = (np.log(c["eps"]) - np.log1p(-c["eps"]) - c["log_pi"]
            + 0.5 * np.log(c["rho"]) - 0.5 * _LOG_2PI - 0.5 * c["rho"] * c["s_l"])  # fmt: skip
    got = omega_logit(np.log(c["eps"]), np.log1p(-c["eps"]), c["log_pi"], c["e_logtau"],
                      c["e_logdel"], c["rho"], c["s_l"], c["entropy"], exact=False)  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_real_valued_omega_logit_has_no_entropy() -> None:
    """x observed: E[log N(v | z, 1/(tau delta))] with E log tau + E log delta, S = (v-mu)^2
    + 1/lambda."""
    c = _case(2)
    want = (np.log(c["eps"]) - np.log1p(-c["eps"]) - c["log_pi"] - 0.5 * _LOG_2PI
            + 0.5 * (c["e_logtau"] + c["e_logdel"]) - 0.5 * c["rho"] * c["s_l"])  # fmt: skip
    got = omega_logit(np.log(c["eps"]), np.log1p(-c["eps"]), c["log_pi"], c["e_logtau"],
                      c["e_logdel"], c["rho"], c["s_l"], None)  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_groups_without_ratings_get_the_prior_and_the_right_shape() -> None:
    group = np.array([0, 0, 1])
    omega = np.array([1.0, 0.5, 0.25])
    shape, rate = update_gamma_factor(group, omega, np.ones(3), np.ones(3), 2.0, 3.0, size=4)
    assert shape.tolist() == [2.75, 2.125, 2.0, 2.0]
    assert rate.tolist() == [3.75, 3.125, 3.0, 3.0]
    eps = update_eps(group, omega, np.array([2, 1, 0, 0]))
    assert eps.shape == (4,) and eps[:2].tolist() == [0.75, 0.25]
    assert np.all(eps[2:] == EPS_FLOOR)


def test_eps_is_kept_inside_the_open_interval() -> None:
    """Every omega 0 (or 1) would make log eps (or log(1 - eps)) infinite: the floor holds."""
    ann = np.array([0, 0, 1, 1])
    eps = update_eps(ann, np.array([0.0, 0.0, 1.0, 1.0]), np.array([2, 2]))
    assert eps.tolist() == [EPS_FLOOR, 1.0 - EPS_FLOOR]
    assert np.all(np.isfinite(np.log(eps))) and np.all(np.isfinite(np.log1p(-eps)))


def _mp_alpha(s: float) -> float:
    """The root of log a - digamma(a) = s, to 40 digits."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(40):
        f = lambda a: mp.log(a) - mp.digamma(a) - s  # noqa: E731
        lo, hi = mp.mpf("1e-12"), mp.mpf("1e12")
        while hi / lo > 1 + mp.mpf("1e-30"):  # log a - digamma(a) falls from inf to 0
            mid = mp.sqrt(lo * hi)
            lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
        return float(mp.sqrt(lo * hi))


@pytest.mark.parametrize("s", [1.5e-8, 5e-8, 1e-6, 1e-4, 0.01, 0.1, 0.5, 1.0, 3.0, 10.0, 40.0])
def test_gamma_prior_mle_solves_its_equation_everywhere(s) -> None:
    """alpha: log alpha - digamma(alpha) = log mean(E t) - mean(E log t); beta = alpha / mean.
    Inputs built with that s exactly (two annotators); alpha to 1e-10 of the mpmath root."""
    mean_t = 2.0
    e_t = np.array([mean_t, mean_t])
    e_logt = np.full(2, np.log(mean_t) - s)
    alpha, beta = gamma_prior_mle(e_t, e_logt)
    want = _mp_alpha(s)
    # log alpha - digamma(alpha) is a difference of two ~log(alpha) numbers: absolute error
    # ~eps log(alpha) in s, relative error that over s in alpha (alpha ~ 1 / 2s for small s)
    assert alpha == pytest.approx(want, rel=1e-10 + 4e-15 * max(1.0, np.log(want)) / s, abs=0)
    assert beta == pytest.approx(alpha / mean_t, rel=1e-15, abs=0)


def test_gamma_prior_mle_degenerate_and_floored() -> None:
    # every annotator the same point mass: s = 0, the prior is a spike at the mean
    alpha, beta = gamma_prior_mle(np.full(3, 2.0), np.full(3, np.log(2.0)))
    assert alpha == 1e8 and beta == 1e8 / 2.0
    # beta below the floor: beta = floor, alpha solves digamma(alpha) = log beta + mean E log t
    e_t, e_logt = np.array([100.0, 300.0]), np.array([4.0, 5.0])
    alpha, beta = gamma_prior_mle(e_t, e_logt, min_rate=1.0)
    assert beta == 1.0
    assert digamma(alpha) == pytest.approx(np.log(beta) + e_logt.mean(), abs=1e-12)


@pytest.mark.parametrize("y", [-60.0, -10.0, -3.0, -2.3, -2.2, -1.0, 0.0, 0.5, 3.0, 12.0, 30.0])
def test_inverse_digamma_to_the_last_digits(y) -> None:
    mp = pytest.importorskip("mpmath")
    with mp.workdps(40):
        want = float(mp.findroot(lambda x: mp.digamma(x) - y, mp.exp(y) + 0.5 if y > -2 else
                                 -1 / (y + mp.euler)))  # fmt: skip
    assert inverse_digamma(y) == pytest.approx(want, rel=1e-13, abs=0)


# --- the extensions (annotator bias, learned spam distributions) and the array helpers, each
# against a computation that shares no code with updates.py (a mutation run showed the
# fused-vs-numpy comparison cannot see these: both sweeps call the same function)


@pytest.mark.parametrize("y", [-60.0, -20.0, -2.3, -2.22, -2.2, -0.5, 0.0, 1.0, 5.0, 30.0])
def test_inverse_digamma_array_to_the_last_digits(y) -> None:
    mp = pytest.importorskip("mpmath")
    from ordmix_core.vb.updates import inverse_digamma_array

    with mp.workdps(40):
        want = float(mp.findroot(lambda x: mp.digamma(x) - y, inverse_digamma(y)))
    got = inverse_digamma_array(np.array([y, y]))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, [want, want], rtol=1e-13, atol=0)
    # integers are numbers too: the same root as the float
    assert inverse_digamma_array(np.array([int(y)]))[0] == pytest.approx(
        inverse_digamma(float(int(y))), rel=1e-13, abs=0
    )


def test_expected_sq_is_the_second_moment_of_the_difference() -> None:
    """E[(x - z)^2] for independent x (mean ex, variance var) and z ~ N(mu, 1/lam), by
    Monte Carlo with a normal x (the formula needs only the first two moments)."""
    from ordmix_core.vb.updates import expected_sq

    ex, var, mu, lam = (
        np.array([1.0, -2.0]),
        np.array([0.25, 4.0]),
        np.array([0.5, 1.0]),
        np.array([2.0, 0.5]),
    )
    rng = np.random.default_rng(0)
    n = 400_000
    x = ex + np.sqrt(var) * rng.standard_normal((n, 2))
    z = mu + rng.standard_normal((n, 2)) / np.sqrt(lam)
    mc = ((x - z) ** 2).mean(axis=0)
    se = ((x - z) ** 2).std(axis=0) / np.sqrt(n)
    got = expected_sq(ex, var, mu, lam)
    assert np.all(np.abs(got - mc) < 5 * se)
    np.testing.assert_allclose(got, [0.25 + 0.25 + 0.5, 9.0 + 4.0 + 2.0], rtol=1e-15)


def test_bias_update_is_the_gaussian_posterior_and_its_prior_the_ml_precision() -> None:
    """q(b_n) is the posterior of a mean under prior N(0, 1/lam_b) and weights w with weighted
    residuals d: precision lam_b + sum w, mean sum wd / precision; the prior's precision
    maximises sum_n E_q[log N(b_n | 0, 1/lam_b)] (scipy's optimiser on that sum)."""
    from scipy.optimize import minimize_scalar

    from ordmix_core.vb.updates import bias_prior_mle, update_bias

    mean, prec = update_bias(np.array([3.0, 0.0, 1.0]), np.array([1.5, 0.0, -2.0]), 2.0)
    np.testing.assert_allclose(prec, [5.0, 2.0, 3.0], rtol=1e-15)
    np.testing.assert_allclose(mean, [0.3, 0.0, -2.0 / 3.0], rtol=1e-15)
    m, p = np.array([0.4, -1.0, 0.1]), np.array([5.0, 2.0, 40.0])

    def neg(log_lam: float) -> float:
        lam = np.exp(log_lam)
        return -np.sum(0.5 * np.log(lam) - 0.5 * lam * (m**2 + 1.0 / p))

    best = np.exp(minimize_scalar(neg, bounds=(-10, 10), method="bounded",
                                  options={"xatol": 1e-12}).x)  # fmt: skip
    assert bias_prior_mle(m, p) == pytest.approx(best, rel=1e-6)
    assert bias_prior_mle(m, p) == pytest.approx(
        3 / (0.16 + 0.2 + 1.0 + 0.5 + 0.01 + 0.025), rel=1e-15
    )


def test_global_spam_distribution_is_normalised_and_floored() -> None:
    from ordmix_core.vb.updates import PI_FLOOR, update_global_pi

    out = update_global_pi(np.array([300.0, 0.0, 500.0, 200.0]))
    assert abs(out.sum() - 1.0) < 1e-15  # normalised after the floor
    assert out[1] == pytest.approx(PI_FLOOR, rel=1e-9, abs=0)  # an unused level keeps the floor
    np.testing.assert_allclose(out[[0, 2, 3]], [0.3, 0.5, 0.2], rtol=1e-11)
    tiny = update_global_pi(np.array([1e-13, 1.0]))
    assert tiny[0] == pytest.approx(PI_FLOOR, rel=1e-9, abs=0) and abs(tiny.sum() - 1.0) < 1e-15


def test_dirichlet_pi_solves_its_stationarity_conditions() -> None:
    """_dirichlet_pi's maximiser: digamma(kappa pi_k) - m_k is the same for every k and
    sum pi = 1 (scipy's digamma; together they fix pi); the floor keeps a level that no
    spammer uses at PI_FLOOR."""
    from ordmix_core.vb.updates import PI_FLOOR, _dirichlet_pi

    for meanlog, kappa in (([-1.2, -0.4, -2.5, -0.9], 10.0), ([-5.0, -0.01, -0.3], 0.7),
                           ([-0.2, -0.2], 300.0)):  # fmt: skip
        m = np.array(meanlog)
        pi = _dirichlet_pi(m, kappa)
        assert abs(pi.sum() - 1.0) < 1e-14
        c = digamma(kappa * pi) - m
        assert np.ptp(c) < 1e-9 * max(1.0, np.abs(c).max()), (meanlog, kappa)
    floored = _dirichlet_pi(np.array([-0.001, -1e13]), 1000.0)
    assert floored[1] == pytest.approx(PI_FLOOR, rel=1e-6, abs=0) and abs(floored.sum() - 1) < 1e-15


def _kappa_grad(k, n, pi, sum_el):
    """d/d log kappa of n [lgamma(k) - sum lgamma(k pi)] + k sum pi sum_el, over k."""
    return n * (digamma(k) - np.sum(pi * digamma(k * pi))) + np.sum(pi * sum_el)


def test_dirichlet_kappa_is_the_root_of_its_gradient_or_the_end_of_its_range() -> None:
    from ordmix_core.vb.updates import KAPPA_RANGE, _dirichlet_kappa

    pi = np.array([0.5, 0.3, 0.2])
    sum_el = np.array([-20.0, -26.0, -35.0])
    k = _dirichlet_kappa(sum_el, 10, pi)
    assert KAPPA_RANGE[0] < k < KAPPA_RANGE[1]
    assert abs(_kappa_grad(k, 10, pi, sum_el)) < 1e-9  # the gradient's root (it is decreasing)
    assert _kappa_grad(k * 0.99, 10, pi, sum_el) > 0 > _kappa_grad(k * 1.01, 10, pi, sum_el)
    # beyond the range's ends: the end (the gradient keeps its sign there)
    assert _dirichlet_kappa(10 * np.log(pi) + 1e-3, 10, pi) == KAPPA_RANGE[1]
    assert _dirichlet_kappa(np.full(3, -1e9), 10, pi) == KAPPA_RANGE[0]
    # just inside the lower end (gradient 0.5 there): the root, a little above 1e-3
    lo = KAPPA_RANGE[0]
    s = 0.5 - 10 * (digamma(lo) - np.sum(pi * digamma(lo * pi)))
    k = _dirichlet_kappa(np.full(3, s), 10, pi)
    assert k > lo and abs(_kappa_grad(k, 10, pi, np.full(3, s))) < 1e-6


def test_gold_items_have_no_posterior_variance_and_spam_tables_are_e_log_pi() -> None:
    """inv_lam_z: 1/lambda, 0 for a gold item (z observed); spam_log_table: E[log pi_nk] of
    each model (a Dirichlet's against quadrature of its Beta marginal, scipy)."""
    from scipy import integrate, stats

    from ordmix_core.vb.updates import inv_lam_z, spam_log_table

    lam = np.array([2.0, 4.0, 8.0])
    np.testing.assert_array_equal(inv_lam_z(lam, None), [0.5, 0.25, 0.125])
    np.testing.assert_array_equal(inv_lam_z(lam, np.array([True, False, True])), [0, 0.25, 0])
    log_pi = [-1, -2]  # integers are numbers too
    uniform = spam_log_table("uniform", log_pi, None, None)
    assert uniform.dtype == np.float64 and uniform.tolist() == [[-1.0, -2.0]]
    pi = np.array([0.25, 0.75])
    np.testing.assert_array_equal(spam_log_table("global", log_pi, pi, None), [np.log(pi)])
    dir_a = np.array([[1.0, 3.0, 0.5], [6.0, 2.0, 2.0]])
    table = spam_log_table("annotator", log_pi, None, dir_a)
    for n, row in enumerate(dir_a):
        for k, a in enumerate(row):
            beta = stats.beta(a, row.sum() - a)
            want = integrate.quad(lambda x, b=beta: np.log(x) * b.pdf(x), 0, 1, limit=200)[0]
            assert table[n, k] == pytest.approx(want, rel=1e-7), (n, k)
