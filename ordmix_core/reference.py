"""The numpy reference sweep: every coordinate update once, whole arrays at a time.

Built from ``tn`` (truncated-normal statistics), ``updates`` (the coordinate updates) and
``bound`` (the terms of F), one line per formula of model-notes.md, so it can be read against
the notes. ``phases.sweep_fused`` must give the same results (to ~1e-12 relative;
``tests/test_vb.py``); ``vb.sweep`` uses this one when numba is unavailable or switched off.
"""

from __future__ import annotations

import numpy as np

from . import bound, updates
from .problem import Problem, State
from .tn import tn_stats


def sweep_numpy(p: Problem, s: State) -> tuple[State, float]:
    """The reference sweep, whole arrays at a time (``tn``, ``updates``, ``bound``)."""
    e_tau, e_logtau = updates.gamma_moments(s.tau_shape, s.tau_rate)
    e_delta, e_logdelta = updates.gamma_moments(s.delta_shape, s.delta_rate)
    e_tau_l, e_logtau_l = e_tau[p.ann], e_logtau[p.ann]
    e_delta_l, e_logdelta_l = e_delta[p.cat_l], e_logdelta[p.cat_l]
    mu_l = s.mu_m[p.inst]
    rho_l = e_tau_l * e_delta_l

    # q(x | y=1): N(mu_m, 1/rho) truncated to the rating's interval (ordinal), or x observed
    if p.ordinal:
        tn = tn_stats(p.lo, p.hi, mu_l, rho_l)
        ex, var, ent = tn.ex, tn.var, tn.entropy
    else:
        ex, var, ent = p.value, 0.0, None

    # q(y)
    if p.spam:
        log_eps, log1m_eps = np.log(s.eps), np.log1p(-s.eps)
        s_l = updates.expected_sq(ex, var, mu_l, s.lam_m[p.inst])
        logit = updates.omega_logit(
            log_eps[p.ann],
            log1m_eps[p.ann],
            p.log_pi_l,
            e_logtau_l,
            e_logdelta_l,
            rho_l,
            s_l,
            ent,
            exact=p.exact,
        )
        omega, one_m_omega = updates.omega_from_logit(logit)
    else:
        omega, one_m_omega = np.ones_like(rho_l), np.zeros_like(rho_l)

    # q(z), then tau and delta with the new q(z)
    mu_m, lam_m = updates.update_z(p.inst, omega * rho_l, ex, p.mu, p.lam, p.n_instances)
    s_l = updates.expected_sq(ex, var, mu_m[p.inst], lam_m[p.inst])
    tau_shape, tau_rate = updates.update_gamma_factor(
        p.ann, omega, e_delta_l, s_l, s.alpha, s.beta, p.n_annotators
    )
    e_tau, e_logtau = updates.gamma_moments(tau_shape, tau_rate)
    e_tau_l, e_logtau_l = e_tau[p.ann], e_logtau[p.ann]
    delta_shape, delta_rate = updates.update_gamma_factor(
        p.cat_l, omega, e_tau_l, s_l, p.phi, p.eta, p.n_categories
    )
    e_delta, e_logdelta = updates.gamma_moments(delta_shape, delta_rate)
    e_delta_l, e_logdelta_l = e_delta[p.cat_l], e_logdelta[p.cat_l]

    # hyperparameters: eps (eq. 5), then the Gamma prior of tau by type-II ML
    eps = updates.update_eps(p.ann, omega, p.n_per_ann) if p.spam else s.eps
    alpha, beta = updates.gamma_prior_mle(e_tau, e_logtau, p.tau_rate_floor)

    new = State(mu_m, lam_m, tau_shape, tau_rate, delta_shape, delta_rate, eps, alpha, beta, omega)
    f = lower_bound(p, new, e_tau_l, e_logtau_l, e_delta_l, e_logdelta_l, s_l, ent, one_m_omega)
    return new, f


def lower_bound(
    p: Problem,
    s: State,
    e_tau_l: np.ndarray,
    e_logtau_l: np.ndarray,
    e_delta_l: np.ndarray,
    e_logdelta_l: np.ndarray,
    s_l: np.ndarray,
    entropy_l: np.ndarray | None,
    one_m_omega: np.ndarray,
) -> float:
    """F for state ``s`` with q(x) as held (its entropy ``entropy_l``, S computed from it)."""
    if p.spam:
        log_eps_l, log1m_eps_l = np.log(s.eps)[p.ann], np.log1p(-s.eps)[p.ann]
    else:
        log_eps_l = log1m_eps_l = 0.0
    f = bound.rating_terms(
        s.omega,
        one_m_omega,
        log_eps_l,
        log1m_eps_l,
        p.log_pi_l,
        e_logtau_l,
        e_logdelta_l,
        e_tau_l,
        e_delta_l,
        s_l,
        entropy_l,
        p.spam,
    )
    f += bound.instance_terms(s.mu_m, s.lam_m, p.mu, p.lam)
    f += bound.gamma_terms(s.tau_shape, s.tau_rate, s.alpha, s.beta)
    f += bound.gamma_terms(s.delta_shape, s.delta_rate, p.phi, p.eta)
    return f
