"""The numpy reference sweep: every coordinate update once, whole arrays at a time.

Built from ``tn`` (truncated-normal statistics), ``updates`` (the coordinate updates) and
``bound`` (the terms of F), one line per formula of docs/model.md, so it can be read against
the notes. ``phases.sweep_fused`` must give the same results (to ~1e-12 relative;
``tests/vb/test_sweep.py``); ``vb.sweep`` uses this one when numba is unavailable or switched off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..numerics import libm
from ..numerics.truncnorm import tn_stats
from . import bound, updates
from .problem import Problem, State


class Rated(NamedTuple):
    """q(x | y=1) and q(y) of a set of ratings, with the factors they were computed from;
    every array ``(L',)`` over those ratings (``b`` and ``inv_bp`` 0.0 without the bias, ``var``
    0.0 and ``ent`` None on a real-valued scale, ``cells`` None without spam)."""

    ann: np.ndarray
    inst: np.ndarray
    cat: np.ndarray
    e_tau: np.ndarray
    e_logtau: np.ndarray
    e_delta: np.ndarray
    e_logdelta: np.ndarray
    rho: np.ndarray  # E[tau] E[delta]
    b: np.ndarray | float  # E[b_n]
    inv_bp: np.ndarray | float  # 1 / bias precision
    inv_lam: np.ndarray  # Var[z_m] (0 for gold items)
    ex: np.ndarray
    var: np.ndarray | float
    ent: np.ndarray | None
    omega: np.ndarray
    one_m_omega: np.ndarray
    cells: np.ndarray | None  # the spam distribution's cell of each rating


def q_xy(p: Problem, s: State, rows: np.ndarray | None = None, tn: Callable = tn_stats) -> Rated:
    """q(x | y=1) and q(y) of the ratings ``rows`` (None: all) from state ``s``: the first
    block of the sweep (``sweep_numpy``), also the rounds of ``settle.settle_items``.

    With the bias, q(x | y=1) is centred at ``mu_m + bias_mean_n`` and S gains
    ``1/bias_prec_n``. ``tn``: the truncated-normal statistics (``truncnorm.tn_stats``, or
    ``kernels.tn_stats``, the compiled sweep's, which the settle's rounds use)."""
    at = slice(None) if rows is None else rows
    ann, inst, cat = p.ann[at], p.inst[at], p.cat_l[at]
    if rows is None:  # once per annotator and category, then gathered
        e_tau, e_logtau = updates.gamma_moments(s.tau_shape, s.tau_rate)
        e_delta, e_logdelta = updates.gamma_moments(s.delta_shape, s.delta_rate)
        e_tau_l, e_logtau_l = e_tau[ann], e_logtau[ann]
        e_delta_l, e_logdelta_l = e_delta[cat], e_logdelta[cat]
    else:  # a few ratings: gathered first (the same values)
        e_tau_l, e_logtau_l = updates.gamma_moments(s.tau_shape[ann], s.tau_rate[ann])
        e_delta_l, e_logdelta_l = updates.gamma_moments(s.delta_shape[cat], s.delta_rate[cat])
    rho_l = e_tau_l * e_delta_l
    inv_lam_l = updates.inv_lam_z(s.lam_m, p.gold_mask)[inst]
    if p.bias:
        b_l, inv_bp_l = s.bias_mean[ann], (1.0 / s.bias_prec)[ann]
    else:
        b_l, inv_bp_l = 0.0, 0.0
    centre_l = s.mu_m[inst] + b_l

    # q(x | y=1): N(mu_m [+ b_n], 1/rho) truncated to the rating's interval, or x observed
    if p.ordinal:
        stats = tn(p.lo[at], p.hi[at], centre_l, rho_l)
        ex, var, ent = stats.ex, stats.var, stats.entropy
    else:
        ex, var, ent = p.value[at], 0.0, None

    # q(y)
    cells = None
    if p.spam:
        cells = updates.spam_cells(ann, p.level[at], p.n_levels, p.spam_dist == "annotator")
        log_pi_l = updates.spam_log_table(p.spam_dist, p.log_pi, s.pi, s.dir_a).ravel()[cells]
        log_eps, log1m_eps = libm.log(s.eps), libm.log1p(-s.eps)
        s_l = updates.expected_sq_inv(ex, var, centre_l, inv_lam_l + inv_bp_l)
        logit = updates.omega_logit(
            log_eps[ann], log1m_eps[ann], log_pi_l, e_logtau_l, e_logdelta_l, rho_l, s_l, ent,
            exact=p.exact,
        )  # fmt: skip
        omega, one_m_omega = updates.omega_from_logit(logit)
    else:
        omega, one_m_omega = np.ones_like(rho_l), np.zeros_like(rho_l)
    return Rated(
        ann, inst, cat, e_tau_l, e_logtau_l, e_delta_l, e_logdelta_l, rho_l, b_l, inv_bp_l,
        inv_lam_l, ex, var, ent, omega, one_m_omega, cells,
    )  # fmt: skip


def sweep_numpy(p: Problem, s: State) -> tuple[State, float]:
    """The reference sweep, whole arrays at a time (``tn``, ``updates``, ``bound``).

    With the extensions (``p.bias``, ``p.spam_dist``, ``p.gold``; docs/extensions.md): q(x|y=1)
    is centred at ``mu_m + bias_mean_n`` and S gains ``1/bias_prec_n`` (``q_xy``); q(b)
    follows q(z) (with the new q(z)), then tau and delta see S with the new bias; lambda_b
    and the learned spam distribution are updated with the other hyperparameters.
    """
    r = q_xy(p, s)
    ex, var, ent, omega, one_m_omega, b_l = r.ex, r.var, r.ent, r.omega, r.one_m_omega, r.b
    e_delta_l, rho_l, cells = r.e_delta, r.rho, r.cells
    per_ann = p.spam_dist == "annotator"

    # q(z) (gold instances: z observed), q(b) with the new q(z), then tau and delta with both
    w_l = omega * rho_l
    mu_m, lam_m = updates.update_z(p.inst, w_l, ex - b_l, p.mu, p.lam, p.n_instances)
    mu_m = updates.apply_gold(mu_m, p.gold)
    mu_l = mu_m[p.inst]
    inv_lam_l = updates.inv_lam_z(lam_m, p.gold_mask)[p.inst]
    bias_mean, bias_prec, lam_b = s.bias_mean, s.bias_prec, s.lam_b
    if p.bias:
        bias_mean, bias_prec = updates.update_bias(
            np.bincount(p.ann, weights=w_l, minlength=p.n_annotators),
            np.bincount(p.ann, weights=w_l * (ex - mu_l), minlength=p.n_annotators),
            s.lam_b,
        )
        mu_l = mu_l + bias_mean[p.ann]
        inv_lam_l = inv_lam_l + (1.0 / bias_prec)[p.ann]
    s_l = updates.expected_sq_inv(ex, var, mu_l, inv_lam_l)
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

    # hyperparameters: eps (eq. 5), the Gamma prior of tau, lambda_b, the spam distribution
    eps = updates.update_eps(p.ann, omega, p.n_per_ann) if p.spam else s.eps
    alpha, beta = updates.gamma_prior_mle(e_tau, e_logtau, p.tau_rate_floor)
    if p.bias:
        lam_b = updates.bias_prior_mle(bias_mean, bias_prec)
    pi, dir_a, kappa = s.pi, s.dir_a, s.kappa
    spam_count = None
    if p.spam and p.spam_dist != "uniform":
        rows = p.n_annotators if per_ann else 1
        spam_count = np.bincount(cells, weights=one_m_omega, minlength=rows * p.n_levels).reshape(
            rows, p.n_levels
        )
        if per_ann:
            dir_a, pi, kappa = updates.update_annotator_pi(spam_count, s.pi, s.kappa)
        else:
            pi = updates.update_global_pi(spam_count[0])

    new = State(
        mu_m, lam_m, tau_shape, tau_rate, delta_shape, delta_rate, eps, alpha, beta, omega,
        bias_mean, bias_prec, lam_b, pi, dir_a, kappa, s.eps,
    )  # fmt: skip
    f = lower_bound(p, new, e_tau_l, e_logtau_l, e_delta_l, e_logdelta_l, s_l, ent, one_m_omega)
    if spam_count is not None:  # the rating terms' share with the learned distribution
        table = updates.spam_log_table(p.spam_dist, p.log_pi, pi, dir_a)
        f += bound.spam_level_terms(spam_count, table)
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
    """F for state ``s`` with q(x) as held (its entropy ``entropy_l``, S computed from it).

    With a learned spam distribution (``p.spam_dist != 'uniform'``) the ratings' ``(1 -
    omega) E[log pi]`` is left out here (the caller adds it per cell); the Dirichlet's own
    terms, the bias terms and the gold instances' terms are included.
    """
    if p.spam:
        log_eps_l, log1m_eps_l = libm.log(s.eps)[p.ann], libm.log1p(-s.eps)[p.ann]
    else:
        log_eps_l = log1m_eps_l = 0.0
    log_pi_l = p.log_pi_l if p.spam_dist == "uniform" else 0.0
    f = bound.rating_terms(
        s.omega,
        one_m_omega,
        log_eps_l,
        log1m_eps_l,
        log_pi_l,
        e_logtau_l,
        e_logdelta_l,
        e_tau_l,
        e_delta_l,
        s_l,
        entropy_l,
        p.spam,
    )
    f += bound.instance_terms_gold(s.mu_m, s.lam_m, p.mu, p.lam, p.gold_mask)
    f += bound.gamma_terms(s.tau_shape, s.tau_rate, s.alpha, s.beta)
    f += bound.gamma_terms(s.delta_shape, s.delta_rate, p.phi, p.eta)
    if p.bias:
        f += bound.bias_terms(s.bias_mean, s.bias_prec, s.lam_b)
    if p.spam and p.spam_dist == "annotator":
        f += bound.dirichlet_terms(s.dir_a, s.pi, s.kappa)
    return f
