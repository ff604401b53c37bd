"""Terms of the variational lower bound F (docs/model.md); pure array functions.

F = sum of the rating, instance, annotator and category terms. Shapes as in ``updates.py``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma, gammaln, xlogy

from ..numerics import gamma_functions, libm

_LOG_2PI = math.log(2.0 * math.pi)  # libm.log gives these bits too (a test checks)


def rating_terms(
    omega: np.ndarray,
    one_m_omega: np.ndarray,
    log_eps_l: np.ndarray,
    log1m_eps_l: np.ndarray,
    log_pi_l: np.ndarray,
    e_logtau_l: np.ndarray,
    e_logdelta_l: np.ndarray,
    e_tau_l: np.ndarray,
    e_delta_l: np.ndarray,
    s_l: np.ndarray,
    entropy_l: np.ndarray | None,
    spam: bool,
) -> float:
    """Sum over ratings of the expected log joint of (r, x, y) plus the entropy of q(x, y).

    ``entropy_l`` is H[q(x_l | y=1)] (None for the real-valued likelihood). Without the spam
    component omega = 1 and the eps, pi and Bernoulli-entropy terms vanish.
    """
    truth = 0.5 * (e_logtau_l + e_logdelta_l) - 0.5 * _LOG_2PI - 0.5 * e_tau_l * e_delta_l * s_l
    if entropy_l is not None:
        truth = truth + entropy_l
    if not spam:
        return float(np.sum(truth))
    total = omega * (log_eps_l + truth) + one_m_omega * (log1m_eps_l + log_pi_l)
    h_bern = -xlogy(omega, omega) - xlogy(one_m_omega, one_m_omega)
    return float(np.sum(total + h_bern))


def instance_terms(mu_m: np.ndarray, lam_m: np.ndarray, mu: float, lam: float) -> float:
    """Sum over instances of E[log N(z_m | mu, 1/lam)] + H[q(z_m)]; inputs (M,)."""
    d = mu_m - mu
    t = (
        0.5 * libm.log(lam / (2.0 * np.pi))
        - 0.5 * lam * (d * d + 1.0 / lam_m)
        + 0.5 * libm.log(2.0 * np.pi * np.e / lam_m)
    )
    return float(np.sum(t))


def gamma_terms(shape: np.ndarray, rate: np.ndarray, shape0: float, rate0: float) -> float:
    """Sum of E[log Gamma(t | shape0, rate0)] + H[Gamma(shape, rate)] over q's factors."""
    dig = gamma_functions.digamma(shape)
    return gamma_terms_from(shape, rate, shape / rate, dig - libm.log(rate), dig, shape0, rate0)


def gamma_terms_from(
    shape: np.ndarray,
    rate: np.ndarray,
    e_t: np.ndarray,
    e_logt: np.ndarray,
    dig: np.ndarray,
    shape0: float,
    rate0: float,
) -> float:
    """``gamma_terms`` from moments already computed (``updates.gamma_stats``); (N,) or (C,).
    The factors' gammaln on the vector units (``numerics.gamma_functions``), the prior's
    (a scalar that the type-II ML of the prior solves for with scipy's digamma) scipy's."""
    prior = shape0 * libm.log(rate0) - gammaln(shape0) + (shape0 - 1.0) * e_logt - rate0 * e_t
    entropy = shape - libm.log(rate) + gamma_functions.gammaln(shape) + (1.0 - shape) * dig
    return float(np.sum(prior + entropy))


def gold_instance_terms(mu_m: np.ndarray, gold_mask: np.ndarray, mu: float, lam: float) -> float:
    """Correction of ``instance_terms`` for gold instances (z observed at ``mu_m``): their
    term is ``log N(g_m | mu, 1/lam)``, no entropy. Returns what to add, (M,) inputs."""
    d = mu_m[gold_mask] - mu
    return float(np.sum(0.5 * libm.log(lam / (2.0 * np.pi)) - 0.5 * lam * d * d))


def instance_terms_gold(
    mu_m: np.ndarray, lam_m: np.ndarray, mu: float, lam: float, gold_mask: np.ndarray | None
) -> float:
    """``instance_terms`` with gold instances (``gold_mask`` (M,) or None) as observed z."""
    if gold_mask is None:
        return instance_terms(mu_m, lam_m, mu, lam)
    free = ~gold_mask
    return instance_terms(mu_m[free], lam_m[free], mu, lam) + gold_instance_terms(
        mu_m, gold_mask, mu, lam
    )


def bias_terms(bias_mean: np.ndarray, bias_prec: np.ndarray, lam_b: float) -> float:
    """Sum over annotators of E[log N(b_n | 0, 1/lam_b)] + H[q(b_n)]; inputs (N,)."""
    t = (
        0.5 * libm.log(lam_b / (2.0 * np.pi))
        - 0.5 * lam_b * (bias_mean * bias_mean + 1.0 / bias_prec)
        + 0.5 * libm.log(2.0 * np.pi * np.e / bias_prec)
    )
    return float(np.sum(t))


def dirichlet_terms(dir_a: np.ndarray, pi: np.ndarray, kappa: float) -> float:
    """Sum over annotators of E[log Dir(pi_n | kappa pi)] + H[Dir(dir_a_n)]; (N, K), (K,)."""
    el = digamma(dir_a) - digamma(dir_a.sum(axis=1, keepdims=True))
    al = kappa * pi
    a_sum = dir_a.sum(axis=1)
    t = (
        gammaln(kappa)
        - np.sum(gammaln(al))
        - gammaln(a_sum)
        + np.sum(gammaln(dir_a), axis=1)
        + np.sum((al[None, :] - dir_a) * el, axis=1)
    )
    return float(np.sum(t))


def spam_level_terms(spam_count: np.ndarray, log_table: np.ndarray) -> float:
    """``sum_l (1 - omega_l) E[log pi_{n, r_l}]`` from the spam weight per cell of the table
    (``spam_count`` and ``log_table`` of the same shape, (1, K) or (N, K))."""
    return float(np.sum(spam_count * log_table))
