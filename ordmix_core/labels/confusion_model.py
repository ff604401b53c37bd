"""Ordinal confusion model: each item's latent level, from which its label is read.

The truth of an item is one of the K levels, with a learned class prior ``rho``, and each
annotator ``n`` answers level ``k`` for truth ``c`` with an adjacent-category (log-linear)
probability

    P_n(k | c) ∝ exp( sum_{s=1..k} a[n, s, c >= s] ),

two parameters per threshold ``s``: the log-odds of stepping over ``s`` when the truth is below
it and when it is at or above it, the second never below the first (``ordered``: an
annotator's answers rise with the truth). That is Dawid-Skene's confusion matrix with
``2(K-1)`` ordinal parameters instead of ``K(K-1)`` free ones, so that an annotator with a few
ratings still gets a usable matrix. Besides, each annotator answers at random (any level,
evenly) a learned share ``gamma[n]`` of the time, careless:

    P_n(k | c) = (1 - gamma[n]) * adjacent-category(k | c + b[n]) + gamma[n] / K,

with ``b[n]`` the annotator's shift, usually 0: one who rates a level above (or below) the
truth reads the truth one level up (down), kept on the scale (``confusion_shift``).

The annotators' parameters share a Gaussian prior ``N(a_bar, inv(lam))``, learned by empirical
Bayes (Laplace approximation), which keeps a favourite-answer spammer from looking like an
expert and a lenient rater from moving the truth. Its mean is anchored (``anchored_mean``): the
average annotator is unbiased, so the latent levels are the scale's levels and not types of
disagreement. Fitted by EM: the E-step is each item's posterior over levels, the M-step splits
each annotator's K x K table of soft truth against rating (Dawid-Skene's statistic) into its
careless and its other part, sets ``gamma`` to the careless share and takes one Newton step on
the other part for each shift, keeping the best; a round costs one pass over the ratings plus
O(annotators * K^2 * (2K)^2) a shift.

Gold items, where given, are the expert's ratings: one more annotator whose confusion is
learned freely (from a prior, ``fit``), so that what the gold items say reaches every
annotator's matrix and, through it, every item, without forcing the crowd's latent level onto
the expert's.

All functions are pure array functions; ``fit`` orchestrates. Measured results:
``docs/results.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..numerics import libm
from ..numerics.fixed_order import cho_solve, cholesky, last_sum
from ..vb import kernels
from . import confusion_passes as passes
from . import confusion_shift as shift_rule
from . import confusion_steps as label_steps
from .confusion_ratings import (  # noqa: F401 - the numpy formulas, named here too
    ItemRatings,
    column_sums,
    gold_levels,
    item_log_lik,
    own_posterior,
    own_posterior_of,
    posterior,
    soft_tables,
    start,
    with_expert,
)

#: the pseudo-items per latent level with which the expert's confusion starts from its prior
#: (the gold items teach the rest): chosen leave-one-data-set-out over 3, 10 and 30 with 10% of
#: each set's gold in five draws (``docs/results.md``)
EXPERT_PRIOR_ITEMS = 3.0
#: floor of the learned prior precisions: an annotator's parameters never go unanchored
MIN_PRECISION = 0.3
#: added to the prior covariance's diagonal
PRIOR_RIDGE = 1e-6
#: pseudo-count added to each level of the class prior (Dirichlet smoothing)
PRIOR_COUNT = 1.0
#: EM stops when no item's level probability moves more than this
TOL = 1e-3
MAX_ITER = 500
#: each annotator's careless share at the start of the EM (``gamma``, see the module)
CARELESS_START = 0.05
#: each annotator's careless share counts this many ratings more at the crowd's pooled share
#: (``careless_split``): an annotator with four ratings is not judged careless from them alone,
#: and the EM does not crawl along their flat likelihood (labels move by < 0.001 between 10 and
#: 30 on TREC and Web; TREC's EM takes 3 times the rounds without it)
CARELESS_PRIOR = 30.0
#: a Newton step never moves a parameter further than this (log-odds)
MAX_STEP = 4.0
#: the label model's compiled Newton step runs over the cores from this many annotators: it
#: runs after the race, alone, so the cores are free; the bits are the same either way (its
#: passes over the ratings: ``confusion_ratings.PARALLEL_MIN_RATINGS``)
NEWTON_PARALLEL_MIN = 64


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


def _contract(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``sum_{c,k} x[n, c, k] d[c, k, j]``, shape (N, J), in a fixed order."""
    out = np.zeros((x.shape[0], d.shape[2]))
    for c in range(d.shape[0]):
        for k in range(d.shape[1]):
            out += x[:, c, k, None] * d[c, k][None, :]
    return out


