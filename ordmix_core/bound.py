"""Terms of the variational lower bound F (model-notes.md); pure array functions.

F = sum of the rating, instance, annotator and category terms. Shapes as in ``updates.py``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, xlogy

_LOG_2PI = np.log(2.0 * np.pi)


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
        0.5 * np.log(lam / (2.0 * np.pi))
        - 0.5 * lam * (d * d + 1.0 / lam_m)
        + 0.5 * np.log(2.0 * np.pi * np.e / lam_m)
    )
    return float(np.sum(t))


def gamma_terms(shape: np.ndarray, rate: np.ndarray, shape0: float, rate0: float) -> float:
    """Sum of E[log Gamma(t | shape0, rate0)] + H[Gamma(shape, rate)] over q's factors."""
    dig = digamma(shape)
    return gamma_terms_from(shape, rate, shape / rate, dig - np.log(rate), dig, shape0, rate0)


def gamma_terms_from(
    shape: np.ndarray,
    rate: np.ndarray,
    e_t: np.ndarray,
    e_logt: np.ndarray,
    dig: np.ndarray,
    shape0: float,
    rate0: float,
) -> float:
    """``gamma_terms`` from moments already computed (``updates.gamma_stats``); (N,) or (C,)."""
    prior = shape0 * np.log(rate0) - gammaln(shape0) + (shape0 - 1.0) * e_logt - rate0 * e_t
    entropy = shape - np.log(rate) + gammaln(shape) + (1.0 - shape) * dig
    return float(np.sum(prior + entropy))
