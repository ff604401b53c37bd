"""One variational-Bayes run of the ordinal-discrete-mixture: the sweep and the loop.

``Problem`` holds the fixed per-fit arrays; ``State`` the variational parameters. ``sweep``
applies every coordinate update once (x, y, z, tau, delta, then eps, alpha, beta) and returns
the new state and its lower bound; ``run`` iterates until ``|dF| < tol``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from . import bound, updates
from .data import CrowdData
from .tn import tn_stats


@dataclass(frozen=True)
class Problem:
    """Fixed arrays of one fit. ``L`` ratings: ann, inst, cat_l, lo, hi, value, log_pi_l."""

    ann: np.ndarray  # (L,) int32
    inst: np.ndarray  # (L,) int32
    cat_l: np.ndarray  # (L,) int32
    lo: np.ndarray  # (L,) lower threshold of the rating's level
    hi: np.ndarray  # (L,) upper threshold
    value: np.ndarray  # (L,) rating value (the observed x of the real-valued likelihood)
    log_pi_l: np.ndarray  # (L,) log pi of the rating's level
    n_per_ann: np.ndarray  # (N,) ratings per annotator
    n_instances: int
    n_categories: int
    mu: float
    lam: float
    phi: float
    eta: float
    ordinal: bool = True
    spam: bool = True
    exact: bool = True
    tau_rate_floor: float = 0.0  # lower limit of the learned beta (updates.gamma_prior_mle)

    @property
    def n_annotators(self) -> int:
        return int(self.n_per_ann.size)

    @classmethod
    def from_data(
        cls,
        data: CrowdData,
        *,
        mu: float,
        lam: float,
        phi: float,
        eta: float,
        pi: np.ndarray,
        ordinal: bool,
        spam: bool,
        exact: bool,
    ) -> Problem:
        b = data.scale.thresholds
        lvl = data.level
        return cls(
            ann=data.ann,
            inst=data.inst,
            cat_l=data.cat,
            lo=b[lvl],
            hi=b[lvl + 1],
            value=data.scale.values[lvl],
            log_pi_l=np.log(pi)[lvl],
            n_per_ann=np.bincount(data.ann, minlength=data.n_annotators),
            n_instances=data.n_instances,
            n_categories=data.n_categories,
            mu=float(mu),
            lam=float(lam),
            phi=float(phi),
            eta=float(eta),
            ordinal=ordinal,
            spam=spam,
            exact=exact,
            tau_rate_floor=updates.TAU_RATE_FLOOR * data.scale.step**2,
        )

    def with_spam(self, spam: bool) -> Problem:
        return replace(self, spam=spam)


@dataclass
class State:
    """Variational parameters and learned hyperparameters."""

    mu_m: np.ndarray  # (M,) mean of q(z_m)
    lam_m: np.ndarray  # (M,) precision of q(z_m)
    tau_shape: np.ndarray  # (N,) q(tau_n) = Gamma(shape, rate)
    tau_rate: np.ndarray  # (N,)
    delta_shape: np.ndarray  # (C,) q(delta_c)
    delta_rate: np.ndarray  # (C,)
    eps: np.ndarray  # (N,) prior probability that n's rating is not spam
    alpha: float
    beta: float
    omega: np.ndarray | None = None  # (L,) q(y=1); None before the first sweep

    def copy(self) -> State:
        return State(
            **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        )


def sweep(p: Problem, s: State) -> tuple[State, float]:
    """One pass of coordinate ascent over every factor; returns the new state and F."""
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


class Stop(Exception):
    """Raised inside ``run`` when the progress callback asks to stop."""


def run(
    p: Problem,
    s: State,
    max_iter: int,
    tol: float,
    callback: Callable[[int, float], bool | None] | None = None,
) -> tuple[State, list[float], bool]:
    """Iterate ``sweep`` until ``|F_t - F_{t-1}| < tol`` or ``max_iter``.

    Returns the final state, the bound after each sweep and whether it converged.
    ``callback(iteration, F)`` returning ``False`` raises :class:`Stop` (state so far attached).
    """
    trace: list[float] = []
    converged = False
    with np.errstate(over="ignore", under="ignore"):
        for it in range(1, max_iter + 1):
            s, f = sweep(p, s)
            trace.append(f)
            if callback is not None and callback(it, f) is False:
                err = Stop()
                err.state, err.trace = s, trace
                raise err
            if it > 1 and abs(f - trace[-2]) < tol:
                converged = True
                break
    return s, trace, converged