def confusion(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Row-stochastic confusion matrices P[n, c, k] (N, K, K).

    ``a`` (N, J) parameters, ``d`` (K, K, J) the design (compiled: ``label_steps``)."""
    if kernels.USE_JIT:
        return label_steps.confusion(a, d)
    logits = np.zeros((a.shape[0], d.shape[0], d.shape[1]))
    for j in range(d.shape[2]):
        logits += d[None, :, :, j] * a[:, j, None, None]
    logits -= logits.max(axis=2, keepdims=True)
    p = libm.exp(logits)
    return p / last_sum(p)[:, :, None]


def careless_split(
    t: np.ndarray, p: np.ndarray, gamma: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The M-step's share of careless answers: each annotator's soft table ``t`` (N, K, K)
    without its careless part, and the new careless share (N,).

    ``p`` (N, K, K) the adjacent-category confusion, ``gamma`` (N,) the careless shares: a
    cell's careless part is ``gamma / K`` of its chance ``(1 - gamma) p + gamma / K``. The new
    share is the annotator's careless total over its table's, each annotator counted with
    ``CARELESS_PRIOR`` more ratings at the crowd's pooled share (an annotator with four
    ratings is not judged careless from them alone, and the EM does not crawl along their
    flat likelihood). The tables and totals compiled: ``label_steps.careless_parts``."""
    if kernels.USE_JIT:
        kept_t, careless, total = label_steps.careless_parts(t, p, gamma)
    else:
        # (N, K, K) the share of each cell from the adjacent categories
        kept = (1.0 - gamma[:, None, None]) * p / with_careless(p, gamma)
        total = last_sum(last_sum(t))
        careless = last_sum(last_sum(t * (1.0 - kept)))
        kept_t = t * kept
    pooled = math.fsum(careless) / max(math.fsum(total), 1e-300)  # exact: any order, same bits
    return kept_t, (careless + CARELESS_PRIOR * pooled) / (total + CARELESS_PRIOR)


def with_careless(p: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """The annotators' confusion (N, K, K) with their careless share ``gamma`` (N,) of answers
    at random: ``(1 - gamma) p + gamma / K``."""
    g = gamma[:, None, None]
    return (1.0 - g) * p + g / p.shape[1]


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
    rows = last_sum(t)  # (N, K)
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
    low = cholesky(prec)
    step = cho_solve(low, grad[:, :, None])[:, :, 0]
    step = np.clip(step, -MAX_STEP, MAX_STEP)
    var = cho_solve(low, np.broadcast_to(np.eye(j), prec.shape).copy())
    return a + step, var


def ordered(a: np.ndarray, var: np.ndarray) -> np.ndarray:
    """The annotators' parameters ``a`` (N, J) with every annotator's answers rising with the
    truth: at each threshold, stepping over it at least as likely when the truth is at or above
    it as when it is below (``a[:, 1::2] >= a[:, 0::2]``). An ordinal scale means that much;
    without it a latent level can become a type of disagreement (a level whose items most
    annotators rate lower than a lower level's) rather than a level of the scale.

    An annotator whose parameters break it is moved to the best ordered point of its Newton
    step's quadratic model: the projection in the metric of that step's Hessian, the inverse
    of ``var`` (N, J, J). Active sets: a broken threshold joins, one whose multiplier turns
    negative leaves, for at most twice as many rounds as there are thresholds; a threshold
    still broken then (the rounds cycling on rounding errors) gets the mean of its two
    parameters. Annotators already ordered are unchanged. Returns a new array."""
    gap = a[:, 1::2] - a[:, 0::2]  # (N, S)
    out = a.copy()
    rows = np.flatnonzero((gap < 0.0).any(axis=1))
    if rows.size == 0:
        return out
    s = gap.shape[1]
    x0, g0 = a[rows], gap[rows]
    v = var[rows]
    vc = v[:, :, 1::2] - v[:, :, 0::2]  # (R, J, S): V c_s, with c_s' x the gap at s
    cvc = vc[:, 1::2, :] - vc[:, 0::2, :]  # (R, S, S): c_s' V c_t
    active = g0 < 0.0
    for _ in range(2 * s):
        both = active[:, :, None] & active[:, None, :]
        m = np.where(both, cvc, 0.0) + np.eye(s) * ~active[:, :, None]
        mu = cho_solve(cholesky(m), np.where(active, -g0, 0.0)[:, :, None])[:, :, 0]
        x = x0.copy()
        for t in range(s):  # x0 + V C' mu, in a fixed order
            x += vc[:, :, t] * mu[:, t, None]
        g = x[:, 1::2] - x[:, 0::2]
        leave = active & (mu < 0.0)
        join = ~active & (g < 0.0)
        if not (leave | join).any():
            break
        active = (active & ~leave) | join
    mid = 0.5 * (x[:, 1::2] + x[:, 0::2])
    x[:, 0::2] = np.where(g < 0.0, mid, x[:, 0::2])
    x[:, 1::2] = np.where(g < 0.0, mid, x[:, 1::2])
    out[rows] = x
    return out


def anchored_mean(a: np.ndarray) -> np.ndarray:
    """The prior mean (J,) of the annotators' parameters ``a`` (N, J): the average annotator
    is unbiased, so it is ``-kappa`` for stepping over a threshold from below the truth and
    ``+kappa`` from at or above it, at every threshold, with one sharpness ``kappa`` (the
    mean of those half-differences over the annotators and thresholds, never below 0).

    Without it the latent levels are free to become types of disagreement rather than the
    scale's levels: on metaphor-novelty (a generous crowd) the free mean made level 3 a class
    of items rated near-uniformly, 19% of the items against the expert's 3%."""
    m = a.mean(axis=0)
    half = m[1::2] - m[0::2]
    kappa = max(math.fsum(half) / max(half.size, 1) / 2.0, 0.0)
    out = np.empty_like(m)
    out[0::2] = -kappa
    out[1::2] = kappa
    return out


def prior_update(a: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Empirical-Bayes prior mean (J,) and precision matrix (J, J) from the annotators' posteriors.

    ``a`` (N, J) posterior modes, ``var`` (N, J, J) their Laplace covariances. The mean is
    ``anchored_mean``; the covariance is the mean posterior second moment about it, each
    parameter's variance capped at ``1 / MIN_PRECISION`` (its row and column scaled,
    correlations kept) so that no parameter of an annotator goes unanchored, plus
    ``PRIOR_RIDGE`` on the diagonal (a direction no annotator's parameters vary in keeps a
    finite precision).
    """
    a_bar = anchored_mean(a)
    dev = a - a_bar
    cov = (dev[:, :, None] * dev[:, None, :] + var).mean(axis=0)
    scale = np.sqrt(np.minimum(1.0, (1.0 / MIN_PRECISION) / np.diagonal(cov)))
    j = cov.shape[0]
    cov = cov * scale[:, None] * scale[None, :] + PRIOR_RIDGE * np.eye(j)
    low = cholesky(cov[None])
    return a_bar, cho_solve(low, np.eye(j)[None])[0]


@dataclass(frozen=True)
class ConfusionFit:
    """What ``fit`` learned.

    ``q`` (M, K) each item's level posterior; ``confusion`` (N, K, K) each annotator's P(k | c),
    careless answers included; ``careful`` (N, K, K) the same without them (the
    adjacent-category part); ``careless`` (N,) each annotator's share of answers at random;
    ``rho`` (K,) the class prior; ``params`` (N, J), ``a_bar`` (J,), ``lam`` (J, J) the annotator
    parameters and their learned prior; ``evidence`` the log likelihood of the ratings at the
    end; ``n_iter`` EM iterations; ``converged`` whether the level posteriors settled;
    ``expert`` (K, K) the expert's confusion learned from the gold items (None without gold);
    ``shift`` (N,) each annotator's shift of the truth (``confusion_shift``), usually 0.
    """

    q: np.ndarray
    confusion: np.ndarray
    careful: np.ndarray
    careless: np.ndarray
    rho: np.ndarray
    params: np.ndarray
    a_bar: np.ndarray
    lam: np.ndarray
    evidence: float
    n_iter: int
    converged: bool
    expert: np.ndarray | None = None
    shift: np.ndarray | None = None


@dataclass
class Parameters:
    """The label fit's parameters between two E-steps: ``a`` (N, J) and their prior ``a_bar``
    (J,), ``lam`` (J, J); ``gamma`` (N,) the careless shares; ``rho`` (K,) the class prior;
    ``p`` (N, K, K) the careful confusions of the truth (``own`` read at each annotator's
    ``shift`` (N,)); ``own`` (N, K, K) the adjacent-category confusions of ``a``; ``logp`` (N
    (+1 with the expert), K, K) the log confusions the E-step reads; ``expert`` (K, K) the
    expert's confusion (None without gold)."""

    a: np.ndarray
    a_bar: np.ndarray
    lam: np.ndarray
    gamma: np.ndarray
    rho: np.ndarray
    p: np.ndarray
    own: np.ndarray
    shift: np.ndarray
    logp: np.ndarray | None = None
    expert: np.ndarray | None = None


def first_parameters(n: int, k: int) -> Parameters:
    """The parameters before the first M-step: every annotator at the prior's mean 0 (an
    even confusion), unshifted, ``CARELESS_START`` careless, an even class prior."""
    j = 2 * (k - 1)
    a = np.zeros((n, j))
    p = confusion(a, design(k))
    return Parameters(
        a=a,
        a_bar=np.zeros(j),
        lam=np.eye(j),
        gamma=np.full(n, CARELESS_START),
        rho=np.full(k, 1.0 / k),
        p=p,
        own=p,
        shift=np.zeros(n, dtype=np.int64),
    )


def m_step(
    prev: Parameters,
    t: np.ndarray,
    q_sums: np.ndarray,
    d: np.ndarray,
    expert_prior: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    shift_prior: float | None = None,
) -> Parameters:
    """One M-step from the soft tables ``t`` (N (+1: the expert's last), K, K) and the
    item posteriors' column sums ``q_sums`` (K,): each annotator's careless split and its
    shift's Newton step (``shifted_step``), the anchored prior, the class prior, the confusions
    and their logs (with the expert's, learned from its table and ``expert_prior(careful,
    rho)`` worth ``EXPERT_PRIOR_ITEMS`` items, when ``expert_prior`` is given); ``shift_prior``:
    ``shifted_step``'s."""
    n = prev.a.shape[0]
    crowd, gamma = careless_split(t[:n], prev.p, prev.gamma)
    a, var, shift, own = shifted_step(prev, crowd, d, shift_prior)
    a_bar, lam = prior_update(a, var)
    rho = q_sums + PRIOR_COUNT
    rho /= rho.sum()
    p = shift_rule.shifted_confusion(own, shift)
    logp = libm.log(with_careless(p, gamma))
    e_conf = None
    if expert_prior is not None:
        e_conf = t[n] + EXPERT_PRIOR_ITEMS * expert_prior(p, rho)
        e_conf /= last_sum(e_conf)[:, None]
        logp = np.concatenate([logp, libm.log(e_conf)[None]])
    return Parameters(a, a_bar, lam, gamma, rho, p, own, shift, logp, e_conf)


def shifted_step(
    prev: Parameters, crowd: np.ndarray, d: np.ndarray, prior: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each annotator's ordered Newton step from ``prev.a`` on its careful table ``crowd``
    (N, K, K) read at each shift (``confusion_shift.shifts``), and the shift whose step
    reaches the highest penalised likelihood plus the shift's log prior (``prior``: None,
    ``confusion_shift.SHIFT_PRIOR``; ties: the first tried, 0 first). Returns the parameters
    (N, J), their Laplace covariances (N, J, J), the shifts (N,) and the adjacent-category
    confusions of the parameters (N, K, K), computed once for the scores."""
    prior = shift_rule.SHIFT_PRIOR if prior is None else prior
    tried = shift_rule.shifts(d.shape[0], prior)
    n = prev.a.shape[0]
    best = np.full(n, -np.inf)
    a, var = prev.a.copy(), np.zeros((n, *prev.lam.shape))
    own, shift = np.empty_like(prev.own), np.zeros(n, dtype=np.int64)
    for s in tried:
        table = crowd if s == 0 else shift_rule.shifted_tables(crowd, s)
        a_s, var_s = newton_step(prev.a, table, d, prev.a_bar, prev.lam, prev.own)
        a_s = ordered(a_s, var_s)
        own_s = confusion(a_s, d)
        if len(tried) == 1:
            return a_s, var_s, shift, own_s
        score = shift_rule.penalised(table, libm.log(own_s), a_s, prev.a_bar, prev.lam)
        score += shift_rule.log_prior(s, prior)
        take = score > best
        best[take], a[take], var[take], shift[take] = score[take], a_s[take], var_s[take], s
        own[take] = own_s[take]
    return a, var, shift, own


def fitted(
    q: np.ndarray | None, par: Parameters, evidence: float, n_iter: int, converged: bool
) -> ConfusionFit:
    """The ``ConfusionFit`` of the last M-step's parameters and the E-step's ``q``."""
    n = par.a.shape[0]
    return ConfusionFit(
        q=q,
        confusion=libm.exp(par.logp[:n]),
        careful=par.p,
        shift=par.shift,
        careless=par.gamma,
        rho=par.rho,
        params=par.a,
        a_bar=par.a_bar,
        lam=par.lam,
        evidence=evidence,
        n_iter=n_iter,
        converged=converged,
        expert=par.expert,
    )


def fit(
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    n_annotators: int,
    n_instances: int,
    n_levels: int,
    gold: np.ndarray | None = None,
    expert_prior: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
    shift_prior: float | None = None,
) -> ConfusionFit:
    """Fit the ordinal confusion model by EM (the module's docstring).

    ``annotator``, ``instance``, ``rating`` (R,): integer codes, ratings as level indices
    0..K-1; ``n_annotators``, ``n_instances``, ``n_levels``: N, M, K. ``gold`` (M,): a gold
    item's level index, -1 elsewhere (None: no gold); a gold level is the expert's rating of
    the item (``with_expert``), whose confusion (K, K) is learned freely from the gold items,
    each row starting from ``expert_prior(careful, rho)`` (the crowd's careful confusions
    (N, K, K) and the class prior, each round) worth ``EXPERT_PRIOR_ITEMS`` items.
    ``shift_prior``: the prior probability of a shifted annotator (None:
    ``confusion_shift.SHIFT_PRIOR``; 0: no shifts).
    """
    k = n_levels
    d = design(k)
    annotator, instance, rating = (np.asarray(c) for c in (annotator, instance, rating))
    n = n_annotators
    q = start(instance, rating, n_instances, k)
    expert = gold is not None and bool((gold >= 0).any())
    if expert:
        annotator, instance, rating = with_expert(annotator, instance, rating, gold, n)
    ratings = ItemRatings(annotator, instance, rating, n + int(expert), n_instances)
    par = first_parameters(n, k)
    evidence = -np.inf
    converged = False
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        expert_p = expert_prior if expert else None
        par = m_step(par, ratings.tables(q), column_sums(q), d, expert_p, shift_prior)
        q, evidence, moved = ratings.e_step(par.logp, par.rho, q)
        if moved < tol:
            converged = True
            break
    return fitted(q, par, evidence, n_iter, converged)
