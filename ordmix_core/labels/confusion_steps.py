"""The label model's EM between its passes, compiled: each annotator's confusion matrices
(``confusion``), the careless split of its soft table (``careless_parts``) and the class
prior's sums over the items (``column_sums``).

numpy spends most of these steps on its small-array overhead, (N, K, K) at a time: 0.4 ms of
a 2 ms EM step on TREC RF10. These loops do ``confusion_model``'s operations in its order (numpy's
order for ``q.sum(axis=0)``: row by row), so they give its bits (``tests/results/
test_confusion_steps.py``); ``confusion_model`` uses them when compiled code is on
(``kernels.USE_JIT``).
"""

from __future__ import annotations

import numpy as np

from ..numerics import libm
from ..numerics.jit import jit


@jit(nogil=True)
def _confusion(a, d, p):  # pragma: no cover - compiled
    n, jn = a.shape
    k, kr = d.shape[0], d.shape[1]
    logit = np.empty(kr)
    e = np.empty(kr)
    for i in range(n):
        for c in range(k):
            for r in range(kr):
                s = 0.0
                for j in range(jn):
                    s += d[c, r, j] * a[i, j]
                logit[r] = s
            top = logit[0]  # numpy's max: NaN if any is
            for r in range(1, kr):
                v = logit[r]
                if v > top or v != v or top != top:
                    top = v if top == top else top
            for r in range(kr):
                e[r] = libm.exp_value(logit[r] - top)
            tot = e[0]
            for r in range(1, kr):
                tot += e[r]
            for r in range(kr):
                p[i, c, r] = e[r] / tot


def confusion(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``confusion_model.confusion`` (N, K, K) from ``a`` (N, J) and the design ``d`` (K, K, J):
    the same operations annotator by annotator (the logits summed over J from 0, less their
    row's maximum, ``libm.exp``, each row over its ``last_sum``), so the same bits."""
    p = np.empty((a.shape[0], d.shape[0], d.shape[1]))
    _confusion(np.ascontiguousarray(a, np.float64), np.ascontiguousarray(d, np.float64), p)
    return p


@jit(nogil=True)
def _careless_parts(t, p, gamma, kept_t, careless, total):  # pragma: no cover - compiled
    n, k, kr = t.shape
    for i in range(n):
        g = gamma[i]
        keep = 1.0 - g
        chance = g / k  # label_model.with_careless: gamma / p.shape[1]
        tot = 0.0
        car = 0.0
        for c in range(k):
            row_t = 0.0
            row_c = 0.0
            for r in range(kr):
                kp = keep * p[i, c, r]
                kept = kp / (kp + chance)
                x = t[i, c, r]
                kept_t[i, c, r] = x * kept
                y = x * (1.0 - kept)
                if r == 0:
                    row_t = x
                    row_c = y
                else:
                    row_t += x
                    row_c += y
            if c == 0:
                tot = row_t
                car = row_c
            else:
                tot += row_t
                car += row_c
        total[i] = tot
        careless[i] = car


def careless_parts(
    t: np.ndarray, p: np.ndarray, gamma: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``label_model.careless_split``'s arrays with its operations in its order, so the same
    bits: the tables without their careless part (N, K, K), each annotator's careless total and
    table total (N,), from ``t``, ``p`` (N, K, K) and ``gamma`` (N,)."""
    n = t.shape[0]
    kept_t = np.empty(t.shape)
    careless, total = np.empty(n), np.empty(n)
    c = np.ascontiguousarray
    inputs = (c(t, np.float64), c(p, np.float64), c(gamma, np.float64))
    _careless_parts(*inputs, kept_t, careless, total)
    return kept_t, careless, total


@jit(nogil=True)
def _column_sums(q, out):  # pragma: no cover - compiled
    m, k = q.shape
    for c in range(k):
        out[c] = q[0, c]
    for i in range(1, m):
        for c in range(k):
            out[c] += q[i, c]


def column_sums(q: np.ndarray) -> np.ndarray:
    """``q.sum(axis=0)`` of a C-ordered (M, K) array with numpy's order for it (row by row, a
    test checks), compiled: 0.2 ms of numpy's strided loop at TREC's 20,026 x 3."""
    q = np.ascontiguousarray(q, np.float64)
    out = np.empty(q.shape[1])
    if q.shape[0]:
        _column_sums(q, out)
    else:
        out[:] = 0.0
    return out
