"""Ordinal confusion model: each item's level, the label a manager ships.

The continuous model (``OrdinalMixture``) gives each item a posterior mean on the scale, which
is what MSE, Pearson and NDCG reward. A label is a different decision: which of the K levels the
item is. Here the truth is one of the levels, with a learned class prior ``rho``, and each
annotator ``n`` answers level ``k`` for truth ``c`` with an adjacent-category (log-linear)
probability

    P_n(k | c) ∝ exp( sum_{s=1..k} a[n, s, c >= s] ),

two parameters per threshold ``s``: the log-odds of stepping over ``s`` when the truth is below
it and when it is at or above it. That is Dawid-Skene's confusion matrix with ``2(K-1)`` ordinal
parameters instead of ``K(K-1)`` free ones, so that an annotator with a few ratings still gets a
usable matrix. The annotators' parameters share a Gaussian prior ``N(a_bar, inv(lam))``
whose mean and precision matrix are learned by empirical Bayes (Laplace approximation), which
keeps a favourite-answer spammer from looking like an expert, and a lenient rater from moving
the truth. Fitted by EM: the E-step is the item's posterior over levels, the M-step one Newton
step per annotator on its K x K table of soft truth against rating (Dawid-Skene's statistic), so
a sweep costs one pass over the ratings plus O(annotators * K^2 * (2K)^2).

Gold items, where given, have their level fixed in the E-step, so their evidence reaches every
annotator's matrix and, through it, every item.

All functions are pure array functions; ``fit_levels`` orchestrates. Derivation and measured
results: ``docs/results.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..numerics import libm
from ..vb import kernels
from . import passes

#: floor of the learned prior precisions: an annotator's parameters never go unanchored
MIN_PRECISION = 0.3
#: added to the prior covariance's diagonal
PRIOR_RIDGE = 1e-6
#: pseudo-count added to each level of the class prior (Dirichlet smoothing)
PRIOR_COUNT = 1.0
#: EM stops when no item's level probability moves more than this
TOL = 1e-3
MAX_ITER = 500
#: a Newton step never moves a parameter further than this (log-odds)
MAX_STEP = 4.0
#: the compiled Newton step runs over the cores from this many annotators (a parallel launch
#: costs more below)
NEWTON_PARALLEL_MIN = 2048


def design(k: int) -> np.ndarray:
    """Design tensor ``D`` of shape (K, K, 2(K-1)): logit of rating k given truth c is D[c, k] @ a.

    Parameter ``2(s-1) + (c >= s)`` is the log-odds of stepping over threshold ``s`` (1-based)
    with the truth below (0) or at/above (1) it; rating ``k`` adds every threshold ``s <= k``.
    """
    d = np.zeros((k, k, 2 * (k - 1)))
    for c in range(k):
        for r in range(k):
            for s in range(1, r + 1):
                d[c, r, 2 * (s - 1) + int(c >= s)] = 1.0
    return d


# Every sum below runs in a fixed order of elementwise operations (no BLAS, LAPACK or einsum,
# whose summation order depends on the CPU and the library build): the labels, like the
# estimates, are the same bits on any machine.


def _last_sum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis, left to right."""
    out = x[..., 0].copy()
    for i in range(1, x.shape[-1]):
        out += x[..., i]
    return out


