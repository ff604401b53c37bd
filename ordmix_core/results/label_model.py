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
usable matrix. Besides, each annotator answers at random (any level, evenly) a learned share
``gamma[n]`` of the time, careless:

    P_n(k | c) = (1 - gamma[n]) * adjacent-category(k | c) + gamma[n] / K.

The adjacent-category form alone cannot say that an annotator's errors land on any level, far
ones as often as near ones (a careless click): it spreads them over the nearest levels, the
continuous model predicted such a crowd's ratings better, and its worse labels shipped
(``docs/results.md``). The annotators' parameters share a Gaussian prior ``N(a_bar, inv(lam))``
whose mean and precision matrix are learned by empirical Bayes (Laplace approximation), which
keeps a favourite-answer spammer from looking like an expert, and a lenient rater from moving
the truth. Fitted by EM: the E-step is the item's posterior over levels, the M-step splits each
annotator's K x K table of soft truth against rating (Dawid-Skene's statistic) into its careless
and its other part, sets ``gamma`` to the careless share and takes one Newton step on the other
part, so a sweep costs one pass over the ratings plus O(annotators * K^2 * (2K)^2).

Each rating counts for a weight (``weight``): the default passes the continuous fit's omega,
the posterior probability that the rating came from the truth rather than the spam component,
so a rating the continuous model reads as spam (one far from its item's consensus, from an
annotator it judges unreliable) adds less to its annotator's table and to its item's
likelihood: a tempered likelihood, not a new generative model. A weight of 0 is the rating
absent, of 1 the unweighted model.

Gold items, where given, have their level fixed in the E-step, so their evidence reaches every
annotator's matrix and, through it, every item; and the map from an item's evidence to its level
that they teach (``gold_map``) moves every other item's probabilities.

All functions are pure array functions; ``fit_levels`` orchestrates. Derivation and measured
results: ``docs/results.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..numerics import libm
from ..numerics.fixed_order import cho_solve, cholesky, last_sum
from ..vb import kernels
from . import gold_map, label_steps, passes

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
#: (``careless_split``). Labels hardly depend on it: plain confusion model, label error at 3 /
#: 10 / 30, TREC 0.4544 / 0.4537 / 0.4531, Web 0.1233 / 0.1229 / 0.1225, TREC + 5 0.4739 /
#: 0.4736 / 0.4739, Web + 3 0.1187 / 0.1195 / 0.1187; the omega-weighted model at 10 / 30 /
#: 100, TREC 0.4653 / 0.4653 / 0.4650, Web 0.1229 / 0.1233 / 0.1221. Its speed does: without
#: it the shares of annotators with a few ratings crawl along a flat likelihood (TREC 312 EM
#: iterations against 102), and at 10 the weighted model's small tables still do (TREC 278
#: against 134 at 30; TREC + 5 500, not converged, against 174)
CARELESS_PRIOR = 30.0
#: a Newton step never moves a parameter further than this (log-odds)
MAX_STEP = 4.0
#: the label model's passes run over the cores from this many ratings, and its compiled Newton
#: step from this many annotators: it runs after the race, alone, so the cores are free (the
#: sweeps' ``kernels.PARALLEL_MIN_RATINGS`` is for passes that share them). Measured, EM with
#: the weights, min of 5: TREC (91,783 ratings, 762 annotators) 0.31 -> 0.20 s, Web (15,567,
#: 177) 0.073 -> 0.054 s, 30,000 simulated ratings 103 -> 80 ms, 1,500 no change; the bits
#: are the same either way
PARALLEL_MIN_RATINGS = 10_000
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


