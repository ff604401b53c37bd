"""The confusion model's held-out predictive of each rating, compiled with ``label_choice``'s
bits.

``label_choice.confusion_log_predictive`` (and ``mixed_log_predictive``) take, for each
rating, its item's level posterior with the rating's factor divided out and the chance of its
level from there: in numpy that is some ten (L, K) temporaries and fifteen exp or log a
rating, 0.33 s a call at 1M ratings, on one core, after the race. Here the logs of the items'
posteriors and the exps of the annotators' log confusions are taken once per table (M x K and
N x K x K values instead of L x K each), and each rating is one pass over its K levels in
numpy's order of operations (the sums over the levels left to right, as ``last_sum``;
``libm``'s exp and log, whose scalars give its arrays' bits), over the cores for a large
input. The same floats as the numpy formulas (a test); about 0.1 s a call at 1M ratings.
"""

from __future__ import annotations

import numpy as np

from ..numerics import libm
from ..numerics.jit import prange
from ..vb import kernels

__all__ = ["confusion_rows"]

#: ratings per block of the parallel loop (the blocks, not the threads, fix the work's split)
BLOCK = 1 << 14


def _rows_driver(
    log_q, log_p, p, ann, inst, lev, weight, eps, spam_p, floor, out
):  # pragma: no cover - compiled
    """Per rating ``i``: ``out[i]`` = log of ``sum_c w_c P(k | c)`` over ``sum_c w_c``, ``w_c``
    the item's posterior without the rating (``log_q[m, c] - weight_i log_p[a, c, k]``, less
    its maximum, exponentiated), floored at ``floor``; mixed with the spam part when ``eps``
    is given. ``weight``, ``eps``, ``spam_p``: (L,) or empty (every rating 1; no spam part)."""
    n = out.size
    k = log_q.shape[1]
    weighted = weight.size > 0
    mixed = eps.size > 0
    for blk in prange((n + BLOCK - 1) // BLOCK):
        cav = np.empty(k)
        for i in range(blk * BLOCK, min(n, (blk + 1) * BLOCK)):
            a, m, r = ann[i], inst[i], lev[i]
            for c in range(k):
                own = log_p[a, c, r] * weight[i] if weighted else log_p[a, c, r]
                cav[c] = log_q[m, c] - own
            top = cav[0]  # a NaN anywhere makes both sums NaN, as in numpy
            for c in range(1, k):
                if cav[c] > top:
                    top = cav[c]
            w = libm.exp_value(cav[0] - top)
            num = w * p[a, 0, r]
            den = w
            for c in range(1, k):
                w = libm.exp_value(cav[c] - top)
                num += w * p[a, c, r]
                den += w
            if num < floor:  # np.maximum's: NaN stays NaN
                num = floor
            out_i = libm.log_value(num) - libm.log_value(den)
            if mixed:
                e = eps[i]
                t = e * libm.exp_value(out_i) + (1.0 - e) * spam_p[i]
                if t < floor:
                    t = floor
                out_i = libm.log_value(t)
            out[i] = out_i


_rows_parallel, _rows_serial = kernels.parallel_and_serial(_rows_driver)


def confusion_rows(
    q: np.ndarray,
    log_p: np.ndarray,
    annotator: np.ndarray,
    instance: np.ndarray,
    level: np.ndarray,
    floor: float,
    weight: np.ndarray | None = None,
    eps: np.ndarray | None = None,
    spam_p: np.ndarray | None = None,
) -> np.ndarray:
    """``label_choice.confusion_log_predictive`` (``eps`` None) or ``mixed_log_predictive``
    (``eps``, ``spam_p`` (L,)) to the bit: ``q`` (M, K), ``log_p`` (N, K, K), the codes (L,),
    ``floor`` the predictive's floor (``label_choice.FLOOR``); returns (L,)."""
    log_q = libm.log(np.maximum(q, floor))
    p = libm.exp(log_p)
    empty = np.zeros(0)
    out = np.empty(len(annotator))
    drive = _rows_parallel if kernels.use_cores(out.size) else _rows_serial
    drive(
        np.ascontiguousarray(log_q, dtype=np.float64),
        np.ascontiguousarray(log_p, dtype=np.float64),
        np.ascontiguousarray(p, dtype=np.float64),
        np.ascontiguousarray(annotator), np.ascontiguousarray(instance),
        np.ascontiguousarray(level),
        empty if weight is None else np.ascontiguousarray(weight, dtype=np.float64),
        empty if eps is None else np.ascontiguousarray(eps, dtype=np.float64),
        empty if spam_p is None else np.ascontiguousarray(spam_p, dtype=np.float64),
        float(floor),
        out,
    )  # fmt: skip
    return out
