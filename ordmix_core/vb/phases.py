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

from ..numerics import libm
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


def release_scratch() -> None:
    """Drop this thread's ``_scratch`` (two (L,) float arrays kept between sweeps so that a
    sweep does not fault its pages in again) once the sweeps are over: what follows needs the
    room (160 MB at 10M ratings). The next sweep in this thread allocates it again. Its
    remembered Gamma statistics (``remember_gamma``) go too."""
    _SCRATCH.buf = None
    forget_gamma()


def add_rows(acc: np.ndarray) -> np.ndarray:
    """The partial sums of the chunks ``acc`` (T, ...) added row by row in chunk order: the
    fixed order that makes a pass's result independent of the threads that computed it."""
    if acc.shape[0] == 1:
        return acc[0].copy()
    out = acc[0] + acc[1]
    for t in range(2, acc.shape[0]):
        out += acc[t]
    return out


#: this thread's last Gamma statistics, by the identity of their (shape, rate) arrays: the
#: last sweep's q(tau) and q(delta)
_MEMO = threading.local()
_MEMO_SIZE = 2

GammaStats = tuple[np.ndarray, np.ndarray, np.ndarray]


def remember_gamma(shape: np.ndarray, rate: np.ndarray, stats: GammaStats) -> None:
    """Keep ``stats = updates.gamma_stats(shape, rate)`` for ``recall_gamma``: a sweep's new
    q(tau), q(delta) are the next sweep's old ones, whose statistics it would compute again
    (digamma and log of every category: 20,026 values a sweep on TREC RF10 at instance
    granularity). The arrays are held, so their identity is not reused while remembered;
    nothing writes into a swept state's arrays (a warm start writes into a copy). Costs three
    (C,) and three (N,) floats while held."""
    memo = getattr(_MEMO, "items", None)
    if memo is None:
        memo = _MEMO.items = []
    memo.insert(0, (shape, rate, stats))
    del memo[_MEMO_SIZE:]


def recall_gamma(shape: np.ndarray, rate: np.ndarray) -> GammaStats:
    """``updates.gamma_stats(shape, rate)``: remembered (``remember_gamma``) for these very
    arrays, else computed; the same numbers either way."""
    for s, r, stats in getattr(_MEMO, "items", None) or ():
        if s is shape and r is rate:
            return stats
    return updates.gamma_stats(shape, rate)


def forget_gamma() -> None:
    """Drop this thread's remembered statistics (``release_scratch`` does too)."""
    _MEMO.items = None


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a @ b`` without BLAS: numpy's fixed-order (pairwise) sum, the same result whatever the
    BLAS library, its CPU kernel or its thread count."""
    return float(np.sum(a * b))


def rating_codes(p: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The passes' ``codes``: ann, inst, cat_l, level of ``p``'s ratings as unsigned views (no
    copy; codes are never negative), so that the compiled passes index without the check for
    a negative index (3% of the first pass)."""
    codes = (p.ann, p.inst, p.cat_l, p.level)
    return tuple(np.asarray(a, dtype=np.int32).view(np.uint32) for a in codes)


def chunk_width(p: Problem) -> int:
    """Floats of one chunk's partial sums in phase 1 (the widest): ``2M + N + C + 3``."""
    return 2 * p.n_instances + p.n_annotators + p.n_categories + 3


def chunks_of(p: Problem) -> int:
    """The chunks of the passes over ``p``'s ratings (``kernels.n_chunks``: data sizes only)."""
    return kernels.n_chunks(p.n_ratings, chunk_width(p))


