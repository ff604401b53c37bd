"""Compiled passes over the ratings for the results: the label model's EM and the reliability
posterior's mode.

Each pass adds into per-annotator or per-item sums exactly as ``np.bincount(..., weights=...)``
adds (left to right from 0.0, in rating order), with the numpy code's elementwise operations
in the numpy code's order, and ``math.exp`` / ``math.log`` (libm, as ``numerics.libm``
computes them): the results are the numpy formulas' bits (``label_model.soft_tables``,
``item_log_lik`` and ``posterior``; ``reliability._pull`` summed per annotator), without their
(R, K) gathers and K reductions. The label model's two passes run over the ratings grouped
once per fit by annotator or by item (``group``, a stable sort: each group's ratings in their
order), the groups over the cores in ``N_CHUNKS`` chunks: each sum is one group's, in the
same order on any number of threads. The callers use them when compiled code is on
(``kernels.USE_JIT``) and the numpy formulas otherwise.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..numerics.jit import jit, prange

#: chunks of a grouped pass (``prange`` over them): a fixed number, so the chunks, and with them
#: every sum, are the same whatever the number of threads
N_CHUNKS = 64


class Grouped(NamedTuple):
    """The ratings grouped by a key (items or annotators), stably: each group's ratings in
    their original order. ``offsets`` (G + 1,) the group's ratings are ``offsets[g]`` to
    ``offsets[g + 1]`` of ``cols``; ``bounds`` (N_CHUNKS + 1,) the groups of each chunk,
    chunks of about equal numbers of ratings; ``cols`` the other codes (R,) (int64) in that
    order (the given arrays themselves when the key is sorted already)."""

    offsets: np.ndarray
    bounds: np.ndarray
    cols: tuple


def group(key: np.ndarray, n: int, *cols: np.ndarray) -> Grouped:
    """``Grouped`` of the ratings by ``key`` (R,) codes 0..n-1, carrying ``cols`` (R,) each:
    a stable sort (``argsort(kind="stable")``), or none when ``key`` is sorted."""
    counts = np.bincount(key, minlength=n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    cols = tuple(np.asarray(c, np.int64) for c in cols)
    if key.size > 1 and not bool((key[1:] >= key[:-1]).all()):
        order = np.argsort(key, kind="stable")
        cols = tuple(c[order] for c in cols)
    targets = np.arange(1, N_CHUNKS, dtype=np.int64) * key.size // N_CHUNKS
    inner = np.searchsorted(offsets, targets, side="left").astype(np.int64)
    bounds = np.concatenate([[0], np.minimum(inner, n), [n]]).astype(np.int64)
    return Grouped(offsets, bounds, cols)


@jit()
def _tables_chunk(lo, hi, offsets, inst, rating, q, t):  # pragma: no cover - compiled
    k = q.shape[1]
    for a in range(lo, hi):  # annotator by annotator, each one's ratings in their order
        for i in range(offsets[a], offsets[a + 1]):
            m, r = inst[i], rating[i]
            for c in range(k):
                t[a, c, r] += q[m, c]


@jit(parallel=True)
def _soft_tables(bounds, offsets, inst, rating, q, t):  # pragma: no cover - compiled
    for ch in prange(bounds.size - 1):
        _tables_chunk(bounds[ch], bounds[ch + 1], offsets, inst, rating, q, t)


def soft_tables(q: np.ndarray, by_ann: Grouped) -> np.ndarray:
    """``label_model.soft_tables``: each annotator's table of soft truth against rating
    (N, K, K) from ``q`` (M, K) and the ratings grouped by annotator (``group(annotator, N,
    instance, rating)``), the annotators over the cores: each cell summed in rating order."""
    k = q.shape[1]
    n = by_ann.offsets.size - 1
    t = np.zeros((n, k, k))
    inst, rating = by_ann.cols
    _soft_tables(by_ann.bounds, by_ann.offsets, inst, rating, np.ascontiguousarray(q), t)
    return t


@jit()
def _e_chunk(lo, hi, offsets, ann, rating, logp, log_rho, gold, q_old, q, lse):  # pragma: no cover
    k = q.shape[1]
    ll = np.empty(k)
    w = np.empty(k)
    moved = 0.0
    nan = False
    for j in range(lo, hi):
        for c in range(k):  # item_log_lik: the item's ratings in their order
            ll[c] = 0.0
        for i in range(offsets[j], offsets[j + 1]):
            a, r = ann[i], rating[i]
            for c in range(k):
                ll[c] += logp[a, c, r]
        # posterior: numpy's operations in numpy's order
        top = ll[0] + log_rho[0]
        for c in range(1, k):
            s = ll[c] + log_rho[c]
            if s > top or s != s or top != top:
                top = s if top == top else top
        for c in range(k):
            w[c] = math.exp((ll[c] + log_rho[c]) - top)
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


@jit(parallel=True)
def _e_step(
    bounds, offsets, ann, rating, logp, log_rho, gold, q_old, q, lse, moved
):  # pragma: no cover
    for ch in prange(bounds.size - 1):
        lo, hi = bounds[ch], bounds[ch + 1]
        moved[ch] = _e_chunk(lo, hi, offsets, ann, rating, logp, log_rho, gold, q_old, q, lse)


def e_step(
    logp: np.ndarray,
    log_rho: np.ndarray,
    by_item: Grouped,
    gold: np.ndarray | None,
    q_old: np.ndarray,
) -> tuple[np.ndarray, float, float]:
    """The label model's E-step: ``label_model.posterior(item_log_lik(logp, ...), rho, gold)``
    and how far it moved the level posteriors, the items over the cores.

    ``logp`` (N, K, K) log confusion matrices, ``log_rho`` (K,) ``libm.log`` of the class prior,
    ``by_item`` the ratings grouped by item (``group(instance, M, annotator, rating)``; each
    item's log likelihood summed in rating order), ``gold`` (M,) level index or -1 (or None),
    ``q_old`` (M, K) the posteriors before. Returns the new posteriors (M, K), the log evidence
    and ``max |q - q_old|`` (NaN if any difference is NaN: each chunk's, then theirs).
    """
    m, k = q_old.shape
    q = np.empty((m, k))
    lse = np.empty(m)
    moved = np.empty(by_item.bounds.size - 1)
    gold = np.zeros(0, np.int64) if gold is None else np.asarray(gold, np.int64)
    ann, rating = by_item.cols
    _e_step(
        by_item.bounds, by_item.offsets, ann, rating, np.ascontiguousarray(logp),
        np.ascontiguousarray(log_rho), gold, np.ascontiguousarray(q_old), q, lse, moved,
    )  # fmt: skip
    return q, float(lse.sum()), float(np.nan if np.isnan(moved).any() else moved.max())


@jit(nogil=True)
def _pull_sums(ann, x, e, square, log_clip, chunk, out):  # pragma: no cover - compiled
    acc = np.zeros(out.size)
    for lo in range(0, ann.size, chunk):
        for i in range(lo, min(lo + chunk, ann.size)):
            el = e[ann[i]]
            r = x[i]
            if log_clip > 0.0:  # x is log r: np.clip (NaN stays NaN), then libm's exp
                if r < -log_clip:
                    r = -log_clip
                elif r > log_clip:
                    r = log_clip
                r = math.exp(r)
            p = (r - 1.0) / (1.0 - el + el * r)
            acc[ann[i]] += p * p if square else p
        for a in range(out.size):  # out += the chunk's sums, as numpy's chunks add
            out[a] += acc[a]
            acc[a] = 0.0


def pull_sums(
    ann: np.ndarray,
    r: np.ndarray,
    e: np.ndarray,
    square: bool,
    log_clip: float = 0.0,
    chunk: int = 0,
) -> np.ndarray:
    """Per annotator (N,) the sum over their ratings of ``reliability._pull(e[ann], r)``, or of
    its square: ``ann`` (L,) codes, ``r`` (L,) evidence ratios, ``e`` (N,) reliabilities.

    With ``log_clip`` > 0, ``r`` holds the log ratios instead and each ratio is
    ``libm.exp(np.clip(r, -log_clip, log_clip))``, computed in the pass (no (L,) array of
    ratios; the same bits). With ``chunk`` > 0 each run of ``chunk`` ratings is summed apart
    (from 0.0) and added to the total, as ``reliability._per_annotator`` adds its chunks."""
    out = np.zeros(e.shape[0])
    x = np.asarray(r, dtype=np.float64)
    e = np.ascontiguousarray(e, dtype=np.float64)
    chunk = int(chunk) if chunk > 0 else max(x.size, 1)
    _pull_sums(ann, x, e, bool(square), float(log_clip), chunk, out)
    return out
