"""One variational-Bayes run of the ordinal-discrete-mixture: the sweep and the loop.

``Problem`` holds the fixed per-fit arrays; ``State`` the variational parameters. ``sweep``
applies every coordinate update once (x, y, z, tau, delta, then eps, alpha, beta) and returns
the new state and its lower bound; ``run`` iterates until ``|dF| < tol``.

Two implementations of the sweep give the same results (to ~1e-12 relative): ``sweep_numpy``,
the array-at-a-time reference built from ``tn``, ``updates`` and ``bound``, and
``sweep_fused``, three fused passes over the ratings compiled with numba (``kernels.py``;
about 5x faster on one core, and it uses every core). ``sweep`` picks the fused one when numba
is available (``kernels.USE_JIT``; ``ORDMIX_NO_JIT=1`` switches it off).

The fused sweep is built from phase functions that work on a *block* of ratings holding all
of its instances' ratings (``phase_xy`` -> per-instance q(z) locally, per-annotator /
per-category / scalar sums; ``phase_tau``; ``phase_delta``) and global steps on the reduced
sums (``update_tau``, ``update_delta``, ``annotator_step``; F = per-block terms + global
ones). ``sweep_fused`` is the one-block case; ``dask_engine`` runs the same functions per
partition and reduces the sums across partitions. ``race`` / ``select`` are the restart
schedule (warm-up, successive halving) and choice, independent of the engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from scipy.special import digamma, gammaln

from . import bound, kernels, updates
from .data import CrowdData, Scale
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
    def create(
        cls,
        scale: Scale,
        *,
        pi: np.ndarray,
        mu: float,
        lam: float,
        phi: float,
        eta: float,
        ordinal: bool,
        spam: bool,
        exact: bool,
        n_per_ann: np.ndarray,
        n_categories: int,
    ) -> Problem:
        """The fit's problem without ratings (the Dask client's view): the scale, the priors,
        the model's switches, ratings per annotator (N,) and the number of categories.

        ``with_ratings`` adds ratings (all of them, or a block's).
        """
        empty = np.zeros(0, dtype=np.int32)
        return cls(
            ann=empty,
            inst=empty,
            cat_l=empty,
            level=empty,
            thresholds=np.asarray(scale.thresholds, dtype=float),
            values=np.asarray(scale.values, dtype=float),
            log_pi=np.log(np.asarray(pi, dtype=float)),
            n_per_ann=np.asarray(n_per_ann),
            n_instances=0,
            n_categories=int(n_categories),
            mu=float(mu),
            lam=float(lam),
            phi=float(phi),
            eta=float(eta),
            ordinal=ordinal,
            spam=spam,
            exact=exact,
            tau_rate_floor=updates.TAU_RATE_FLOOR * scale.step**2,
        )

    def with_ratings(
        self,
        ann: np.ndarray,
        inst: np.ndarray,
        cat_l: np.ndarray,
        level: np.ndarray,
        n_instances: int,
        n_categories: int | None = None,
    ) -> Problem:
        """The same problem on these ratings (L,) of ``n_instances`` instances (codes local to
        them) and, if given, ``n_categories`` categories."""
        return replace(
            self,
            ann=np.ascontiguousarray(ann, dtype=np.int32),
            inst=np.ascontiguousarray(inst, dtype=np.int32),
            cat_l=np.ascontiguousarray(cat_l, dtype=np.int32),
            level=np.ascontiguousarray(level, dtype=np.int32),
            n_instances=int(n_instances),
            n_categories=self.n_categories if n_categories is None else int(n_categories),
        )

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
        """The problem of a prepared data set (``create`` + ``with_ratings``)."""
        p = cls.create(
            data.scale,
            pi=pi,
            mu=mu,
            lam=lam,
            phi=phi,
            eta=eta,
            ordinal=ordinal,
            spam=spam,
            exact=exact,
            n_per_ann=np.bincount(data.ann, minlength=data.n_annotators),
            n_categories=data.n_categories,
        )
        return p.with_ratings(data.ann, data.inst, data.cat, data.level, data.n_instances)

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


def annotator_factors(
    p: Problem, tau_shape: np.ndarray, tau_rate: np.ndarray, eps: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What pass 1 needs per annotator: ``E[tau]``, ``log E[tau]`` and ``a_n``; each (N,).

    ``a_n`` is the annotator's part of the logit of omega (see ``kernels.pass_xy``).
    """
    e_tau, e_logtau, _ = _gamma_stats(tau_shape, tau_rate)
    log_e_tau = np.log(e_tau)
    if not p.spam:
        return e_tau, log_e_tau, np.zeros_like(e_tau)
    logit_eps = np.log(eps) - np.log1p(-eps)
    if p.exact and p.ordinal:  # E[log t] - log E[t] = digamma(shape) - log(shape)
        a_n = logit_eps + 0.5 * (e_logtau - log_e_tau)
    elif p.exact:
        a_n = logit_eps + 0.5 * e_logtau
    else:
        a_n = logit_eps + 0.5 * log_e_tau
    return e_tau, log_e_tau, a_n


def category_factors(
    p: Problem, delta_shape: np.ndarray, delta_rate: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What pass 1 needs per category: ``E[delta]``, ``log E[delta]`` and ``b_c``; each (C,)."""
    e_delta, e_logdelta, _ = _gamma_stats(delta_shape, delta_rate)
    log_e_delta = np.log(e_delta)
    if not p.spam:
        return e_delta, log_e_delta, np.zeros_like(e_delta)
    if p.exact and p.ordinal:
        b_c = 0.5 * (e_logdelta - log_e_delta)
    elif p.exact:
        b_c = 0.5 * e_logdelta
    else:
        b_c = 0.5 * log_e_delta
    return e_delta, log_e_delta, b_c


@dataclass
class Work:
    """Per-rating buffers of one block between the phases of a sweep; each (L,).

    ``ex`` = E[x]; ``var_ws`` = Var[x] after phase 1, omega S after phase 2; ``omega``.
    """

    ex: np.ndarray
    var_ws: np.ndarray
    omega: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Work:
        return cls(np.empty(n), np.empty(n), np.empty(n))


@dataclass
class XYSums:
    """Phase 1 of one block: its new q(z) and its sums.

    mu_m, lam_m ``(M,)``: q(z) of the block's instances (local: an instance lives in one
    block); w_ann ``(N,)`` and w_cat ``(C,)``: sum omega; scalars ``(3,)``: sum omega H[q(x)],
    sum (1 - omega) log pi, sum H_Bernoulli(omega); inst_terms: the bound's instance terms.
    """

    mu_m: np.ndarray
    lam_m: np.ndarray
    w_ann: np.ndarray
    w_cat: np.ndarray
    scalars: np.ndarray
    inst_terms: float


def phase_xy(
    p: Problem,
    mu_m: np.ndarray,
    lam_m: np.ndarray,
    ann_f: tuple[np.ndarray, np.ndarray, np.ndarray],
    cat_f: tuple[np.ndarray, np.ndarray, np.ndarray],
    work: Work,
    n_chunks: int,
) -> XYSums:
    """Phase 1 on a block ``p``: q(x|y=1), q(y) (into ``work``) and q(z) from the OLD factors.

    ``mu_m, lam_m`` (M,): the old q(z); ``ann_f``/``cat_f``: ``annotator_factors`` /
    ``category_factors`` of the old q(tau), eps / q(delta).
    """
    n_rat, n_inst = p.n_ratings, p.n_instances
    b = p.thresholds
    e_tau, log_e_tau, a_n = ann_f
    e_delta, log_e_delta, b_c = cat_f
    acc_inst = np.zeros((n_chunks, n_inst, 2))
    acc_ann = np.zeros((n_chunks, p.n_annotators))
    acc_cat = np.zeros((n_chunks, p.n_categories))
    acc_sc = np.zeros((n_chunks, 3))
    pass_xy = kernels.passes(n_rat, n_chunks)[0]
    pass_xy(
        p.ann, p.inst, p.cat_l, p.level, b[:-1], b[1:], p.values, p.log_pi,
        mu_m, 1.0 / lam_m, e_tau, log_e_tau, a_n, e_delta, log_e_delta, b_c,
        p.ordinal, p.spam, p.exact, kernels.ERFCX_TABLE, work.ex, work.var_ws, work.omega,
        acc_inst, acc_ann, acc_cat, acc_sc,
    )  # fmt: skip
    sums_inst = acc_inst.sum(axis=0)
    lam_new = p.lam + sums_inst[:, 0]
    mu_new = (p.mu * p.lam + sums_inst[:, 1]) / lam_new
    return XYSums(
        mu_new,
        lam_new,
        acc_ann.sum(axis=0),
        acc_cat.sum(axis=0),
        acc_sc.sum(axis=0),
        bound.instance_terms(mu_new, lam_new, p.mu, p.lam),
    )


def phase_tau(
    p: Problem, work: Work, mu_m: np.ndarray, lam_m: np.ndarray, e_delta: np.ndarray, n_chunks: int
) -> np.ndarray:
    """Phase 2 on a block: ``S_l`` with the NEW q(z) ``mu_m, lam_m`` (M,) and the OLD ``e_delta``
    (C,); returns per annotator ``sum omega E[delta] S`` (N,). ``work.var_ws`` becomes omega S.
    """
    acc_ann = np.zeros((n_chunks, p.n_annotators))
    pass_tau = kernels.passes(p.n_ratings, n_chunks)[1]
    pass_tau(
        p.ann, p.inst, p.cat_l, work.ex, work.var_ws, work.omega, mu_m, 1.0 / lam_m, e_delta,
        acc_ann,
    )  # fmt: skip
    return acc_ann.sum(axis=0)


def phase_delta(p: Problem, work: Work, e_tau: np.ndarray, n_chunks: int) -> np.ndarray:
    """Phase 3 on a block: per category ``sum omega E[tau] S`` (C,) with the NEW ``e_tau`` (N,)."""
    acc_cat = np.zeros((n_chunks, p.n_categories))
    pass_delta = kernels.passes(p.n_ratings, n_chunks)[2]
    pass_delta(p.ann, p.cat_l, work.var_ws, e_tau, acc_cat)
    return acc_cat.sum(axis=0)


def update_tau(
    w_ann: np.ndarray, r_ann: np.ndarray, alpha: float, beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """q(tau) from the reduced sums: ``(shape, rate)``, each (N,)."""
    return alpha + 0.5 * w_ann, beta + 0.5 * r_ann


def update_delta(p: Problem, w_cat: np.ndarray, d_cat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q(delta) from the reduced sums: ``(shape, rate)``, each (C,)."""
    return p.phi + 0.5 * w_cat, p.eta + 0.5 * d_cat


def category_terms(
    p: Problem,
    w_cat: np.ndarray,
    d_cat: np.ndarray,
    delta_shape: np.ndarray,
    delta_rate: np.ndarray,
) -> float:
    """The bound's terms that involve q(delta) (ratings' share and the Gamma terms); inputs (C,)."""
    e_delta, e_logdelta, dig = _gamma_stats(delta_shape, delta_rate)
    f = 0.5 * float(w_cat @ e_logdelta) - 0.5 * float(e_delta @ d_cat)
    return f + _gamma_terms(delta_shape, delta_rate, e_delta, e_logdelta, dig, p.phi, p.eta)


def annotator_step(
    p: Problem,
    w_ann: np.ndarray,
    tau_shape: np.ndarray,
    tau_rate: np.ndarray,
    eps_old: np.ndarray,
) -> tuple[np.ndarray, float, float, float]:
    """eps (eq. 5) and (alpha, beta) from the reduced sums, and the bound's annotator terms.

    ``w_ann`` (N,): sum omega per annotator; returns ``(eps (N,), alpha, beta, F_annotators)``.
    """
    e_tau, e_logtau, dig_tau = _gamma_stats(tau_shape, tau_rate)
    if p.spam:
        eps = np.clip(
            w_ann / np.maximum(p.n_per_ann, 1), updates.EPS_FLOOR, 1.0 - updates.EPS_FLOOR
        )
    else:
        eps = eps_old
    alpha, beta = updates.gamma_prior_mle(e_tau, e_logtau, p.tau_rate_floor)
    f = 0.5 * float(w_ann @ e_logtau) - 0.5 * updates._LOG_2PI * float(w_ann.sum())
    if p.spam:
        f += float(w_ann @ np.log(eps)) + float((p.n_per_ann - w_ann) @ np.log1p(-eps))
    f += _gamma_terms(tau_shape, tau_rate, e_tau, e_logtau, dig_tau, alpha, beta)
    return eps, alpha, beta, f


def block_terms(p: Problem, xy: XYSums) -> float:
    """The bound's per-block terms: rating sums from phase 1 and the instance terms."""
    sum_ent, sum_spam_pi, sum_h_bern = (float(x) for x in xy.scalars)
    f = sum_ent + xy.inst_terms
    if p.spam:
        f += sum_spam_pi + sum_h_bern
    return f


def sweep_fused(p: Problem, s: State, n_chunks: int | None = None) -> tuple[State, float]:
    """``sweep`` as three fused passes over the ratings (``kernels.py``); same results.

    The single-block case of the phase functions the Dask engine runs per partition:
    ``phase_xy`` -> q(z); ``phase_tau`` -> ``update_tau``; ``phase_delta`` -> ``update_delta``;
    ``annotator_step`` (eps, alpha, beta); F = ``block_terms`` + ``category_terms`` + the
    annotator terms. ``n_chunks``: rows of partial sums (default numba's thread count); for a
    given value the result is bit-identical run to run, and it changes only by rounding
    (~1e-15) with it. Memory: three (L,) float arrays (E[x], Var[x] then omega S, and the new
    omega) plus ``n_chunks`` partial sums of size 2M + 2N + 2C.
    """
    t_chunks = kernels.n_chunks() if n_chunks is None else int(n_chunks)
    ex, var_ws = _scratch(p.n_ratings)
    work = Work(ex, var_ws, np.empty(p.n_ratings))
    ann_f = annotator_factors(p, s.tau_shape, s.tau_rate, s.eps)
    cat_f = category_factors(p, s.delta_shape, s.delta_rate)
    xy = phase_xy(p, s.mu_m, s.lam_m, ann_f, cat_f, work, t_chunks)
    r_ann = phase_tau(p, work, xy.mu_m, xy.lam_m, cat_f[0], t_chunks)
    tau_shape, tau_rate = update_tau(xy.w_ann, r_ann, s.alpha, s.beta)
    d_cat = phase_delta(p, work, tau_shape / tau_rate, t_chunks)
    delta_shape, delta_rate = update_delta(p, xy.w_cat, d_cat)
    eps, alpha, beta, f_ann = annotator_step(p, xy.w_ann, tau_shape, tau_rate, s.eps)
    new = State(
        xy.mu_m, xy.lam_m, tau_shape, tau_rate, delta_shape, delta_rate, eps, alpha, beta,
        work.omega,
    )  # fmt: skip
    f = f_ann + category_terms(p, xy.w_cat, d_cat, delta_shape, delta_rate) + block_terms(p, xy)
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
