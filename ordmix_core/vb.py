"""One variational-Bayes run of the ordinal-discrete-mixture: the sweep and the loop.

``Problem`` holds the fixed per-fit arrays; ``State`` the variational parameters. ``sweep``
applies every coordinate update once (x, y, z, tau, delta, then eps, alpha, beta) and returns
the new state and its lower bound; ``run`` iterates until ``|dF| < tol``.

Two implementations of the sweep give the same results (to ~1e-12 relative): ``sweep_numpy``,
the array-at-a-time reference built from ``tn``, ``updates`` and ``bound``, and
``sweep_fused``, three fused passes over the ratings compiled with numba (``kernels.py``;
about 5x faster on one core, and it uses every core). ``sweep`` picks the fused one when numba
is available (``kernels.USE_JIT``; ``ORDMIX_NO_JIT=1`` switches it off).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from scipy.special import digamma, gammaln

from . import bound, kernels, updates
from .data import CrowdData
from .tn import tn_stats


@dataclass(frozen=True)
class Problem:
    """Fixed arrays of one fit. ``L`` ratings coded as ann, inst, cat_l, level; ``K`` levels."""

    ann: np.ndarray  # (L,) int32
    inst: np.ndarray  # (L,) int32
    cat_l: np.ndarray  # (L,) int32
    level: np.ndarray  # (L,) int32 level index 0..K-1
    thresholds: np.ndarray  # (K+1,) b_0 < ... < b_K
    values: np.ndarray  # (K,) the scale's values
    log_pi: np.ndarray  # (K,) log of the spam distribution
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

    @property
    def n_ratings(self) -> int:
        return int(self.ann.size)

    # per-rating views used by the numpy reference (built on first use: 8 bytes a rating each)
    @cached_property
    def lo(self) -> np.ndarray:
        """(L,) lower threshold of each rating's level."""
        return self.thresholds[self.level]

    @cached_property
    def hi(self) -> np.ndarray:
        """(L,) upper threshold of each rating's level."""
        return self.thresholds[self.level + 1]

    @cached_property
    def value(self) -> np.ndarray:
        """(L,) rating value (the observed x of the real-valued likelihood)."""
        return self.values[self.level]

    @cached_property
    def log_pi_l(self) -> np.ndarray:
        """(L,) log pi of each rating's level."""
        return self.log_pi[self.level]

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
        return cls(
            ann=np.ascontiguousarray(data.ann, dtype=np.int32),
            inst=np.ascontiguousarray(data.inst, dtype=np.int32),
            cat_l=np.ascontiguousarray(data.cat, dtype=np.int32),
            level=np.ascontiguousarray(data.level, dtype=np.int32),
            thresholds=np.asarray(data.scale.thresholds, dtype=float),
            values=np.asarray(data.scale.values, dtype=float),
            log_pi=np.log(np.asarray(pi, dtype=float)),
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
    """One pass of coordinate ascent over every factor; returns the new state and F.

    Order (it keeps F monotone with exact updates): q(x) and q(y) from the old q(z), tau,
    delta, eps; q(z); q(tau) with the new q(z) and the old E[delta]; q(delta) with the new
    E[tau]; eps; (alpha, beta). Uses ``sweep_fused`` if ``kernels.USE_JIT``, else
    ``sweep_numpy``.
    """
    if kernels.USE_JIT:
        return sweep_fused(p, s)
    return sweep_numpy(p, s)


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


def _gamma_stats(shape: np.ndarray, rate: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``E[t]``, ``E[log t]`` and ``digamma(shape)`` of Gamma(shape, rate); each as input."""
    dig = digamma(shape)
    return shape / rate, dig - np.log(rate), dig


def _gamma_terms(
    shape: np.ndarray,
    rate: np.ndarray,
    e_t: np.ndarray,
    e_logt: np.ndarray,
    dig: np.ndarray,
    shape0: float,
    rate0: float,
) -> float:
    """``bound.gamma_terms`` reusing the moments already computed; inputs (N,) or (C,)."""
    prior = shape0 * np.log(rate0) - gammaln(shape0) + (shape0 - 1.0) * e_logt - rate0 * e_t
    entropy = shape - np.log(rate) + gammaln(shape) + (1.0 - shape) * dig
    return float(np.sum(prior + entropy))


_SCRATCH = threading.local()


def _scratch(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two (n,) float arrays reused across this thread's sweeps (no page faults per sweep)."""
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.shape[1] != n:
        buf = np.empty((2, n))
        _SCRATCH.buf = buf
    return buf[0], buf[1]


def sweep_fused(p: Problem, s: State, n_chunks: int | None = None) -> tuple[State, float]:
    """``sweep`` as three fused passes over the ratings (``kernels.py``); same results.

    ``n_chunks``: rows of partial sums (default numba's thread count); for a given value the
    result is bit-identical run to run, and it changes only by rounding (~1e-15) with it.
    Memory: three (L,) float arrays (E[x], Var[x] then omega S, and the new omega) plus
    ``n_chunks`` partial sums of size 2M + 2N + 2C.
    """
    t_chunks = kernels.n_chunks() if n_chunks is None else int(n_chunks)
    n_rat, n_inst, n_ann, n_cat = p.n_ratings, p.n_instances, p.n_annotators, p.n_categories
    tab = kernels.ERFCX_TABLE
    b = p.thresholds

    # old factors, per annotator (N,) and category (C,)
    e_tau, e_logtau, _ = _gamma_stats(s.tau_shape, s.tau_rate)
    e_delta, e_logdelta, _ = _gamma_stats(s.delta_shape, s.delta_rate)
    log_e_tau, log_e_delta = np.log(e_tau), np.log(e_delta)
    if p.spam:
        logit_eps = np.log(s.eps) - np.log1p(-s.eps)
        if p.exact and p.ordinal:  # E[log t] - log E[t] = digamma(shape) - log(shape)
            a_n = logit_eps + 0.5 * (e_logtau - log_e_tau)
            b_c = 0.5 * (e_logdelta - log_e_delta)
        elif p.exact:
            a_n, b_c = logit_eps + 0.5 * e_logtau, 0.5 * e_logdelta
        else:
            a_n, b_c = logit_eps + 0.5 * log_e_tau, 0.5 * log_e_delta
    else:
        a_n, b_c = np.zeros(n_ann), np.zeros(n_cat)

    # pass 1: q(x | y=1), q(y); sums for q(z), eps, the shapes and the bound
    ex, var_ws = _scratch(n_rat)
    omega = np.empty(n_rat)
    acc_inst = np.zeros((t_chunks, n_inst, 2))
    acc_ann = np.zeros((t_chunks, n_ann))
    acc_cat = np.zeros((t_chunks, n_cat))
    acc_sc = np.zeros((t_chunks, 3))
    pass_xy, pass_tau, pass_delta = kernels.passes(n_rat, t_chunks)
    pass_xy(
        p.ann, p.inst, p.cat_l, p.level, b[:-1], b[1:], p.values, p.log_pi,
        s.mu_m, 1.0 / s.lam_m, e_tau, log_e_tau, a_n, e_delta, log_e_delta, b_c,
        p.ordinal, p.spam, p.exact, tab, ex, var_ws, omega, acc_inst, acc_ann, acc_cat, acc_sc,
    )  # fmt: skip
    sums_inst = acc_inst.sum(axis=0)
    w_ann = acc_ann.sum(axis=0)  # sum omega per annotator
    w_cat = acc_cat.sum(axis=0)  # sum omega per category
    sum_ent, sum_spam_pi, sum_h_bern = acc_sc.sum(axis=0)
    del acc_inst, acc_cat

    # q(z)
    lam_m = p.lam + sums_inst[:, 0]
    mu_m = (p.mu * p.lam + sums_inst[:, 1]) / lam_m

    # pass 2: q(tau) with the new q(z) and the old E[delta]
    acc_ann[:] = 0.0
    pass_tau(p.ann, p.inst, p.cat_l, ex, var_ws, omega, mu_m, 1.0 / lam_m, e_delta, acc_ann)
    tau_shape = s.alpha + 0.5 * w_ann
    tau_rate = s.beta + 0.5 * acc_ann.sum(axis=0)
    e_tau, e_logtau, dig_tau = _gamma_stats(tau_shape, tau_rate)

    # pass 3: q(delta) with the new E[tau]
    acc_cat = np.zeros((t_chunks, n_cat))
    pass_delta(p.ann, p.cat_l, var_ws, e_tau, acc_cat)
    d_cat = acc_cat.sum(axis=0)  # sum omega E[tau] S per category
    delta_shape = p.phi + 0.5 * w_cat
    delta_rate = p.eta + 0.5 * d_cat
    e_delta, e_logdelta, dig_delta = _gamma_stats(delta_shape, delta_rate)

    # hyperparameters
    if p.spam:
        eps = np.clip(
            w_ann / np.maximum(p.n_per_ann, 1), updates.EPS_FLOOR, 1.0 - updates.EPS_FLOOR
        )
    else:
        eps = s.eps
    alpha, beta = updates.gamma_prior_mle(e_tau, e_logtau, p.tau_rate_floor)
    new = State(mu_m, lam_m, tau_shape, tau_rate, delta_shape, delta_rate, eps, alpha, beta, omega)

    # F: the rating terms from the per-entity sums (bound.rating_terms, regrouped)
    f = (
        0.5 * float(w_ann @ e_logtau)
        + 0.5 * float(w_cat @ e_logdelta)
        - 0.5 * updates._LOG_2PI * float(w_ann.sum())
        - 0.5 * float(e_delta @ d_cat)
        + sum_ent
    )
    if p.spam:
        f += float(w_ann @ np.log(eps)) + float((p.n_per_ann - w_ann) @ np.log1p(-eps))
        f += sum_spam_pi + sum_h_bern
    f += bound.instance_terms(mu_m, lam_m, p.mu, p.lam)
    f += _gamma_terms(tau_shape, tau_rate, e_tau, e_logtau, dig_tau, alpha, beta)
    f += _gamma_terms(delta_shape, delta_rate, e_delta, e_logdelta, dig_delta, p.phi, p.eta)
    return new, float(f)


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
