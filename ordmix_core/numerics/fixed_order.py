"""Sums over a short last axis (the K levels of a scale) in a fixed order, left to right.

numpy's ``sum`` over an axis may pair its terms differently with the array's layout and the CPU's
vector width; these loops add the levels one at a time, so a level posterior has the same bits
on every machine and whatever the array's strides. Used by the label model and the gold map.
"""

from __future__ import annotations

import numpy as np

from . import libm


def last_sum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis, left to right: shape ``x.shape[:-1]``."""
    out = x[..., 0].copy()
    for i in range(1, x.shape[-1]):
        out += x[..., i]
    return out


def log_softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise ``log softmax`` of ``z`` (M, K): ``z - log sum_k exp z``, shifted by each row's
    maximum so that rows far from 0 stay finite."""
    z = z - z.max(axis=1, keepdims=True)
    return z - libm.log(last_sum(libm.exp(z)))[:, None]
