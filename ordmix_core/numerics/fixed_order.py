"""Sums over a short last axis (the K levels of a scale) in a fixed order, left to right, and
Cholesky solves of small stacked matrices in a fixed order.

numpy's ``sum`` over an axis may pair its terms differently with the array's layout and the CPU's
vector width, and LAPACK's order depends on the library build; these loops add one term at a
time, so a level posterior has the same bits on every machine and whatever the array's strides.
Used by the label model (its Newton step's solves too) and its calibration.
"""

from __future__ import annotations

import numpy as np

from . import libm

#: a last axis longer than this is summed by ``np.add.accumulate`` (the same additions in the
#: same order, so the same bits, without a Python loop over a 0..100 scale's K x K cells)
ACCUMULATE_FROM = 64


def last_sum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis, left to right: shape ``x.shape[:-1]``."""
    if x.shape[-1] > ACCUMULATE_FROM:
        return np.add.accumulate(x, axis=-1)[..., -1].copy()
    out = x[..., 0].copy()
    for i in range(1, x.shape[-1]):
        out += x[..., i]
    return out


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for ``a`` (..., K) and a small ``b`` (K, J), one term of the inner sum at a time
    (elementwise products and sums: no BLAS), shape (..., J)."""
    out = a[..., 0, None] * b[0]
    for c in range(1, b.shape[0]):
        out += a[..., c, None] * b[c]
    return out


def first_sum(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_n w[n] x[n]`` over the first axis of ``x`` (N, ...), one term at a time, in order
    (no BLAS): shape ``x.shape[1:]``."""
    out = np.zeros(x.shape[1:])
    for n in range(x.shape[0]):
        out += w[n] * x[n]
    return out


def log_softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise ``log softmax`` of ``z`` (M, K): ``z - log sum_k exp z``, shifted by each row's
    maximum so that rows far from 0 stay finite."""
    z = z - z.max(axis=1, keepdims=True)
    return z - libm.log(last_sum(libm.exp(z)))[:, None]


def cholesky(m: np.ndarray) -> np.ndarray:
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


def cho_solve(low: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x (N, J, R) with (low low') x = b, from ``cholesky``'s factors and b (N, J, R)."""
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
