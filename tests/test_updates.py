import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import digamma, gammaln

from ordmix_core.updates import (
    gamma_prior_mle,
    inverse_digamma,
    omega_from_logit,
    update_eps,
    update_gamma_factor,
    update_z,
)


def _objective(alpha, beta, e_t, e_logt):
    return np.sum(alpha * np.log(beta) - gammaln(alpha) + (alpha - 1) * e_logt - beta * e_t)


def test_gamma_prior_mle_is_the_maximiser():
    rng = np.random.default_rng(0)
    shape = rng.uniform(2, 50, 30)
    rate = rng.uniform(1, 20, 30)
    e_t, e_logt = shape / rate, digamma(shape) - np.log(rate)
    a, b = gamma_prior_mle(e_t, e_logt)
    res = minimize(lambda x: -_objective(np.exp(x[0]), np.exp(x[1]), e_t, e_logt), [0.0, 0.0])
    assert _objective(a, b, e_t, e_logt) >= -res.fun - 1e-8
    assert a == pytest.approx(np.exp(res.x[0]), rel=1e-4)


def test_gamma_prior_rate_floor_is_respected_and_alpha_optimal_given_it():
    e_t = np.array([1e6, 2e6, 5e5])
    e_logt = np.log(e_t) - 0.01
    a, b = gamma_prior_mle(e_t, e_logt, min_rate=1.0)
    assert b == 1.0
    grid = np.linspace(0.5 * a, 1.5 * a, 201)
    vals = [_objective(x, b, e_t, e_logt) for x in grid]
    assert _objective(a, b, e_t, e_logt) >= max(vals) - 1e-6


def test_inverse_digamma():
    for y in (-10.0, -1.0, 0.0, 3.0, 12.0):
        assert digamma(inverse_digamma(y)) == pytest.approx(y, abs=1e-10)


def test_omega_complements_are_exact_in_the_tails():
    om, one_m = omega_from_logit(np.array([-800.0, 0.0, 800.0]))
    assert om[0] == 0.0 and one_m[0] == 1.0
    assert om[1] == one_m[1] == 0.5
    assert one_m[2] == 0.0


def test_update_z_is_precision_weighted():
    inst = np.array([0, 0, 1])
    w = np.array([1.0, 3.0, 2.0])
    ex = np.array([1.0, 3.0, 2.0])
    mu_m, lam_m = update_z(inst, w, ex, mu=0.0, lam=1.0, n_instances=3)
    assert lam_m.tolist() == [5.0, 3.0, 1.0]
    assert mu_m[0] == pytest.approx((1 * 1 + 3 * 3) / 5)
    assert mu_m[2] == 0.0  # an instance without ratings stays at the prior


def test_gamma_factor_and_eps():
    group = np.array([0, 0, 1])
    omega = np.array([1.0, 0.5, 0.25])
    shape, rate = update_gamma_factor(group, omega, np.ones(3), np.array([2.0, 4.0, 8.0]), 1, 2, 2)
    assert shape.tolist() == [1.75, 1.125]
    assert rate.tolist() == [2 + 0.5 * (2 + 2), 2 + 0.5 * 2]
    eps = update_eps(group, omega, np.array([2, 1]))
    assert eps.tolist() == [0.75, 0.25]