def _contract(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``sum_{c,k} x[n, c, k] d[c, k, j]``, shape (N, J), in a fixed order."""
    out = np.zeros((x.shape[0], d.shape[2]))
    for c in range(d.shape[0]):
        for k in range(d.shape[1]):
            out += x[:, c, k, None] * d[c, k][None, :]
    return out


def _cholesky(m: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors (N, J, J) of symmetric positive definite matrices (N, J, J)."""
    j = m.shape[1]
    low = np.zeros_like(m)
    for c in range(j):
        s = m[:, c, c].copy()
        for i in range(c):
            s -= low[:, c, i] * low[:, c, i]
        low[:, c, c] = np.sqrt(np.maximum(s, 1e-300))
        for r in range(c + 1, j):
            s = m[:, r, c].copy()
            for i in range(c):
                s -= low[:, r, i] * low[:, c, i]
            low[:, r, c] = s / low[:, c, c]
    return low


def _cho_solve(low: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x (N, J, R) with (low low') x = b, from ``_cholesky``'s factors and b (N, J, R)."""
    j = low.shape[1]
    y = np.empty_like(b)
    for r in range(j):
        s = b[:, r].copy()
        for i in range(r):
            s -= low[:, r, i, None] * y[:, i]
        y[:, r] = s / low[:, r, r, None]
    x = np.empty_like(b)
    for r in range(j - 1, -1, -1):
        s = y[:, r].copy()
        for i in range(r + 1, j):
            s -= low[:, i, r, None] * x[:, i]
        x[:, r] = s / low[:, r, r, None]
    return x


def confusion(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Row-stochastic confusion matrices P[n, c, k] (N, K, K).

    ``a`` (N, J) parameters, ``d`` (K, K, J) the design."""
    logits = np.zeros((a.shape[0], d.shape[0], d.shape[1]))
    for j in range(d.shape[2]):
        logits += d[None, :, :, j] * a[:, j, None, None]
    logits -= logits.max(axis=2, keepdims=True)
    p = libm.exp(logits)
    return p / _last_sum(p)[:, :, None]


def soft_tables(
    q: np.ndarray, annotator: np.ndarray, instance: np.ndarray, rating: np.ndarray, n: int
) -> np.ndarray:
    """Each annotator's K x K table of soft truth (rows) against rating (columns), shape (N, K, K).

    ``q`` (M, K) is each item's level posterior; ``annotator``, ``instance``, ``rating`` (R,)
    are integer codes, ratings as level indices 0..K-1.
    """
    k = q.shape[1]
    cell = annotator * k + rating
    t = np.empty((n, k, k))
    for c in range(k):  # K reductions over the ratings
        t[:, c, :] = np.bincount(cell, weights=q[instance, c], minlength=n * k).reshape(n, k)
    return t


def item_log_lik(
    logp: np.ndarray, annotator: np.ndarray, instance: np.ndarray, rating: np.ndarray, m: int
) -> np.ndarray:
    """Log likelihood of each item's ratings at each level, shape (M, K), from log P (N, K, K)."""
    k = logp.shape[1]
    contrib = logp[annotator, :, rating]  # (R, K)
    out = np.zeros((m, k))
    for c in range(k):
        out[:, c] = np.bincount(instance, weights=contrib[:, c], minlength=m)
    return out


def posterior(log_lik: np.ndarray, rho: np.ndarray, gold: np.ndarray | None) -> tuple:
    """Each item's level posterior (M, K) and the log evidence of all ratings.

    ``gold`` (M,) holds a level index for gold items and -1 elsewhere: a gold item's posterior is
    its level.
    """
    s = log_lik + libm.log(rho)[None, :]
    top = s.max(axis=1, keepdims=True)
    w = libm.exp(s - top)
    tot = _last_sum(w)[:, None]
    q = w / tot
    evidence = float((libm.log(tot) + top).sum())
    if gold is not None:
        known = gold >= 0
        q[known] = 0.0
        q[known, gold[known]] = 1.0
    return q, evidence


def newton_step(
    a: np.ndarray,
    t: np.ndarray,
    d: np.ndarray,
    a_bar: np.ndarray,
    lam: np.ndarray,
    p: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One Newton step per annotator on its penalised log likelihood.

    ``a`` (N, J) parameters, ``t`` (N, K, K) soft tables, ``d`` (K, K, J) design, prior mean
    ``a_bar`` (J,) and precision matrix ``lam`` (J, J). The objective, sum_{c,k} t log P(k|c)
    minus (a - a_bar)' lam (a - a_bar) / 2, is concave, so the step is an ascent direction; it
    is capped at ``MAX_STEP``. Returns the new parameters and the posterior covariance (the
    negative inverse Hessian, Laplace) at the old ones, shape (N, J, J). ``p`` (N, K, K) is
    ``confusion(a, d)`` when the caller has it already (the EM's E-step computed it). With
    compiled code on (``kernels.USE_JIT``) the step is ``passes.newton_step``: these operations
    annotator by annotator, the same bits.
    """
    p = confusion(a, d) if p is None else p
    if kernels.USE_JIT:  # the same operations annotator by annotator, over the cores
        parallel = a.shape[0] >= NEWTON_PARALLEL_MIN
        return passes.newton_step(a, t, d, a_bar, lam, p, MAX_STEP, parallel)
    k, j = d.shape[1], d.shape[2]
    rows = _last_sum(t)  # (N, K)
    dev = a - a_bar
    pull = np.zeros_like(a)  # (a - a_bar) @ lam
    for i in range(j):
        pull += dev[:, i, None] * lam[i][None, :]
    grad = _contract(t - rows[:, :, None] * p, d) - pull
    prec = np.broadcast_to(lam, (a.shape[0], j, j)).copy()
    for c in range(d.shape[0]):
        mean = np.zeros((a.shape[0], j))  # E_P[d[c, k]]
        second = np.zeros((a.shape[0], j, j))  # E_P[d d']
        for r in range(k):
            w = p[:, c, r, None]
            mean += w * d[c, r][None, :]
            second += w[:, :, None] * np.outer(d[c, r], d[c, r])[None]
        prec += rows[:, c, None, None] * (second - mean[:, :, None] * mean[:, None, :])
    low = _cholesky(prec)
    step = _cho_solve(low, grad[:, :, None])[:, :, 0]
    step = np.clip(step, -MAX_STEP, MAX_STEP)
    var = _cho_solve(low, np.broadcast_to(np.eye(j), prec.shape).copy())
    return a + step, var


def prior_update(a: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Empirical-Bayes prior mean (J,) and precision matrix (J, J) from the annotators' posteriors.

    ``a`` (N, J) posterior modes, ``var`` (N, J, J) their Laplace covariances. The prior
    covariance is the mean posterior second moment about the mean, each parameter's variance
    capped at ``1 / MIN_PRECISION`` (its row and column scaled, correlations kept) so that no
    parameter of an annotator goes unanchored, plus ``PRIOR_RIDGE`` on the diagonal (a
    direction no annotator's parameters vary in keeps a finite precision).
    """
    a_bar = a.mean(axis=0)
    dev = a - a_bar
    cov = (dev[:, :, None] * dev[:, None, :] + var).mean(axis=0)
    scale = np.sqrt(np.minimum(1.0, (1.0 / MIN_PRECISION) / np.diagonal(cov)))
    j = cov.shape[0]
    cov = cov * scale[:, None] * scale[None, :] + PRIOR_RIDGE * np.eye(j)
    low = _cholesky(cov[None])
    return a_bar, _cho_solve(low, np.eye(j)[None])[0]


@dataclass(frozen=True)
class LevelFit:
    """What ``fit_levels`` learned.

    ``q`` (M, K) each item's level posterior; ``confusion`` (N, K, K) each annotator's P(k | c);
    ``rho`` (K,) the class prior; ``params`` (N, J), ``a_bar`` (J,), ``lam`` (J, J) the annotator
    parameters and their learned prior; ``evidence`` the log likelihood of the ratings at the
    end; ``n_iter`` EM iterations; ``converged`` whether the level posteriors settled.
    """

    q: np.ndarray
    confusion: np.ndarray
    rho: np.ndarray
    params: np.ndarray
    a_bar: np.ndarray
    lam: np.ndarray
    evidence: float
    n_iter: int
    converged: bool


def start(instance: np.ndarray, rating: np.ndarray, m: int, k: int) -> np.ndarray:
    """Start: each item's share of ratings at each level, smoothed by one rating spread evenly."""
    counts = np.bincount(instance * k + rating, minlength=m * k).reshape(m, k) + 1.0 / k
    return counts / _last_sum(counts)[:, None]


def _e_step(logp, rho, annotator, instance, rating, gold, q, by_item) -> tuple:
    """The new level posteriors (M, K), the log evidence and ``max |q_new - q|``, by the
    compiled pass over the ratings grouped by item (``by_item``, a ``passes.Grouped``) or,
    when it is None, the numpy formulas (the same bits)."""
    if by_item is not None:
        return passes.e_step(logp, libm.log(rho), by_item, gold, q)
    ll = item_log_lik(logp, annotator, instance, rating, q.shape[0])
    q_new, evidence = posterior(ll, rho, gold)
    return q_new, evidence, float(np.abs(q_new - q).max())


def fit_levels(
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    n_annotators: int,
    n_instances: int,
    n_levels: int,
    gold: np.ndarray | None = None,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
) -> LevelFit:
    """Fit the ordinal confusion model by EM.

    Parameters
    ----------
    annotator, instance, rating : (R,) integer codes; ratings as level indices 0..K-1.
    n_annotators, n_instances, n_levels : N, M, K.
    gold : (M,) level index of each gold item, -1 elsewhere; None when there is no gold.

    Returns
    -------
    LevelFit
    """
    k = n_levels
    d = design(k)
    j = d.shape[2]
    annotator = np.asarray(annotator, np.int64)
    instance = np.asarray(instance, np.int64)
    rating = np.asarray(rating, np.int64)
    q = start(instance, rating, n_instances, k)
    if gold is not None:
        known = gold >= 0
        q[known] = np.eye(k)[gold[known]]
    a = np.zeros((n_annotators, j))
    a_bar = np.zeros(j)
    lam = np.eye(j)
    rho = np.full(k, 1.0 / k)
    evidence = -np.inf
    converged = False
    n_iter = 0
    # the compiled passes (``passes``) over the ratings parted once by annotator and grouped
    # once by item, else the numpy formulas
    by_part = by_item = p = None  # p: confusion(a, d), from the E-step to the Newton step
    if kernels.USE_JIT:  # parts and chunks over the threads (the bits do not depend on them)
        big = len(rating) >= kernels.PARALLEL_MIN_RATINGS  # else one: no parallel launches
        threads = kernels.numba.get_num_threads() if big else 1
        by_part = passes.partition(annotator, n_annotators, threads, instance, rating)
        chunks = passes.N_CHUNKS if big else 1
        by_item = passes.group(instance, n_instances, instance, annotator, rating, n_chunks=chunks)
    while n_iter < max_iter:
        n_iter += 1
        if by_part is not None:
            t = passes.soft_tables(q, by_part, n_annotators)
        else:
            t = soft_tables(q, annotator, instance, rating, n_annotators)
        a, var = newton_step(a, t, d, a_bar, lam, p)
        a_bar, lam = prior_update(a, var)
        rho = q.sum(axis=0) + PRIOR_COUNT
        rho /= rho.sum()
        p = confusion(a, d)
        logp = libm.log(p)
        q, evidence, moved = _e_step(logp, rho, annotator, instance, rating, gold, q, by_item)
        if moved < tol:
            converged = True
            break
    return LevelFit(
        q=q,
        confusion=libm.exp(logp),
        rho=rho,
        params=a,
        a_bar=a_bar,
        lam=lam,
        evidence=evidence,
        n_iter=n_iter,
        converged=converged,
    )


def unclamped(fit: LevelFit, annotator, instance, rating, n_instances: int) -> np.ndarray:
    """Each item's level posterior from its ratings alone (gold not imposed), shape (M, K)."""
    ll = item_log_lik(libm.log(fit.confusion), annotator, instance, rating, n_instances)
    return posterior(ll, fit.rho, None)[0]


#: ridge on the gold calibration's log-temperature and offsets (pulls them to 0: no change)
CALIBRATION_RIDGE = 1.0


def fit_calibration(q: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Crowd-wide calibration learned from gold items, parameters (K,).

    ``q`` (G, K) the gold items' level posteriors from their ratings, ``gold`` (G,) their level
    indices. The calibrated posterior is softmax(exp(theta[0]) * log q + [0, theta[1:]]): a
    temperature (how far the crowd's agreement is to be trusted) and an offset per level (where
    the crowd's levels sit against the gold's), fitted by ridge-penalised maximum likelihood.
    """
    from scipy.optimize import minimize

    k = q.shape[1]
    logq = libm.log(np.clip(q, 1e-300, 1.0))
    rows = np.arange(len(gold))

    def loss(theta: np.ndarray) -> float:
        z = calibrated_log(logq, theta)
        return float(-z[rows, gold].sum() + 0.5 * CALIBRATION_RIDGE * theta @ theta)

    return minimize(loss, np.zeros(k), method="L-BFGS-B").x


def calibrated_log(logq: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Log of the calibrated posterior (M, K) from log q (M, K) and ``fit_calibration``'s theta."""
    z = logq * libm.exp(theta[0])
    z[:, 1:] += theta[1:]
    z -= z.max(axis=1, keepdims=True)
    return z - libm.log(_last_sum(libm.exp(z)))[:, None]


def level_posterior(
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    n_annotators: int,
    n_instances: int,
    n_levels: int,
    gold: np.ndarray | None = None,
) -> tuple[np.ndarray, LevelFit]:
    """Each item's level probabilities (M, K), and the fit they come from.

    Without gold, the ordinal confusion model's posterior. With gold (``gold`` (M,) level index
    or -1), the fit has the gold items' levels imposed, a crowd-wide calibration is learned from
    how the gold items' own ratings point (``fit_calibration``) and applied to every other item;
    gold items get their level.
    """
    fit = fit_levels(annotator, instance, rating, n_annotators, n_instances, n_levels, gold=gold)
    if gold is None or not (gold >= 0).any():
        return fit.q, fit
    known = gold >= 0
    own = unclamped(fit, annotator, instance, rating, n_instances)
    theta = fit_calibration(own[known], gold[known])
    p = libm.exp(calibrated_log(libm.log(np.clip(own, 1e-300, 1.0)), theta))
    p[known] = fit.q[known]
    return p, fit


def decide(p: np.ndarray, tie: float) -> tuple[np.ndarray, np.ndarray]:
    """Label (M,) = most probable level (the decision that minimises expected label error), and
    whether it is a tie (M,): the runner-up is within ``tie`` of it, so the label is not decided
    by the ratings and must be reported as undetermined."""
    order = np.argsort(-p, axis=1, kind="stable")
    rows = np.arange(len(p))
    best = order[:, 0]
    if p.shape[1] < 2:
        return best, np.zeros(len(p), bool)
    return best, p[rows, best] - p[rows, order[:, 1]] < tie


def level_interval(p: np.ndarray, best: np.ndarray, mass: float) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest level index (M,) of the narrowest run of adjacent levels that holds the
    label and at least ``mass`` of the probability: the label's credible interval on the scale.

    Grown one level at a time from the label towards the more probable neighbour.
    """
    m, k = p.shape
    lo = best.copy()
    hi = best.copy()
    rows = np.arange(m)
    held = p[rows, best].copy()
    for _ in range(k - 1):
        short = held < mass - 1e-12
        if not short.any():
            break
        left = np.where(lo > 0, p[rows, np.maximum(lo - 1, 0)], -1.0)
        right = np.where(hi < k - 1, p[rows, np.minimum(hi + 1, k - 1)], -1.0)
        go_left = short & (left >= right) & (left >= 0)
        go_right = short & ~go_left & (right >= 0)
        lo = np.where(go_left, lo - 1, lo)
        hi = np.where(go_right, hi + 1, hi)
        held = held + np.where(go_left, left, 0.0) + np.where(go_right, right, 0.0)
    return lo, hi


#: share of an item's ratings that makes its most common level a clear majority
CLEAR_MAJORITY = 0.8


def clear_majority(
    instance: np.ndarray,
    rating: np.ndarray,
    flagged: np.ndarray,
    n_instances: int,
    n_levels: int,
    share: float = CLEAR_MAJORITY,
) -> np.ndarray:
    """Each item's clear majority: the level index (M,) that at least ``share`` of its ratings
    give, where none of its ratings is ``flagged`` (R,) (from an annotator judged unreliable);
    -1 elsewhere.

    A manager's rule over the model: trusted raters who agree this clearly are not overruled
    (the model may still give the level a low probability, and says so).
    """
    k = n_levels
    counts = np.bincount(instance * k + rating, minlength=n_instances * k).reshape(-1, k)
    n = counts.sum(axis=1)
    top = counts.argmax(axis=1)
    tainted = np.bincount(instance, weights=flagged.astype(float), minlength=n_instances) > 0
    clear = (n > 0) & (counts[np.arange(n_instances), top] >= share * n) & ~tainted
    return np.where(clear, top, -1)
