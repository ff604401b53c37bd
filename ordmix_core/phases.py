"""The fused sweep as phases over a *block* of ratings, and the global steps between them.

A block holds all the ratings of its instances, so q(z) is local to it. Per block:
``phase_xy`` (q(x|y=1), q(y), then the block's q(z) and its per-annotator / per-category /
scalar sums), ``phase_tau`` (with the new q(z): per-annotator sums for q(tau)) and
``phase_delta`` (with the new E[tau]: per-category sums for q(delta)); each is one fused pass
over the block's ratings (``kernels.py``). On the sums reduced over blocks: ``update_tau``,
``update_delta``, ``annotator_step`` (eps, alpha, beta); F = ``block_terms`` per block +
``category_terms`` + the annotator terms.

``sweep_fused`` is the one-block case (the in-memory engine); ``dask_engine.blocks`` runs the
same phases per partition and its client the global steps. A model option that changes the
sweep is added to the phase that computes it (and to ``kernels.py``'s pass) and to the global
step that uses its sums; both engines then have it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from . import bound, kernels, updates
from .problem import Problem, State

_SCRATCH = threading.local()


def _scratch(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two (n,) float arrays reused across this thread's sweeps (no page faults per sweep)."""
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.shape[1] != n:
        buf = np.empty((2, n))
        _SCRATCH.buf = buf
    return buf[0], buf[1]


def add_rows(acc: np.ndarray) -> np.ndarray:
    """The partial sums of the chunks ``acc`` (T, ...) added row by row in chunk order: the
    fixed order that makes a pass's result independent of the threads that computed it."""
    out = acc[0].copy()
    for t in range(1, acc.shape[0]):
        out += acc[t]
    return out


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a @ b`` without BLAS: numpy's fixed-order (pairwise) sum, the same result whatever the
    BLAS library, its CPU kernel or its thread count."""
    return float(np.sum(a * b))


def chunk_width(p: Problem) -> int:
    """Floats of one chunk's partial sums in phase 1 (the widest): ``2M + N + C + 3``."""
    return 2 * p.n_instances + p.n_annotators + p.n_categories + 3


def chunks_of(p: Problem) -> int:
    """The chunks of the passes over ``p``'s ratings (``kernels.n_chunks``: data sizes only)."""
    return kernels.n_chunks(p.n_ratings, chunk_width(p))


def annotator_factors(
    p: Problem, tau_shape: np.ndarray, tau_rate: np.ndarray, eps: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What pass 1 needs per annotator: ``E[tau]``, ``log E[tau]`` and ``a_n``; each (N,).

    ``a_n`` is the annotator's part of the logit of omega (see ``kernels.pass_xy``).
    """
    e_tau, e_logtau, _ = updates.gamma_stats(tau_shape, tau_rate)
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
    e_delta, e_logdelta, _ = updates.gamma_stats(delta_shape, delta_rate)
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
    acc_inst = np.zeros((n_chunks, n_inst, 2))
    acc_ann = np.zeros((n_chunks, p.n_annotators))
    acc_cat = np.zeros((n_chunks, p.n_categories))
    acc_sc = np.zeros((n_chunks, 3))
    pass_xy = kernels.passes(n_rat, n_chunks)[0]
    pass_xy(
        (p.ann, p.inst, p.cat_l, p.level),
        (b[:-1], b[1:], p.values, p.log_pi),
        (mu_m, 1.0 / lam_m),
        tuple(ann_f),
        tuple(cat_f),
        (p.ordinal, p.spam, p.exact),
        kernels.TN_CONSTS,
        (work.ex, work.var_ws, work.omega),
        (acc_inst, acc_ann, acc_cat, acc_sc),
    )
    sums_inst = add_rows(acc_inst)
    mu_new, lam_new = updates.z_from_sums(sums_inst[:, 0], sums_inst[:, 1], p.mu, p.lam)
    return XYSums(
        mu_new,
        lam_new,
        add_rows(acc_ann),
        add_rows(acc_cat),
        add_rows(acc_sc),
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
    codes = (p.ann, p.inst, p.cat_l, p.level)
    pass_tau(codes, work.ex, work.var_ws, work.omega, (mu_m, 1.0 / lam_m), e_delta, acc_ann)
    return add_rows(acc_ann)


def phase_delta(p: Problem, work: Work, e_tau: np.ndarray, n_chunks: int) -> np.ndarray:
    """Phase 3 on a block: per category ``sum omega E[tau] S`` (C,) with the NEW ``e_tau`` (N,)."""
    acc_cat = np.zeros((n_chunks, p.n_categories))
    pass_delta = kernels.passes(p.n_ratings, n_chunks)[2]
    pass_delta((p.ann, p.inst, p.cat_l, p.level), work.var_ws, e_tau, acc_cat)
    return add_rows(acc_cat)


def update_tau(
    w_ann: np.ndarray, r_ann: np.ndarray, alpha: float, beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """q(tau) from the reduced sums: ``(shape, rate)``, each (N,)."""
    return updates.gamma_from_sums(w_ann, r_ann, alpha, beta)


def update_delta(p: Problem, w_cat: np.ndarray, d_cat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q(delta) from the reduced sums: ``(shape, rate)``, each (C,)."""
    return updates.gamma_from_sums(w_cat, d_cat, p.phi, p.eta)


def category_terms(
    p: Problem,
    w_cat: np.ndarray,
    d_cat: np.ndarray,
    delta_shape: np.ndarray,
    delta_rate: np.ndarray,
) -> float:
    """The bound's terms that involve q(delta) (ratings' share and the Gamma terms); inputs (C,)."""
    e_delta, e_logdelta, dig = updates.gamma_stats(delta_shape, delta_rate)
    f = 0.5 * dot(w_cat, e_logdelta) - 0.5 * dot(e_delta, d_cat)
    terms = bound.gamma_terms_from(delta_shape, delta_rate, e_delta, e_logdelta, dig, p.phi, p.eta)
    return f + terms


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
    e_tau, e_logtau, dig_tau = updates.gamma_stats(tau_shape, tau_rate)
    if p.spam:
        eps = updates.eps_from_sums(w_ann, p.n_per_ann)
    else:
        eps = eps_old
    alpha, beta = updates.gamma_prior_mle(e_tau, e_logtau, p.tau_rate_floor)
    f = 0.5 * dot(w_ann, e_logtau) - 0.5 * updates._LOG_2PI * float(w_ann.sum())
    if p.spam:
        f += dot(w_ann, np.log(eps)) + dot(p.n_per_ann - w_ann, np.log1p(-eps))
    f += bound.gamma_terms_from(tau_shape, tau_rate, e_tau, e_logtau, dig_tau, alpha, beta)
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
    annotator terms. ``n_chunks``: rows of partial sums (default ``chunks_of(p)``, a function
    of the data's sizes only); for a given value the result is bit-identical whatever the
    thread count (chunks summed in a fixed order), and it changes only by rounding (~1e-15)
    with it. Memory: three (L,) float arrays (E[x], Var[x] then omega S, and the new omega)
    plus ``n_chunks`` partial sums of ``chunk_width(p)`` floats (at most 2 per rating).
    """
    t_chunks = chunks_of(p) if n_chunks is None else int(n_chunks)
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
