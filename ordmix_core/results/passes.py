"""The reliability posterior's compiled pass: ``reliability._pull`` summed per annotator, in
the numpy code's order of operations and with ``numerics.libm``'s exp value by value, so the
same bits as the numpy formula on any number of threads (``reliability`` uses it when compiled
code is on, ``kernels.USE_JIT``).
"""

from __future__ import annotations

import numpy as np

from ..numerics import libm
from ..numerics.jit import jit


@jit(nogil=True)
def _pull_sums(ann, x, e, square, log_clip, chunk, out):  # pragma: no cover - compiled
    acc = np.zeros(out.size)
    for lo in range(0, ann.size, chunk):
        for i in range(lo, min(lo + chunk, ann.size)):
            el = e[ann[i]]
            r = x[i]
            if log_clip > 0.0:  # x is log r: np.clip (NaN stays NaN), then libm.exp
                if r < -log_clip:
                    r = -log_clip
                elif r > log_clip:
                    r = log_clip
                r = libm.exp_value(r)
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