def soft_tables(
    q: np.ndarray,
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    n: int,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """Each annotator's K x K table of soft truth (rows) against rating (columns), shape (N, K, K).

    ``q`` (M, K) is each item's level posterior; ``annotator``, ``instance``, ``rating`` (R,)
    are integer codes, ratings as level indices 0..K-1; ``weight`` (R,) what each rating
    counts for (None: 1).
    """
    k = q.shape[1]
    cell = annotator * k + rating
    t = np.empty((n, k, k))
    for c in range(k):  # K reductions over the ratings
        w = q[instance, c] if weight is None else q[instance, c] * weight
        t[:, c, :] = np.bincount(cell, weights=w, minlength=n * k).reshape(n, k)
    return t


def item_log_lik(
    logp: np.ndarray,
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    m: int,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """Log likelihood of each item's ratings at each level, shape (M, K), from log P (N, K, K);
    each rating's term times its ``weight`` (R,) when given."""
    k = logp.shape[1]
    contrib = logp[annotator, :, rating]  # (R, K)
    if weight is not None:
        contrib = contrib * weight[:, None]
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
    tot = last_sum(w)[:, None]
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
    low = cholesky(cov[None])
    return a_bar, cho_solve(low, np.eye(j)[None])[0]


@dataclass(frozen=True)
class LevelFit:
    """What ``fit_levels`` learned.

    ``q`` (M, K) each item's level posterior; ``confusion`` (N, K, K) each annotator's P(k | c),
    careless answers included; ``careless`` (N,) each annotator's share of answers at random;
    ``rho`` (K,) the class prior; ``params`` (N, J), ``a_bar`` (J,), ``lam`` (J, J) the annotator
    parameters and their learned prior; ``evidence`` the log likelihood of the ratings at the
    end; ``n_iter`` EM iterations; ``converged`` whether the level posteriors settled;
    ``taught`` what gold taught the other items (``level_posterior`` with gold), else None.
    """

    q: np.ndarray
    confusion: np.ndarray
    careless: np.ndarray
    rho: np.ndarray
    params: np.ndarray
    a_bar: np.ndarray
    lam: np.ndarray
    evidence: float
    n_iter: int
    converged: bool
    taught: gold_map.GoldMap | None = None


def start(
    instance: np.ndarray, rating: np.ndarray, m: int, k: int, weight: np.ndarray | None = None
) -> np.ndarray:
    """Start: each item's share of ratings at each level (each counting for its ``weight``),
    smoothed by one rating spread evenly."""
    cell = instance * k + rating
    counts = np.bincount(cell, weights=weight, minlength=m * k).reshape(m, k) + 1.0 / k
    return counts / last_sum(counts)[:, None]


def _e_step(logp, rho, annotator, instance, rating, weight, gold, q, by_item) -> tuple:
    """The new level posteriors (M, K), the log evidence and ``max |q_new - q|``, by the
    compiled pass over the ratings grouped by item (``by_item``, a ``passes.Grouped``) or,
    when it is None, the numpy formulas (the same bits)."""
    if by_item is not None:
        return passes.e_step(logp, libm.log(rho), by_item, gold, q)
    ll = item_log_lik(logp, annotator, instance, rating, q.shape[0], weight)
    q_new, evidence = posterior(ll, rho, gold)
    return q_new, evidence, float(np.abs(q_new - q).max())


def _groupings(annotator, instance, rating, weight, n_annotators: int, n_instances: int) -> tuple:
    """For the compiled passes (``passes``): the ratings parted once by annotator and grouped
    once by item, each carrying the weights (if any); ``(None, None)`` without compiled code
    (the numpy formulas then run). Parts and chunks over the threads from
    ``PARALLEL_MIN_RATINGS`` ratings (the bits do not depend on them), else one: no parallel
    launches."""
    if not kernels.USE_JIT:
        return None, None
    extra = () if weight is None else (weight,)
    big = len(rating) >= PARALLEL_MIN_RATINGS
    threads = kernels.numba.get_num_threads() if big else 1
    by_part = passes.partition(annotator, n_annotators, threads, instance, rating, *extra)
    chunks = passes.N_CHUNKS if big else 1
    by_item = passes.group(
        instance, n_instances, instance, annotator, rating, *extra, n_chunks=chunks
    )
    return by_part, by_item


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
    weight: np.ndarray | None = None,
) -> LevelFit:
    """Fit the ordinal confusion model by EM.

    Parameters
    ----------
    annotator, instance, rating : (R,) integer codes; ratings as level indices 0..K-1.
    n_annotators, n_instances, n_levels : N, M, K.
    gold : (M,) level index of each gold item, -1 elsewhere; None when there is no gold.
    weight : (R,) what each rating counts for in the soft tables and the items' likelihoods
        (``level_posterior``: the continuous fit's omega); None: every rating 1.

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
    weight = None if weight is None else np.asarray(weight, np.float64)
    q = start(instance, rating, n_instances, k, weight)
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
    by_part, by_item = _groupings(annotator, instance, rating, weight, n_annotators, n_instances)
    gamma = np.full(n_annotators, CARELESS_START)
    p = confusion(a, d)  # the adjacent-category part, from the E-step to the Newton step
    while n_iter < max_iter:
        n_iter += 1
        if by_part is not None:
            t = passes.soft_tables(q, by_part, n_annotators)
        else:
            t = soft_tables(q, annotator, instance, rating, n_annotators, weight)
        t, gamma = careless_split(t, p, gamma)
        a, var = newton_step(a, t, d, a_bar, lam, p)
        a_bar, lam = prior_update(a, var)
        rho = (label_steps.column_sums(q) if kernels.USE_JIT else q.sum(axis=0)) + PRIOR_COUNT
        rho /= rho.sum()
        p = confusion(a, d)
        logp = libm.log(with_careless(p, gamma))
        q, evidence, moved = _e_step(
            logp, rho, annotator, instance, rating, weight, gold, q, by_item
        )
        if moved < tol:
            converged = True
            break
    return LevelFit(
        q=q,
        confusion=libm.exp(logp),
        careless=gamma,
        rho=rho,
        params=a,
        a_bar=a_bar,
        lam=lam,
        evidence=evidence,
        n_iter=n_iter,
        converged=converged,
    )


def unclamped(
    fit: LevelFit, annotator, instance, rating, n_instances: int, weight=None
) -> np.ndarray:
    """Each item's level posterior from its ratings alone (gold not imposed), shape (M, K);
    ``weight`` as ``fit_levels``'s."""
    ll = item_log_lik(libm.log(fit.confusion), annotator, instance, rating, n_instances, weight)
    return posterior(ll, fit.rho, None)[0]


def gold_levels(gold: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(M,) the level index of each item's gold value (M,; NaN: none), -1 where there is none;
    a gold value off the scale counts as its nearest level (``values`` (K,))."""
    known = np.isfinite(gold)
    out = np.full(gold.shape[0], -1, dtype=np.int64)
    out[known] = np.abs(gold[known][:, None] - values[None, :]).argmin(axis=1)
    return out


def level_posterior(
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    n_annotators: int,
    n_instances: int,
    n_levels: int,
    gold: np.ndarray | None = None,
    weight: np.ndarray | None = None,
    estimate: np.ndarray | None = None,
    own_weight: np.ndarray | None = None,
) -> tuple[np.ndarray, LevelFit]:
    """Each item's level probabilities (M, K), and the fit they come from.

    Without gold, the ordinal confusion model's posterior. ``weight`` (R,): what each rating
    counts for (the continuous fit's omega, the chance it came from the truth rather than
    spam; None: 1). With gold (``gold`` (M,) level index or -1), the fit has the gold items'
    levels imposed, and a map from each item's evidence to its level (``gold_map``) is learned
    from the gold items and applied to every other item; gold items get their level. The
    evidence: the posterior from the item's own ratings, weighted and (with ``weight``) not,
    and ``estimate`` (M,; None: left out), the continuous fit's estimate. For the gold items
    both must come from their ratings alone: ``estimate`` as if they were not gold, and
    ``own_weight`` (R,; None: ``weight``) the weights of their ratings so too.
    """
    fit = fit_levels(
        annotator, instance, rating, n_annotators, n_instances, n_levels, gold=gold, weight=weight
    )
    if gold is None or not (gold >= 0).any():
        return fit.q, fit
    known = gold >= 0
    own = weight if own_weight is None else own_weight
    base = _log(unclamped(fit, annotator, instance, rating, n_instances, own))
    unweighted = None
    if weight is not None:
        plain = fit_levels(
            annotator, instance, rating, n_annotators, n_instances, n_levels, gold=gold
        )
        unweighted = _log(unclamped(plain, annotator, instance, rating, n_instances))
    x = gold_map.evidence(base, unweighted, estimate)
    learned = gold_map.fit(base[known], x[known], gold[known])
    p = libm.exp(learned.log_proba(base, x))
    p[known] = fit.q[known]
    return p, replace(fit, taught=learned)


def _log(q: np.ndarray) -> np.ndarray:
    return libm.log(np.clip(q, 1e-300, 1.0))