def annotator_factors(
    p: Problem,
    tau_shape: np.ndarray,
    tau_rate: np.ndarray,
    eps: np.ndarray,
    bias_mean: np.ndarray | None = None,
    bias_prec: np.ndarray | None = None,
    stats: GammaStats | None = None,
) -> tuple[np.ndarray, ...]:
    """What pass 1 needs per annotator: ``E[tau]``, ``log E[tau]``, ``a_n``, the bias mean and
    ``1/bias_prec`` (zeros without the bias); each (N,).

    ``a_n`` is the annotator's part of the logit of omega (see ``kernels.pass_xy``);
    ``stats``: ``updates.gamma_stats`` of q(tau) if known.
    """
    e_tau, e_logtau, _ = updates.gamma_stats(tau_shape, tau_rate) if stats is None else stats
    log_e_tau = libm.log(e_tau)
    if p.bias:
        bias = (np.asarray(bias_mean, dtype=float), 1.0 / np.asarray(bias_prec, dtype=float))
    else:
        bias = (np.zeros_like(e_tau), np.zeros_like(e_tau))
    if not p.spam:
        return e_tau, log_e_tau, np.zeros_like(e_tau), *bias
    logit_eps = libm.log(eps) - libm.log1p(-eps)
    if p.exact and p.ordinal:  # E[log t] - log E[t] = digamma(shape) - log(shape)
        a_n = logit_eps + 0.5 * (e_logtau - log_e_tau)
    elif p.exact:
        a_n = logit_eps + 0.5 * e_logtau
    else:
        a_n = logit_eps + 0.5 * log_e_tau
    return e_tau, log_e_tau, a_n, *bias


def spam_table(p: Problem, s: State) -> np.ndarray:
    """``E[log pi]`` flat for pass 1: (K,) shared, or (N*K,) per annotator."""
    return updates.spam_log_table(p.spam_dist, p.log_pi, s.pi, s.dir_a).ravel()


