"""Compiled passes over the ratings for the confusion model's EM.

Each pass adds into per-annotator or per-item sums exactly as ``np.bincount(..., weights=...)``
adds (left to right from 0.0, in rating order), with the numpy code's elementwise operations
in the numpy code's order, and ``numerics.libm``'s exp and log value by value (``exp_value``,
``log_value``): the results are the numpy formulas' bits (``confusion_model.soft_tables``,
``item_log_lik`` and ``posterior``), without their
(R, K) gathers and K reductions. The label model's two passes run over the ratings grouped
once per fit by annotator or by item (``group``, a stable sort: each group's ratings in their
order), the groups over the cores in ``N_CHUNKS`` chunks: each sum is one group's, in the
same order on any number of threads. The callers use them when compiled code is on
(``kernels.USE_JIT``) and the numpy formulas otherwise; the EM's per-annotator arithmetic
between the passes is ``confusion_steps``'.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..numerics import libm
from ..numerics.jit import jit, prange

#: chunks of a grouped pass (``prange`` over them): a fixed number, so the chunks, and with them
#: every sum, are the same whatever the number of threads
N_CHUNKS = 64


class Grouped(NamedTuple):
    """The ratings grouped by a key (items or annotators), stably: each group's ratings in
    their original order. ``offsets`` (G + 1,) the group's ratings are ``offsets[g]`` to
    ``offsets[g + 1]`` of ``cols``; ``bounds`` (N_CHUNKS + 1,) the groups of each chunk,
    chunks of about equal numbers of ratings; ``cols`` the other codes (R,) in that
    order (the given arrays themselves when the key is sorted already)."""

    offsets: np.ndarray
    bounds: np.ndarray
    cols: tuple


def codes(c: np.ndarray) -> np.ndarray:
    """Codes (R,) as the passes take them: int32 when every code fits (half the memory of
    int64, and one compiled signature of each pass whatever the caller's type), else int64;
    an index's width changes no sum. No copy when they are int32 already."""
    c = np.asarray(c)
    if c.dtype == np.int32:
        return c
    small = c.size == 0 or (int(c.min()) >= 0 and int(c.max()) < 2**31)
    return c.astype(np.int32 if small else np.int64)


def _reordered(c: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``c[order]`` for codes (R,), as ``codes`` types them (a copy in a new order); weights
    (floats) keep their type."""
    c = np.asarray(c)
    return c[order] if c.dtype.kind == "f" else codes(c[order])


def group_offsets(key: np.ndarray, n: int) -> np.ndarray:
    """(n + 1,) where each group's ratings start in a stable grouping by ``key`` (R,)."""
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(key, minlength=n), out=offsets[1:])
    return offsets


def group(key: np.ndarray, n: int, *cols: np.ndarray, n_chunks: int = N_CHUNKS) -> Grouped:
    """``Grouped`` of the ratings by ``key`` (R,) codes 0..n-1, carrying ``cols`` (R,) each:
    a stable sort (``argsort(kind="stable")``), or none when ``key`` is sorted; in
    ``n_chunks`` chunks (one: the passes run on the calling thread, no parallel launch)."""
    offsets = group_offsets(key, n)
    cols = tuple(np.asarray(c) for c in cols)
    if key.size > 1 and not bool((key[1:] >= key[:-1]).all()):
        order = np.argsort(key, kind="stable")
        cols = tuple(_reordered(c, order) for c in cols)
    return Grouped(offsets, owners(offsets, n_chunks), cols)


@jit(nogil=True)
def _tables_part(lo, hi, ann, inst, rating, q, t):  # pragma: no cover - compiled
    k = q.shape[1]
    for i in range(lo, hi):  # the part's ratings in their order
        a, m, r = ann[i], inst[i], rating[i]
        for c in range(k):
            t[a, c, r] += q[m, c]


@jit(parallel=True, nogil=True)
def _soft_tables(offsets, ann, inst, rating, q, t):  # pragma: no cover - compiled
    for part in prange(offsets.size - 1):
        _tables_part(offsets[part], offsets[part + 1], ann, inst, rating, q, t)


def owners(offsets: np.ndarray, n_chunks: int) -> np.ndarray:
    """(n_chunks + 1,) bounds of ``n_chunks`` runs of groups with about equal numbers of
    ratings, from a grouping's ``offsets`` (G + 1,)."""
    n, total = offsets.size - 1, int(offsets[-1])
    targets = np.arange(1, n_chunks, dtype=np.int64) * total // n_chunks
    inner = np.minimum(np.searchsorted(offsets, targets, side="left"), n)
    return np.concatenate([[0], inner, [n]]).astype(np.int64)


def partition(annotator: np.ndarray, n: int, n_parts: int, *cols: np.ndarray) -> Grouped:
    """The ratings in ``n_parts`` parts, each the ratings of a run of annotators with about
    equal numbers of ratings, in their order (a stable partition; none for one part): a
    ``Grouped`` of the parts carrying ``annotator`` (R,) and ``cols`` (R,) each."""
    n_parts = max(int(n_parts), 1)
    runs = owners(group_offsets(annotator, n), n_parts)
    cols = tuple(np.asarray(c) for c in (annotator, *cols))
    if n_parts == 1:
        return Grouped(np.array([0, annotator.size], np.int64), np.array([0, 1], np.int64), cols)
    dtype = np.uint8 if n_parts <= 256 else np.int64  # small parts: numpy's radix sort
    part = np.repeat(np.arange(n_parts, dtype=dtype), np.diff(runs))[annotator]
    order = np.argsort(part, kind="stable")
    offsets = group_offsets(part, n_parts)
    return Grouped(offsets, owners(offsets, n_parts), tuple(_reordered(c, order) for c in cols))


def soft_tables(q: np.ndarray, by_part: Grouped, n: int) -> np.ndarray:
    """``confusion_model.soft_tables``: each annotator's table of soft truth against rating
    (N, K, K) from ``q`` (M, K) and the ratings in parts by annotator (``partition(annotator,
    N, parts, instance, rating)``), one part a core: each cell is summed in rating order, and
    ``q`` read in the ratings' order, not gathered per annotator."""
    k = q.shape[1]
    t = np.zeros((n, k, k))
    ann, inst, rating = by_part.cols[:3]
    q = np.ascontiguousarray(q)
    if by_part.offsets.size == 2:  # one part: on this thread, no parallel launch
        _tables_part(0, ann.size, ann, inst, rating, q, t)
    else:
        _soft_tables(by_part.offsets, ann, inst, rating, q, t)
    return t


@jit(nogil=True)
def _e_chunk(lo, hi, offsets, cols, logp, log_rho, q_old, q, lse):  # pragma: no cover
    """``e_step`` for items ``lo:hi``: each item's log likelihood summed over its ratings in
    their order (from 0.0, as ``np.bincount`` adds), then the posteriors with numpy's
    operations in numpy's order; the exponentials of the chunk's (item, level) cells in one
    loop on the vector units (``libm.exp_into``: ``exp_value``'s bits): a third off the
    pass's time."""
    ann, rating = cols
    k = q.shape[1]
    n = hi - lo
    moved = 0.0
    nan = False
    ll = np.empty(k)  # the item's item_log_lik row
    top = np.empty(n)
    x = np.empty(n * k)  # (item, level) of the chunk: log(rho) + ll - the item's largest
    for jj in range(n):
        j = lo + jj
        ll[:] = 0.0
        for i in range(offsets[j], offsets[j + 1]):  # the item's ratings in their order
            a, r = ann[i], rating[i]
            for c in range(k):
                ll[c] += logp[a, c, r]
        t = ll[0] + log_rho[0]
        for c in range(1, k):
            s = ll[c] + log_rho[c]
            if s > t or s != s or t != t:
                t = s if t == t else t
        top[jj] = t
        for c in range(k):
            x[jj * k + c] = (ll[c] + log_rho[c]) - t
    w = np.empty(n * k)
    libm.exp_into(x, w)  # on the vector units, subnormals the C library's
    for jj in range(n):
        j = lo + jj
        tot = w[jj * k]
        for c in range(1, k):
            tot += w[jj * k + c]
        for c in range(k):
            q[j, c] = w[jj * k + c] / tot
        lse[j] = libm.log_value(tot) + top[jj]
        for c in range(k):
            d = abs(q[j, c] - q_old[j, c])
            if d != d:
                nan = True
            elif d > moved:
                moved = d
    return np.nan if nan else moved


@jit(parallel=True, nogil=True)
def _e_step(bounds, offsets, cols, logp, log_rho, q_old, q, lse, moved):  # pragma: no cover
    for ch in prange(bounds.size - 1):
        lo, hi = bounds[ch], bounds[ch + 1]
        moved[ch] = _e_chunk(lo, hi, offsets, cols, logp, log_rho, q_old, q, lse)


def e_step(
    logp: np.ndarray,
    log_rho: np.ndarray,
    by_item: Grouped,
    q_old: np.ndarray,
) -> tuple[np.ndarray, float, float]:
    """The label model's E-step: ``confusion_model.posterior(item_log_lik(logp, ...), rho)``
    and how far it moved the level posteriors, the items over the cores.

    ``logp`` (N, K, K) log confusion matrices, ``log_rho`` (K,) ``libm.log`` of the class prior,
    ``by_item`` the ratings grouped by item (``group(instance, M, annotator, rating)``; each
    item's log likelihood summed in rating order), ``q_old`` (M, K) the posteriors before.
    Returns the new posteriors (M, K), the log evidence and ``max |q - q_old|`` (NaN if any
    difference is NaN: each chunk's, then theirs).
    """
    m, k = q_old.shape
    q = np.empty((m, k))
    lse = np.empty(m)
    moved = np.empty(by_item.bounds.size - 1)
    args = (np.ascontiguousarray(logp), np.ascontiguousarray(log_rho))
    args += (np.ascontiguousarray(q_old), q, lse)
    cols = by_item.cols[:2]
    if moved.size == 1:  # one chunk: on this thread, no parallel launch
        moved[0] = _e_chunk(0, m, by_item.offsets, cols, *args)
    else:
        _e_step(by_item.bounds, by_item.offsets, cols, *args, moved)
    return q, float(lse.sum()), float(np.nan if np.isnan(moved).any() else moved.max())


@jit(nogil=True)
def _newton_system(n, a, t, d, a_bar, lam, p, rows, grad, prec, mean, second):  # pragma: no cover
    """Annotator ``n``'s gradient and precision, ``confusion_model.newton_step``'s operations."""
    k, jn = d.shape[1], d.shape[2]
    for c in range(k):  # rows = last_sum(t)
        rows[c] = t[n, c, 0]
        for r in range(1, k):
            rows[c] += t[n, c, r]
    for jj in range(jn):  # grad = _contract(t - rows p, d) - (a - a_bar) @ lam
        pull = 0.0
        for i in range(jn):
            pull += (a[n, i] - a_bar[i]) * lam[i, jj]
        g = 0.0
        for c in range(k):
            for r in range(k):
                g += (t[n, c, r] - rows[c] * p[n, c, r]) * d[c, r, jj]
        grad[jj] = g - pull
        for ll in range(jn):
            prec[jj, ll] = lam[jj, ll]
    for c in range(k):
        mean[:] = 0.0
        second[:, :] = 0.0
        for r in range(k):
            w = p[n, c, r]
            for jj in range(jn):
                mean[jj] += w * d[c, r, jj]
                for ll in range(jn):
                    second[jj, ll] += w * (d[c, r, jj] * d[c, r, ll])
        for jj in range(jn):
            for ll in range(jn):
                prec[jj, ll] += rows[c] * (second[jj, ll] - mean[jj] * mean[ll])


@jit(nogil=True)
def _newton_solve(m, b, low, y, x):  # pragma: no cover - compiled
    """``fixed_order.cholesky(m)`` into ``low`` once ``b`` is None-like (b.shape[1] == 0), else
    ``fixed_order.cho_solve(low, b)`` into ``x`` (J, R), numpy's operations in numpy's order."""
    jn = low.shape[0]
    if b.shape[1] == 0:
        low[:, :] = 0.0
        for c in range(jn):
            s = m[c, c]
            for i in range(c):
                s -= low[c, i] * low[c, i]
            low[c, c] = math.sqrt(s if (s != s or s >= 1e-300) else 1e-300)
            for r in range(c + 1, jn):
                s = m[r, c]
                for i in range(c):
                    s -= low[r, i] * low[c, i]
                low[r, c] = s / low[c, c]
        return
    for col in range(b.shape[1]):
        for r in range(jn):
            s = b[r, col]
            for i in range(r):
                s -= low[r, i] * y[i, col]
            y[r, col] = s / low[r, r]
        for r in range(jn - 1, -1, -1):
            s = y[r, col]
            for i in range(r + 1, jn):
                s -= low[i, r] * x[i, col]
            x[r, col] = s / low[r, r]


@jit(nogil=True)
def _newton_chunk(lo, hi, a, t, d, a_bar, lam, p, max_step, a_new, var):  # pragma: no cover
    k, jn = d.shape[1], d.shape[2]
    rows, grad, mean = np.empty(k), np.empty((jn, 1)), np.empty(jn)
    prec, second, low = np.empty((jn, jn)), np.empty((jn, jn)), np.empty((jn, jn))
    y, step, eye = np.empty((jn, jn)), np.empty((jn, 1)), np.eye(jn)
    none = np.empty((jn, 0))
    for n in range(lo, hi):
        _newton_system(n, a, t, d, a_bar, lam, p, rows, grad[:, 0], prec, mean, second)
        _newton_solve(prec, none, low, y, step)
        _newton_solve(prec, grad, low, y, step)
        for jj in range(jn):
            s = step[jj, 0]
            if s < -max_step:
                s = -max_step
            elif s > max_step:
                s = max_step
            a_new[n, jj] = a[n, jj] + s
        _newton_solve(prec, eye, low, y, var[n])


@jit(parallel=True, nogil=True)
def _newton(bounds, a, t, d, a_bar, lam, p, max_step, a_new, var):  # pragma: no cover
    for ch in prange(bounds.size - 1):
        _newton_chunk(bounds[ch], bounds[ch + 1], a, t, d, a_bar, lam, p, max_step, a_new, var)


def newton_step(
    a: np.ndarray,
    t: np.ndarray,
    d: np.ndarray,
    a_bar: np.ndarray,
    lam: np.ndarray,
    p: np.ndarray,
    max_step: float,
    parallel: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """``confusion_model.newton_step`` annotator by annotator, the annotators over the cores: the
    same scalar operations in the same order, so the same bits. ``a`` (N, J), ``t`` (N, K, K),
    ``d`` (K, K, J), ``a_bar`` (J,), ``lam`` (J, J), ``p`` (N, K, K) ``confusion(a, d)``.
    ``parallel``: over the cores, else on the calling thread (no parallel launch). Returns the
    new parameters (N, J) and the covariances (N, J, J)."""
    n, jn = a.shape
    a_new = np.empty((n, jn))
    var = np.empty((n, jn, jn))
    bounds = (np.arange(N_CHUNKS + 1, dtype=np.int64) * n) // N_CHUNKS
    c = np.ascontiguousarray
    args = (c(a), c(t), c(d), c(a_bar), c(lam), c(p), float(max_step), a_new, var)
    if parallel:
        _newton(bounds, *args)
    else:  # on this thread, no parallel launch
        _newton_chunk(0, n, *args)
    return a_new, var
