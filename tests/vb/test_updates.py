import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import digamma, gammaln

from ordmix_core.vb.updates import (
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


# ------------------------------------------------------------------ the exact eps step


def _eps_block_case(seed: int, n: int = 12, per: int = 30):
    """Random q(y) of ``n`` annotators' ratings, computed from known likelihood ratios
    ``r_l`` and an ``eps_used`` that includes values at the floor and near 1."""
    from scipy.special import expit

    rng = np.random.default_rng(seed)
    ann = np.repeat(np.arange(n), per)
    rng.shuffle(ann)
    eps_used = np.clip(rng.uniform(0, 1, n) ** rng.choice([0.05, 1.0, 20.0], n), 1e-10, 1 - 1e-10)
    log_r = rng.normal(rng.normal(0.0, 4.0, n)[ann], 3.0)
    omega = expit(np.log(eps_used / (1 - eps_used))[ann] + log_r)
    return ann, omega, eps_used, log_r


def _block_objective(e: np.ndarray, ann: np.ndarray, log_r: np.ndarray) -> np.ndarray:
    """The bound's eps terms with q(y) at its optimum: ``sum_l log(1 - e + e r_l)`` per
    annotator, for each row of ``e`` (G, N); computed with logaddexp, independently of the
    solver's ``a_l / (b_l + e a_l)`` form."""
    le, l1me = np.log(e), np.log1p(-e)
    terms = np.logaddexp(l1me[:, ann], le[:, ann] + log_r[None, :])
    return np.stack([np.bincount(ann, weights=t, minlength=e.shape[1]) for t in terms])


@pytest.mark.parametrize("seed", range(4))
def test_eps_block_maximises_the_bound_over_eps_and_q_y(seed):
    """Against a dense grid of eps (in log-odds, from the floor to 1 - floor): the solver's
    eps is at least as good as every node and as eq. (5)'s mean of omega."""
    from ordmix_core.vb.updates import EPS_FLOOR, eps_block

    ann, omega, eps_used, log_r = _eps_block_case(seed)
    n = eps_used.size
    em = np.bincount(ann, weights=omega, minlength=n) / np.bincount(ann, minlength=n)
    x = eps_block(ann, omega, eps_used, em)
    assert np.all((x >= EPS_FLOOR) & (x <= 1 - EPS_FLOOR))
    u = np.linspace(np.log(EPS_FLOOR), -np.log(EPS_FLOOR), 4001)
    grid = np.repeat((1 / (1 + np.exp(-u)))[:, None], n, axis=1)
    best_grid = _block_objective(grid, ann, log_r).max(axis=0)
    at_x = _block_objective(x[None, :], ann, log_r)[0]
    at_em = _block_objective(np.clip(em, EPS_FLOOR, 1 - EPS_FLOOR)[None, :], ann, log_r)[0]
    assert np.all(at_x >= best_grid - 1e-7), (at_x - best_grid).min()
    assert np.all(at_x >= at_em - 1e-9)
    assert np.any(at_x > at_em + 1e-3)  # the case has annotators EM leaves short of it


def test_eps_block_goes_to_an_end_when_every_rating_points_there():
    from ordmix_core.vb.updates import EPS_FLOOR, eps_block

    ann = np.array([0, 0, 0, 1, 1, 1, 2])
    eps_used = np.array([0.5, 0.5, 0.5])
    omega = np.array([1e-6, 1e-4, 0.01, 0.999, 0.99999, 0.9, 0.5])  # 2: no information
    x = eps_block(ann, omega, eps_used, np.array([0.3, 0.7, 0.5]))
    assert x[0] == EPS_FLOOR and x[1] == 1 - EPS_FLOOR
    assert x[2] == pytest.approx(0.5)