def category_factors(
    p: Problem,
    delta_shape: np.ndarray,
    delta_rate: np.ndarray,
    stats: GammaStats | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What pass 1 needs per category: ``E[delta]``, ``log E[delta]`` and ``b_c``; each (C,).
    ``stats``: ``updates.gamma_stats`` of q(delta) if known."""
    if stats is None:
        stats = updates.gamma_stats(delta_shape, delta_rate)
    e_delta, e_logdelta, _ = stats
    log_e_delta = libm.log(e_delta)
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
    sum (1 - omega) log pi, sum H_Bernoulli(omega); inst_terms: the bound's instance terms;
    spam_cells: sum (1 - omega) per cell of the spam table (``(1, K)`` or ``(N, K)``; None
    unless the spam distribution is learned).
    """

    mu_m: np.ndarray
    lam_m: np.ndarray
    w_ann: np.ndarray
    w_cat: np.ndarray
    scalars: np.ndarray
    inst_terms: float
    spam_cells: np.ndarray | None = None


def phase_xy(
    p: Problem,
    mu_m: np.ndarray,
    lam_m: np.ndarray,
    ann_f: tuple[np.ndarray, np.ndarray, np.ndarray],
    cat_f: tuple[np.ndarray, np.ndarray, np.ndarray],
    work: Work,
    n_chunks: int,
    log_pi_t: np.ndarray | None = None,
) -> XYSums:
    """Phase 1 on a block ``p``: q(x|y=1), q(y) (into ``work``) and q(z) from the OLD factors.

    ``mu_m, lam_m`` (M,): the old q(z); ``ann_f``/``cat_f``: ``annotator_factors`` /
    ``category_factors`` of the old q(tau), eps, q(b) / q(delta); ``log_pi_t``: ``spam_table``
    of the old state (default: the fixed ``p.log_pi``). Gold instances keep their known z.
    """
    n_rat, n_inst = p.n_ratings, p.n_instances
    b = p.thresholds
    per_ann = p.spam_dist == "annotator"
    learn = p.spam and p.spam_dist != "uniform"
    table = p.log_pi if log_pi_t is None else log_pi_t
    acc_inst = np.zeros((n_chunks, n_inst, 2))
    acc_ann = np.zeros((n_chunks, p.n_annotators))
    acc_cat = np.zeros((n_chunks, p.n_categories))
    acc_sc = np.zeros((n_chunks, 3))
    acc_cell = np.zeros((n_chunks, table.size if learn else 0))
    pass_xy = kernels.passes(n_rat, n_chunks)[0]
    pass_xy(
        rating_codes(p),
        (b[:-1], b[1:], p.values, np.ascontiguousarray(table, dtype=float)),
        (mu_m, updates.inv_lam_z(lam_m, p.gold_mask)),
        tuple(ann_f),
        tuple(cat_f),
        (p.ordinal, p.spam, p.exact, per_ann, learn),
        kernels.TN_CONSTS,
        (work.ex, work.var_ws, work.omega),
        (acc_inst, acc_ann, acc_cat, acc_sc, acc_cell),
    )
    sums_inst = add_rows(acc_inst)
    mu_new, lam_new = updates.z_from_sums(sums_inst[:, 0], sums_inst[:, 1], p.mu, p.lam)
    mu_new = updates.apply_gold(mu_new, p.gold)
    cells = add_rows(acc_cell).reshape(-1, p.n_levels) if learn else None
    return XYSums(
        mu_new,
        lam_new,
        add_rows(acc_ann),
        add_rows(acc_cat),
        add_rows(acc_sc),
        bound.instance_terms_gold(mu_new, lam_new, p.mu, p.lam, p.gold_mask),
        cells,
    )


def phase_tau(
    p: Problem, work: Work, mu_m: np.ndarray, lam_m: np.ndarray, e_delta: np.ndarray, n_chunks: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """Phase 2 on a block: ``S_l`` with the NEW q(z) ``mu_m, lam_m`` (M,) and the OLD ``e_delta``
    (C,); returns per annotator ``sum omega E[delta] S`` (N,) (S without the bias terms when
    the bias is modelled) and, with the bias, per annotator ``[sum omega E[delta], sum omega
    E[delta] d]`` (N, 2) (``d = E x - mu_m``; ``bias_step`` completes both), else None.
    ``work.var_ws`` becomes omega S (without the bias terms).
    """
    acc_ann = np.zeros((n_chunks, p.n_annotators))
    acc_b = np.zeros((n_chunks, p.n_annotators if p.bias else 0, 2))
    pass_tau = kernels.passes(p.n_ratings, n_chunks)[1]
    codes = rating_codes(p)
    inst_f = (mu_m, updates.inv_lam_z(lam_m, p.gold_mask))
    pass_tau(codes, work.ex, work.var_ws, work.omega, inst_f, e_delta, acc_ann, acc_b)
    return add_rows(acc_ann), (add_rows(acc_b) if p.bias else None)


def bias_step(
    r_ann: np.ndarray, bias_sums: np.ndarray, e_tau: np.ndarray, lam_b: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q(b) from phase 2's reduced sums, and the tau sums with S's bias terms.

    ``bias_sums`` (N, 2): ``A0 = sum omega E[delta]``, ``A1 = sum omega E[delta] d``; ``e_tau``
    (N,): the OLD E[tau] (so ``sum omega rho = E[tau] A0``). Returns ``(bias_mean, bias_prec,
    r_ann)`` with ``r_ann = sum omega E[delta] S = A2 - 2 b A1 + (b^2 + 1/bias_prec) A0``.
    """
    a0, a1 = bias_sums[:, 0], bias_sums[:, 1]
    bias_mean, bias_prec = updates.update_bias(e_tau * a0, e_tau * a1, lam_b)
    r = r_ann - 2.0 * bias_mean * a1 + (bias_mean * bias_mean + 1.0 / bias_prec) * a0
    return bias_mean, bias_prec, r


def phase_delta(
    p: Problem,
    work: Work,
    e_tau: np.ndarray,
    n_chunks: int,
    bias_mean: np.ndarray | None = None,
    bias_prec: np.ndarray | None = None,
) -> np.ndarray:
    """Phase 3 on a block: per category ``sum omega E[tau] S`` (C,) with the NEW ``e_tau`` (N,)
    and, with the bias, the NEW q(b) (``bias_mean``, ``bias_prec`` (N,))."""
    acc_cat = np.zeros((n_chunks, p.n_categories))
    pass_delta = kernels.passes(p.n_ratings, n_chunks)[2]
    if p.bias:
        bias_f = (work.ex, work.omega, np.asarray(bias_mean, float), 1.0 / bias_prec)
    else:
        empty = np.zeros(0)
        bias_f = (empty, empty, empty, empty)
    pass_delta(rating_codes(p), work.var_ws, e_tau, bias_f, acc_cat)
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
    stats: GammaStats | None = None,
) -> float:
    """The bound's terms that involve q(delta) (ratings' share and the Gamma terms); inputs (C,).
    ``stats``: ``updates.gamma_stats`` of q(delta) if known."""
    if stats is None:
        stats = updates.gamma_stats(delta_shape, delta_rate)
    e_delta, e_logdelta, dig = stats
    f = 0.5 * dot(w_cat, e_logdelta) - 0.5 * dot(e_delta, d_cat)
    terms = bound.gamma_terms_from(delta_shape, delta_rate, e_delta, e_logdelta, dig, p.phi, p.eta)
    return f + terms


def annotator_step(
    p: Problem,
    w_ann: np.ndarray,
    tau_shape: np.ndarray,
    tau_rate: np.ndarray,
    eps_old: np.ndarray,
    stats: GammaStats | None = None,
) -> tuple[np.ndarray, float, float, float]:
    """eps (eq. 5) and (alpha, beta) from the reduced sums, and the bound's annotator terms.

    ``w_ann`` (N,): sum omega per annotator; returns ``(eps (N,), alpha, beta, F_annotators)``;
    ``stats``: ``updates.gamma_stats`` of q(tau) if known.
    """
    if stats is None:
        stats = updates.gamma_stats(tau_shape, tau_rate)
    e_tau, e_logtau, dig_tau = stats
    if p.spam:
        eps = updates.eps_from_sums(w_ann, p.n_per_ann)
    else:
        eps = eps_old
    alpha, beta = updates.gamma_prior_mle(e_tau, e_logtau, p.tau_rate_floor)
    f = 0.5 * dot(w_ann, e_logtau) - 0.5 * updates._LOG_2PI * float(w_ann.sum())
    if p.spam:
        f += dot(w_ann, libm.log(eps)) + dot(p.n_per_ann - w_ann, libm.log1p(-eps))
    f += bound.gamma_terms_from(tau_shape, tau_rate, e_tau, e_logtau, dig_tau, alpha, beta)
    return eps, alpha, beta, f


def block_terms(p: Problem, xy: XYSums) -> float:
    """The bound's per-block terms: rating sums from phase 1 and the instance terms (with a
    learned spam distribution its ``(1 - omega) E log pi`` is ``spam_step``'s)."""
    sum_ent, sum_spam_pi, sum_h_bern = (float(x) for x in xy.scalars)
    f = sum_ent + xy.inst_terms
    if p.spam:
        f += sum_h_bern
        if p.spam_dist == "uniform":
            f += sum_spam_pi
    return f


def bias_prior_step(bias_mean: np.ndarray, bias_prec: np.ndarray) -> tuple[float, float]:
    """lambda_b by type-II ML and the bound's bias terms: ``(lam_b, F_bias)``."""
    lam_b = updates.bias_prior_mle(bias_mean, bias_prec)
    return lam_b, bound.bias_terms(bias_mean, bias_prec, lam_b)


def spam_step(
    p: Problem, cells: np.ndarray, s: State
) -> tuple[np.ndarray | None, np.ndarray | None, float, float]:
    """The learned spam distribution from the reduced spam weight per cell (``(1, K)`` or
    ``(N, K)``) and its bound terms (the ratings' ``(1 - omega) E log pi`` and, per annotator,
    the Dirichlet's): ``(pi, dir_a, kappa, F)``."""
    if p.spam_dist == "annotator":
        dir_a, pi, kappa = updates.update_annotator_pi(cells, s.pi, s.kappa)
        f = bound.dirichlet_terms(dir_a, pi, kappa)
    else:
        dir_a, kappa = s.dir_a, s.kappa
        pi = updates.update_global_pi(cells[0])
        f = 0.0
    table = updates.spam_log_table(p.spam_dist, p.log_pi, pi, dir_a)
    return pi, dir_a, kappa, f + bound.spam_level_terms(cells, table)


def sweep_fused(p: Problem, s: State, n_chunks: int | None = None) -> tuple[State, float]:
    """``sweep`` as three fused passes over the ratings (``kernels.py``); same results.

    The single-block case of the phase functions the Dask engine runs per partition:
    ``phase_xy`` -> q(z); ``phase_tau`` -> (``bias_step`` ->) ``update_tau``; ``phase_delta``
    -> ``update_delta``; ``annotator_step`` (eps, alpha, beta), ``bias_prior_step``
    (lambda_b), ``spam_step`` (a learned spam distribution); F = ``block_terms`` +
    ``category_terms`` + the annotator terms (+ bias and spam terms). ``n_chunks``: rows of
    partial sums (default ``chunks_of(p)``, a function of the data's sizes only); for a given
    value the result is bit-identical whatever the thread count (chunks summed in a fixed
    order), and it changes only by rounding (~1e-15) with it. Memory: three
    (L,) float arrays (E[x] (then d with the bias), Var[x] then omega S, and the new omega)
    plus ``n_chunks`` partial sums of size 2M + 2N + 2C (+ 2N with the bias).
    """
    t_chunks = chunks_of(p) if n_chunks is None else int(n_chunks)
    ex, var_ws = _scratch(p.n_ratings)
    work = Work(ex, var_ws, np.empty(p.n_ratings))
    tau_old = recall_gamma(s.tau_shape, s.tau_rate)
    ann_f = annotator_factors(p, s.tau_shape, s.tau_rate, s.eps, s.bias_mean, s.bias_prec, tau_old)
    cat_f = category_factors(
        p, s.delta_shape, s.delta_rate, recall_gamma(s.delta_shape, s.delta_rate)
    )
    xy = phase_xy(p, s.mu_m, s.lam_m, ann_f, cat_f, work, t_chunks, spam_table(p, s))
    r_ann, bias_sums = phase_tau(p, work, xy.mu_m, xy.lam_m, cat_f[0], t_chunks)
    bias_mean, bias_prec, lam_b = s.bias_mean, s.bias_prec, s.lam_b
    if p.bias:
        bias_mean, bias_prec, r_ann = bias_step(r_ann, bias_sums, ann_f[0], s.lam_b)
    tau_shape, tau_rate = update_tau(xy.w_ann, r_ann, s.alpha, s.beta)
    d_cat = phase_delta(p, work, tau_shape / tau_rate, t_chunks, bias_mean, bias_prec)
    delta_shape, delta_rate = update_delta(p, xy.w_cat, d_cat)
    tau_new = updates.gamma_stats(tau_shape, tau_rate)
    delta_new = updates.gamma_stats(delta_shape, delta_rate)
    remember_gamma(tau_shape, tau_rate, tau_new)  # the next sweep's old q(tau), q(delta)
    remember_gamma(delta_shape, delta_rate, delta_new)
    eps, alpha, beta, f_ann = annotator_step(p, xy.w_ann, tau_shape, tau_rate, s.eps, tau_new)
    f_cat = category_terms(p, xy.w_cat, d_cat, delta_shape, delta_rate, delta_new)
    f = f_ann + f_cat + block_terms(p, xy)
    if p.bias:
        lam_b, f_bias = bias_prior_step(bias_mean, bias_prec)
        f += f_bias
    pi, dir_a, kappa = s.pi, s.dir_a, s.kappa
    if xy.spam_cells is not None:
        pi, dir_a, kappa, f_spam = spam_step(p, xy.spam_cells, s)
        f += f_spam
    new = State(
        xy.mu_m, xy.lam_m, tau_shape, tau_rate, delta_shape, delta_rate, eps, alpha, beta,
        work.omega, bias_mean, bias_prec, lam_b, pi, dir_a, kappa, s.eps,
    )  # fmt: skip
    return new, float(f)
