"""Compiled passes over the ratings for the results: the label model's EM and the reliability
posterior's mode.

Each pass is one loop over the ratings in their order, adding into per-annotator or per-item
sums exactly as ``np.bincount(..., weights=...)`` adds (left to right from 0.0), with the
numpy code's elementwise operations in the numpy code's order, and ``math.exp`` / ``math.log``
(libm, as ``numerics.libm`` computes them): the results are the numpy formulas' bits
(``label_model.soft_tables``, ``item_log_lik`` and ``posterior``; ``reliability._pull``
summed per annotator), without their (R, K) gathers and K reductions. The callers use them
when compiled code is on (``kernels.USE_JIT``) and the numpy formulas otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics.jit import jit


@jit(nogil=True)
def _soft_tables(ann, inst, rating, q, t):  # pragma: no cover - compiled
    k = q.shape[1]
    for i in range(ann.size):
        a, m, r = ann[i], inst[i], rating[i]
        for c in range(k):
            t[a, c, r] += q[m, c]


def soft_tables(
    q: np.ndarray, annotator: np.ndarray, instance: np.ndarray, rating: np.ndarray, n: int
) -> np.ndarray:
    """``label_model.soft_tables``: each annotator's table of soft truth against rating
    (N, K, K) from ``q`` (M, K) and the codes (R,) (int64), in one pass over the ratings."""
    k = q.shape[1]
    t = np.zeros((n, k, k))
    _soft_tables(annotator, instance, rating, np.ascontiguousarray(q), t)
    return t


@jit(nogil=True)
def _e_step(ann, inst, rating, logp, log_rho, gold, q_old, ll, q, lse):  # pragma: no cover
    m, k = q.shape
    for i in range(ann.size):  # item_log_lik: per item, in rating order
        a, j, r = ann[i], inst[i], rating[i]
        for c in range(k):
            ll[j, c] += logp[a, c, r]
    moved = 0.0
    nan = False
    w = np.empty(k)
    for j in range(m):  # posterior, item by item, numpy's operations in numpy's order
        top = ll[j, 0] + log_rho[0]
        for c in range(1, k):
            s = ll[j, c] + log_rho[c]
            if s > top or s != s or top != top:
                top = s if top == top else top
        for c in range(k):
            w[c] = math.exp((ll[j, c] + log_rho[c]) - top)
        tot = w[0]
        for c in range(1, k):
            tot += w[c]
        for c in range(k):
            q[j, c] = w[c] / tot
        lse[j] = (math.log(tot) if tot > 0.0 else (-np.inf if tot == 0.0 else np.nan)) + top
        if gold.size and gold[j] >= 0:
            for c in range(k):
                q[j, c] = 0.0
            q[j, gold[j]] = 1.0
        for c in range(k):
            d = abs(q[j, c] - q_old[j, c])
            if d != d:
                nan = True
            elif d > moved:
                moved = d
    return np.nan if nan else moved


def e_step(
    logp: np.ndarray,
    log_rho: np.ndarray,
    annotator: np.ndarray,
    instance: np.ndarray,
    rating: np.ndarray,
    gold: np.ndarray | None,
    q_old: np.ndarray,
) -> tuple[np.ndarray, float, float]:
    """The label model's E-step: ``label_model.posterior(item_log_lik(logp, ...), rho, gold)``
    and how far it moved the level posteriors.

    ``logp`` (N, K, K) log confusion matrices, ``log_rho`` (K,) ``libm.log`` of the class prior,
    the codes (R,) (int64), ``gold`` (M,) level index or -1 (or None), ``q_old`` (M, K) the
    posteriors before. Returns the new posteriors (M, K), the log evidence and
    ``max |q - q_old|``.
    """
    m, k = q_old.shape
    ll = np.zeros((m, k))
    q = np.empty((m, k))
    lse = np.empty(m)
    gold = np.zeros(0, np.int64) if gold is None else np.asarray(gold, np.int64)
    moved = _e_step(
        annotator, instance, rating, np.ascontiguousarray(logp), np.ascontiguousarray(log_rho),
        gold, np.ascontiguousarray(q_old), ll, q, lse,
    )  # fmt: skip
    return q, float(lse.sum()), float(moved)


@jit(nogil=True)
def _pull_sums(ann, r, e, square, out):  # pragma: no cover - compiled
    for i in range(ann.size):
        el = e[ann[i]]
        p = (r[i] - 1.0) / (1.0 - el + el * r[i])
        out[ann[i]] += p * p if square else p


def pull_sums(ann: np.ndarray, r: np.ndarray, e: np.ndarray, square: bool) -> np.ndarray:
    """Per annotator (N,) the sum over their ratings of ``reliability._pull(e[ann], r)``, or of
    its square: ``ann`` (L,) codes, ``r`` (L,) evidence ratios, ``e`` (N,) reliabilities."""
    out = np.zeros(e.shape[0])
    _pull_sums(ann, r, np.ascontiguousarray(e, dtype=np.float64), bool(square), out)
    return out
